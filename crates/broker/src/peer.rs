//! Who is on the other end of a broker connection: the peer's uid and pid as the
//! kernel recorded them at `connect` (`SO_PEERCRED` on Linux; `getpeereid` and
//! `LOCAL_PEEREPID` on macOS, through tokio), and the executable it runs.
//!
//! The executable (Linux) is read through a pidfd so that a recycled pid cannot
//! pass for the peer: the pidfd comes from the socket itself (`SO_PEERPIDFD`,
//! Linux ≥ 6.5: it names the very process that connected), else from
//! `pidfd_open(pid)` right after `accept`. Then `/proc/<pid>/exe` is read, and the
//! pidfd must still name a live process with that pid: if the peer had exited and
//! its pid been given to another process before the read, the pidfd would say it
//! exited (or, from `pidfd_open`, the check below fails because the pid differs).
//!
//! What is left (docs/broker.md): with `pidfd_open` the peer may exit and its pid
//! be reused between `connect` and `accept` (a few microseconds of a busy machine;
//! `SO_PEERPIDFD` closes this); a process that passes its connected socket to
//! another process, or that `execve`s after connecting, is judged by the
//! executable of the process that connected as it is when checked. The check
//! separates programs of one user from each other by policy; it is not a boundary
//! against code of that user bent on getting in (it can ptrace the allowed
//! program).

use std::path::PathBuf;

/// A connection's peer.
#[derive(Debug, Clone)]
pub(super) struct Peer {
    pub(super) uid: Option<u32>,
    pub(super) pid: Option<i32>,
    /// The peer's executable, or why it is not known.
    pub(super) exe: Result<PathBuf, String>,
}

impl Peer {
    /// The executable as logs show it.
    pub(super) fn exe_shown(&self) -> String {
        match &self.exe {
            Ok(path) => path.display().to_string(),
            Err(_) => "-".to_owned(),
        }
    }
}

/// The peer of `stream`, read right after `accept`.
pub(super) fn inspect(stream: &tokio::net::UnixStream) -> Peer {
    let cred = match stream.peer_cred() {
        Ok(cred) => cred,
        Err(e) => {
            return Peer {
                uid: None,
                pid: None,
                exe: Err(format!("the peer's credentials could not be read: {e}")),
            };
        }
    };
    let pid = cred.pid();
    let exe = match pid {
        Some(pid) if pid > 0 => executable(stream, pid),
        _ => Err("the kernel gave no pid for the peer".to_owned()),
    };
    Peer {
        uid: Some(cred.uid()),
        pid,
        exe,
    }
}

#[cfg(target_os = "linux")]
fn executable(stream: &tokio::net::UnixStream, pid: i32) -> Result<PathBuf, String> {
    use std::os::fd::{AsRawFd, OwnedFd};

    let from_socket: Option<OwnedFd> =
        nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::PeerPidfd).ok();
    let pidfd = match from_socket {
        Some(fd) => fd,
        None => {
            let raw = rustix::process::Pid::from_raw(pid)
                .ok_or_else(|| format!("the peer's pid {pid} is not a pid"))?;
            rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
                .map_err(|e| format!("the peer (pid {pid}) is gone: {e}"))?
        }
    };
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| format!("cannot read the executable of pid {pid}: {e}"))?;
    // The pidfd names the peer; it must still be alive (else the pid may now be
    // another process's) and be that pid.
    if exited(&pidfd)? {
        return Err(format!("the peer (pid {pid}) exited while it was checked"));
    }
    match pidfd_pid(pidfd.as_raw_fd()) {
        Some(named) if named == pid => Ok(exe),
        named => Err(format!(
            "the peer's pidfd names pid {named:?}, not {pid} (recycled pid?)"
        )),
    }
}

/// Whether the process a pidfd names has exited (the pidfd is readable then).
#[cfg(target_os = "linux")]
fn exited(pidfd: &std::os::fd::OwnedFd) -> Result<bool, String> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let ready = poll(&mut fds, Some(&Timespec::default()))
        .map_err(|e| format!("cannot poll the peer's pidfd: {e}"))?;
    Ok(ready > 0)
}

/// The pid a pidfd names, from `/proc/self/fdinfo` (`Pid:`; -1 once reaped).
#[cfg(target_os = "linux")]
fn pidfd_pid(raw: i32) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{raw}")).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(not(target_os = "linux"))]
fn executable(_: &tokio::net::UnixStream, pid: i32) -> Result<PathBuf, String> {
    Err(format!(
        "reading the executable of a peer (pid {pid}) is built for Linux only; on this \
         system the broker cannot check `executables`"
    ))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_in_this_process_is_this_executable() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let _client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let peer = inspect(&server);
        assert_eq!(peer.uid, Some(rustix::process::getuid().as_raw()));
        assert_eq!(peer.pid, Some(std::process::id() as i32));
        assert_eq!(
            peer.exe.unwrap(),
            std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap()
        );
    }

    #[test]
    fn a_process_that_exited_is_not_a_peer() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        let pidfd = rustix::process::pidfd_open(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::PidfdFlags::empty(),
        )
        .unwrap();
        child.wait().unwrap();
        assert!(exited(&pidfd).unwrap());
    }
}
