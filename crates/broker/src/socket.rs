//! The broker's socket in a private directory: the directory is made 0700 (or must
//! already be this user's with no group or other permissions), a stale socket is
//! replaced, a live one (another broker) is not, and the socket file is 0600.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, bail};

/// Makes or checks `socket`'s directory and clears a stale socket.
pub(super) fn prepare(socket: &Path, uid: u32) -> anyhow::Result<()> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .with_context(|| format!("the socket path {} has no directory", socket.display()))?;
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot make the broker's directory {}", dir.display()))?;
            // The mode is masked by the umask; make it exactly 0700.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("cannot make {} private (0700)", dir.display()))?;
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot inspect {}", dir.display()));
        }
        Ok(meta) => check_dir(dir, &meta, uid)?,
    }
    match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot inspect {}", socket.display())),
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                bail!(
                    "{} exists and is not a socket; remove it or choose another --socket",
                    socket.display()
                );
            }
            if std::os::unix::net::UnixStream::connect(socket).is_ok() {
                bail!(
                    "another broker is listening on {}; stop it first, or give this one \
                     another --socket",
                    socket.display()
                );
            }
            // Nobody answers: a broker that died left it.
            std::fs::remove_file(socket)
                .with_context(|| format!("cannot remove the stale socket {}", socket.display()))
        }
    }
}

/// Refuses a directory another user could reach into or own.
fn check_dir(dir: &Path, meta: &std::fs::Metadata, uid: u32) -> anyhow::Result<()> {
    let shown = dir.display();
    if meta.file_type().is_symlink() {
        bail!(
            "the broker's directory {shown} is a symbolic link; the broker wants a real \
             directory it owns: remove the link or choose another --socket"
        );
    }
    if !meta.is_dir() {
        bail!("{shown} is not a directory; remove it or choose another --socket");
    }
    if meta.uid() != uid {
        bail!(
            "the broker's directory {shown} belongs to uid {}, not to this user (uid {uid}): \
             another user could swap the socket; remove it (rm -r {shown}) as its owner, or \
             choose another --socket",
            meta.uid()
        );
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the broker's directory {shown} has permissions {mode:04o}, open to other users; \
             make it private with `chmod 700 {shown}`"
        );
    }
    Ok(())
}

/// Makes the socket file 0600 once bound.
pub(super) fn restrict(socket: &Path) -> anyhow::Result<()> {
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make the socket {} private (0600)", socket.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uid() -> u32 {
        rustix::process::getuid().as_raw()
    }

    #[test]
    fn a_missing_directory_is_made_private() {
        let tmp = tempfile::tempdir().unwrap();
        let socket = tmp.path().join("a/b/broker.sock");
        prepare(&socket, uid()).unwrap();
        let meta = std::fs::metadata(tmp.path().join("a/b")).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
    }

    #[test]
    fn an_open_or_foreign_directory_is_refused_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("open");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let error = prepare(&dir.join("broker.sock"), uid())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("0755") && error.contains("chmod 700"),
            "{error}"
        );

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let error = prepare(&dir.join("broker.sock"), uid() + 1)
            .unwrap_err()
            .to_string();
        assert!(error.contains("belongs to uid"), "{error}");
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_live_one_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let socket = dir.join("broker.sock");
        prepare(&socket, uid()).unwrap();
        let live = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let error = prepare(&socket, uid()).unwrap_err().to_string();
        assert!(error.contains("another broker"), "{error}");
        drop(live);
        prepare(&socket, uid()).unwrap();
        assert!(!socket.exists());
    }
}
