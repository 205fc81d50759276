//! The server's Debian package, installed (issue 18): the command line of its
//! systemd unit, run as the unit's user on the packaged settings, answers `/readyz`
//! and serves a working console; `switchboard doctor` finds no error in the
//! default settings.
//!
//! `cargo xtask test` builds the package (`xtask/src/dist.rs`) and installs it:
//! with `dpkg -i` when it runs as root on a machine without the package (as CI
//! does; it purges the package afterwards), else unpacked into a scratch root.
//! It names that root in `SWITCHBOARD_PACKAGE_ROOT` (`/` after `dpkg -i`). Without
//! that variable the test says so and passes.
//!
//! systemd itself does not run here, so this runs what the unit runs, as the unit
//! would: `User=`, `ExecStart=`. The unit's syntax and hardening are checked by
//! `systemd-analyze` in the same step.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;

use crate::installed::{Served, get, require_browser, signed_in_console};

const UNIT: &str = "usr/lib/systemd/system/switchboard.service";
const STATE: &str = "/var/lib/switchboard";

fn package_root() -> Option<PathBuf> {
    let Some(root) = std::env::var_os("SWITCHBOARD_PACKAGE_ROOT").map(PathBuf::from) else {
        eprintln!(
            "package test skipped: SWITCHBOARD_PACKAGE_ROOT is not set (`cargo xtask test` \
             builds and installs the server package and sets it)"
        );
        return None;
    };
    require_browser();
    Some(root)
}

/// The value of the unit's `key=` line.
fn unit_value<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("the unit has no {key}="))
        .trim()
}

/// The numeric id of `user` (`id -u`).
fn uid_of(user: &str) -> u32 {
    let out = Command::new("id").args(["-u", user]).output().expect("id");
    assert!(out.status.success(), "the package made no user {user}");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a uid")
}

fn mode_and_owner(path: &Path) -> (u32, u32, u32) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (meta.permissions().mode() & 0o7777, meta.uid(), meta.gid())
}

/// The unit's command with `verb` for `serve`, as the unit would start it.
///
/// Installed (`root` is `/`): exactly `ExecStart=`, as `User=`. Unpacked: the
/// packaged binary and settings file, with the `/var/lib/switchboard` paths moved
/// into `scratch` by `SWITCHBOARD_*` variables, which override the file.
fn unit_command(root: &Path, unit: &str, verb: &str, scratch: &Path) -> Command {
    let exec: Vec<&str> = unit_value(unit, "ExecStart").split_whitespace().collect();
    assert_eq!(
        exec[1], "serve",
        "ExecStart runs `switchboard serve`: {exec:?}"
    );
    let args = std::iter::once(verb).chain(exec[2..].iter().copied());
    let mut command;
    if root == Path::new("/") {
        let user = unit_value(unit, "User");
        let umask = unit_value(unit, "UMask");
        command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$@\""))
            .arg("sh")
            .args([
                "setpriv",
                "--reuid",
                user,
                "--regid",
                user,
                "--init-groups",
                "--",
            ])
            .arg(exec[0])
            .args(args)
            // As systemd would: the unit's umask, no HOME of root's.
            .current_dir(STATE)
            .env("HOME", STATE);
    } else {
        command = Command::new(root.join(exec[0].trim_start_matches('/')));
        for arg in args {
            match arg.strip_prefix('/') {
                Some(path) if root.join(path).exists() => command.arg(root.join(path)),
                _ => command.arg(arg),
            };
        }
        command
            .env(
                "SWITCHBOARD_DATABASE_URL",
                format!("sqlite://{}", scratch.join("switchboard.db").display()),
            )
            .env(
                "SWITCHBOARD_OPERATOR_TOKEN_FILE",
                scratch.join("operator-token"),
            )
            .env("SWITCHBOARD_WEBHOOK_KEY_FILE", scratch.join("webhook-key"));
    }
    // The unit's settings file decides everything but the port: 7700 may be taken.
    command.env("SWITCHBOARD_LISTEN", "127.0.0.1:0");
    command
}

#[tokio::test]
async fn the_server_package_runs_as_its_unit_and_serves_the_console() {
    let Some(root) = package_root() else {
        return;
    };
    let unit = std::fs::read_to_string(root.join(UNIT)).expect("the package's unit");
    // Installed with `dpkg -i`: the unit's user, which the postinst made.
    let service_uid = (root == Path::new("/")).then(|| uid_of(unit_value(&unit, "User")));
    let scratch = tempfile::tempdir().expect("scratch dir");

    if let Some(uid) = service_uid {
        // What the postinst made: the user, its state directory, the settings'
        // group (they may hold a database password).
        let (mode, owner, state_group) = mode_and_owner(Path::new(STATE));
        assert_eq!((mode, owner), (0o750, uid), "{STATE}: mode and owner");
        let (mode, owner, group) = mode_and_owner(Path::new("/etc/switchboard/switchboard.toml"));
        assert_eq!((mode, owner), (0o640, 0), "the settings: root's, mode 0640");
        assert_eq!(group, state_group, "the settings: group switchboard");
    }

    let server = Served::start(unit_command(&root, &unit, "serve", scratch.path()), None);
    let ready = get(&format!("{}/readyz", server.url), &[]).await;
    assert_eq!(
        ready.status(),
        StatusCode::OK,
        "/readyz of the packaged server"
    );
    signed_in_console(&server, "browser-package-console.png").await;

    if let Some(uid) = service_uid {
        // The first start wrote the service user's files, private to it.
        for file in ["operator-token", "webhook-key", "switchboard.db"] {
            let (mode, owner, _) = mode_and_owner(&Path::new(STATE).join(file));
            assert_eq!(owner, uid, "{file}: the service user's");
            assert_eq!(mode & 0o077, 0, "{file}: mode {mode:o} shares nothing");
        }
    }
    drop(server);

    // The default settings pass the doctor: warnings may depend on the machine
    // (free disk space, say), errors may not.
    let out = unit_command(&root, &unit, "doctor", scratch.path())
        .arg("--json")
        .output()
        .expect("running switchboard doctor");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let errors: Vec<_> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["status"] == "error")
        .collect();
    assert!(
        errors.is_empty(),
        "doctor finds errors in the packaged settings: {errors:#?}"
    );
    assert_ne!(out.status.code(), Some(2), "doctor: {report}");
}
