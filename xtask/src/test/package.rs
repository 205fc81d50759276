//! The Debian packages, tested as a user gets them (issue 18): `cargo xtask test`
//! packages the binaries it has already built (`dist.rs`, the same code as `cargo
//! xtask dist`), checks the server's unit with `systemd-analyze`, installs each
//! package and runs the installed files.
//!
//! Installed means `dpkg -i` when this runs as root on a machine that has neither
//! the package nor its user or data (CI); the package is then purged and what its
//! postinst made is removed, so the machine ends as it began. Anywhere else the
//! package is unpacked into a scratch root (`dpkg-deb -x`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::Counts;
use super::build::{Built, Select};
use super::isolated::Scratch;
use crate::{cmd, dist, prereqs};

/// Where the test packages are written.
pub(super) fn out_dir() -> PathBuf {
    cmd::target_dir().join("dist-test")
}

/// A package installed for a test; undone on drop.
pub(super) struct Installed {
    package: &'static str,
    how: How,
}

enum How {
    /// `dpkg -i`; `user` is the system user the postinst makes, if any, and
    /// `state` the directory it makes.
    System {
        user: Option<&'static str>,
        state: Option<&'static str>,
    },
    /// Unpacked into this scratch root.
    Unpacked(Scratch),
}

impl Installed {
    /// Installs `deb`. `user` and `state` are what its postinst creates: with either
    /// already present, the machine is someone's, and the package is only unpacked.
    pub(super) fn new(
        deb: &Path,
        package: &'static str,
        user: Option<&'static str>,
        state: Option<&'static str>,
    ) -> Result<Self> {
        let root = prereqs::is_root();
        // Any status counts: installed, half-installed, or removed with its settings
        // kept.
        let present = prereqs::dpkg_status(package).is_some()
            || user.is_some_and(|u| cmd::stdout(Command::new("id").arg(u)).is_some())
            || state.is_some_and(|s| Path::new(s).exists());
        if root && !present {
            // The postinst runs now; drop purges even if `dpkg -i` fails halfway.
            let installed = Self {
                package,
                how: How::System { user, state },
            };
            cmd::run(Command::new("dpkg").arg("-i").arg(deb))?;
            return Ok(installed);
        }
        eprintln!(
            "package {package}: unpacked into a scratch root ({})",
            if root {
                "this machine has the package, its user or its data"
            } else {
                "`dpkg -i` needs root"
            }
        );
        let scratch = Scratch::new(&format!("{package}-root"))?;
        cmd::run(
            Command::new("dpkg-deb")
                .arg("-x")
                .arg(deb)
                .arg(scratch.path()),
        )?;
        Ok(Self {
            package,
            how: How::Unpacked(scratch),
        })
    }

    /// The root the package's files are under: `/` or the scratch root.
    pub(super) fn root(&self) -> &Path {
        match &self.how {
            How::System { .. } => Path::new("/"),
            How::Unpacked(scratch) => scratch.path(),
        }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        match &self.how {
            How::System { user, state } => {
                let purge = cmd::run(Command::new("dpkg").args(["--purge", self.package]));
                if let Err(e) = purge {
                    eprintln!("package {}: {e:#}", self.package);
                }
                if let Some(state) = state {
                    let _ = std::fs::remove_dir_all(state);
                }
                if let Some(user) = user {
                    // The user's group goes with it (`userdel` removes a user's own
                    // group).
                    let _ = cmd::run(Command::new("userdel").arg(user));
                }
            }
            // The scratch root removes itself.
            How::Unpacked(_) => {}
        }
    }
}

/// The server package: built from `binary` (the installed one), its unit
/// checked, installed, and its unit's command run by the browser test
/// `tests/tests/browser/package.rs`.
pub(super) fn server_package(
    binary: &Path,
    built: &Built,
    cargo_test_args: &[String],
    counts: &mut Counts,
) -> Result<()> {
    let deb = dist::server_deb(binary, &out_dir())?;
    cmd::run(Command::new("dpkg-deb").arg("--info").arg(&deb))?;
    cmd::run(Command::new("dpkg-deb").arg("--contents").arg(&deb))?;
    let installed = Installed::new(
        &deb,
        "switchboard",
        Some("switchboard"),
        Some("/var/lib/switchboard"),
    )?;
    check_unit(installed.root())?;
    built.run(
        Select::Tests(&["browser"]),
        &["package::"],
        cargo_test_args,
        &[("SWITCHBOARD_PACKAGE_ROOT", installed.root().as_os_str())],
        counts,
    )
}

/// Most exposure `systemd-analyze security` may rate the unit (0–100, printed as
/// 0.0–10.0; the unit is rated 12, "1.2 OK"; 20 is the top of "OK").
const EXPOSURE_THRESHOLD: &str = "20";

/// `systemd-analyze verify` (syntax, directives, the binary is there) and
/// `security` (the hardening) of the packaged unit, offline: no systemd needs to run.
fn check_unit(root: &Path) -> Result<()> {
    let unit = root.join("usr/lib/systemd/system/switchboard.service");
    // The prerequisites install systemd (for `systemd-analyze`; it need not run).
    // `verify --root` wants a whole system in the root (sysinit.target, /bin/kill),
    // so an unpacked unit is verified as a copy whose binary is the unpacked one.
    let verified = if root == Path::new("/") {
        unit.clone()
    } else {
        let dir = root.join("verify");
        std::fs::create_dir_all(&dir)?;
        let copy = dir.join("switchboard.service");
        let text = std::fs::read_to_string(&unit)?;
        let bin = root.join("usr/bin/switchboard");
        std::fs::write(
            &copy,
            text.replace("/usr/bin/switchboard ", &format!("{} ", bin.display())),
        )?;
        copy
    };
    cmd::run(Command::new("systemd-analyze").arg("verify").arg(&verified))
        .context("the packaged unit does not verify")?;
    cmd::run(
        Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(format!("--threshold={EXPOSURE_THRESHOLD}"))
            .arg(format!("--root={}", root.display()))
            .arg(&unit),
    )
    .context("the packaged unit is less hardened than it was")
}
