//! Prerequisites: Debian packages, the wasm32 target and a `wasm-bindgen` CLI that
//! matches the `wasm-bindgen` crate locked in `Cargo.lock` (the two must be equal).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// Debian packages for building, the desktop window and tray, the Xvfb smoke test,
/// browser tests, PostgreSQL and MariaDB tests (started by `postgres::ensure` and
/// `mariadb::ensure`) and the SDK's
/// real-keyring tests (gnome-keyring for the Secret Service, keyutils for `keyctl`).
const PACKAGES: &[&str] = &[
    "build-essential",
    "pkg-config",
    "libwebkit2gtk-4.1-dev",
    "libayatana-appindicator3-1",
    "xvfb",
    "xauth",
    "dbus-daemon",
    "dbus-x11",
    "dunst",
    "imagemagick",
    "xdotool",
    "chromium",
    "chromium-driver",
    "postgresql",
    "mariadb-server",
    "mariadb-client",
    "gnome-keyring",
    "keyutils",
    // The independent webhook signature verifiers (PyPI) run under it.
    "python3-pip",
];

/// The independent verifiers of webhook signatures, from PyPI, pinned: Standard
/// Webhooks and RFC 9421 + RFC 9530 (`crates/webhook/tests/verify.py` uses them).
const PY_VERIFIERS: &[&str] = &["standardwebhooks==1.1.0", "http-message-signatures==3.0.0"];

/// Schemathesis, from PyPI, pinned: it fuzzes the API against its OpenAPI document
/// (`crates/cli/tests/schemathesis.rs` runs it as `python3 -m schemathesis.cli`).
const SCHEMATHESIS: &[&str] = &["schemathesis==4.32.5"];

const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// Tools the later stages need, resolved to concrete paths.
pub(crate) struct Tools {
    pub(crate) wasm_bindgen: PathBuf,
    /// `SWITCHBOARD_TEST_PYVERIFY`: where the PyPI webhook verifiers are.
    pub(crate) py_verifiers: PathBuf,
    /// `SWITCHBOARD_TEST_SCHEMATHESIS`: where the pinned schemathesis is.
    pub(crate) schemathesis: PathBuf,
}

/// Checks every prerequisite and installs what is missing (when allowed to).
pub(crate) fn ensure() -> Result<Tools> {
    debian_packages()?;
    wasm_target()?;
    let wasm_bindgen = wasm_bindgen_cli()?;
    let py_verifiers = pip_target("pyverify", PY_VERIFIERS, "the webhook signature verifiers")?;
    let schemathesis = pip_target("schemathesis", SCHEMATHESIS, "schemathesis")?;
    Ok(Tools {
        wasm_bindgen,
        py_verifiers,
        schemathesis,
    })
}

/// Installs the PyPI packages `pins` into `target/<name>` (once per pin set) for the
/// `python3` on `PATH`, the one the tests run; returns the directory, which the
/// tests get as a `PYTHONPATH`: [`PY_VERIFIERS`] as `SWITCHBOARD_TEST_PYVERIFY`,
/// [`SCHEMATHESIS`] as `SWITCHBOARD_TEST_SCHEMATHESIS`.
fn pip_target(name: &str, pins: &[&str], what: &str) -> Result<PathBuf> {
    let dir = cmd::target_dir().join(name);
    let marker = dir.join(".pins");
    let pin_list = pins.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == pin_list) {
        eprintln!("prereqs: {what} present ({})", pins.join(", "));
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let install = |extra: &[&str]| {
        cmd::run(
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(["--no-warn-script-location", "--target"])
                .arg(&dir)
                .args(extra)
                .args(pins),
        )
    };
    // Debian's pip refuses to touch an "externally managed" interpreter unless told
    // (a --target directory is not the system's packages, so that is safe).
    install(&[])
        .or_else(|_| install(&["--break-system-packages"]))
        .with_context(|| format!("installing {what} from PyPI (python3 -m pip)"))?;
    std::fs::write(&marker, pin_list)?;
    Ok(dir)
}

fn debian_packages() -> Result<()> {
    if cmd::stdout(Command::new("dpkg").arg("--version")).is_none() {
        eprintln!(
            "prereqs: no dpkg (not Debian?); make sure these or their equivalents are installed: {}",
            PACKAGES.join(" ")
        );
        return Ok(());
    }
    let missing: Vec<&str> = PACKAGES.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        eprintln!("prereqs: {} Debian packages present", PACKAGES.len());
        return Ok(());
    }
    let list = missing.join(" ");
    if !is_root() {
        bail!(
            "missing Debian packages: {list}\ninstall them with:\n  \
             sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive \
             apt-get install -y --no-install-recommends {list}"
        );
    }
    eprintln!("prereqs: installing missing Debian packages: {list}");
    cmd::run(apt().arg("update"))?;
    cmd::run(
        apt()
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing),
    )?;
    Ok(())
}

fn apt() -> Command {
    let mut apt = Command::new("apt-get");
    apt.env("DEBIAN_FRONTEND", "noninteractive");
    apt
}

/// `dpkg -s` knows packages that were removed but not purged, so read the status.
fn installed(package: &str) -> bool {
    cmd::stdout(Command::new("dpkg").args(["-s", package])).is_some_and(|out| {
        out.lines()
            .any(|l| l.trim() == "Status: install ok installed")
    })
}

pub(crate) fn is_root() -> bool {
    cmd::stdout(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0")
}

fn wasm_target() -> Result<()> {
    let installed = cmd::stdout(Command::new("rustup").args(["target", "list", "--installed"]))
        .context("`rustup target list --installed` failed; is rustup installed?")?;
    if installed.lines().any(|t| t.trim() == WASM_TARGET) {
        return Ok(());
    }
    cmd::run(Command::new("rustup").args(["target", "add", WASM_TARGET]))
}

/// Finds (or installs into the default cargo bin dir) `wasm-bindgen` at exactly the
/// version of the `wasm-bindgen` crate in `Cargo.lock`.
fn wasm_bindgen_cli() -> Result<PathBuf> {
    let lock_path = cmd::root().join("Cargo.lock");
    let lock = std::fs::read_to_string(&lock_path)
        .with_context(|| format!("reading {}", lock_path.display()))?;
    let wanted = locked_version(&lock, "wasm-bindgen")
        .context("Cargo.lock has no single `wasm-bindgen` package")?;

    let bin_dir = cmd::cargo_bin_dir();
    let candidates: Vec<PathBuf> = bin_dir
        .iter()
        .map(|dir| dir.join("wasm-bindgen"))
        .chain([PathBuf::from("wasm-bindgen")])
        .collect();
    if let Some(found) = candidates
        .iter()
        .find(|c| version_of(c).as_deref() == Some(&wanted))
    {
        return Ok(found.clone());
    }

    // No `--locked`: the registry mirror here lacks one of its pinned transitive versions.
    eprintln!("prereqs: installing wasm-bindgen-cli {wanted} (about two minutes)");
    cmd::run(cmd::cargo().args(["install", "wasm-bindgen-cli", "--version", &wanted]))?;
    let installed = bin_dir
        .map(|dir| dir.join("wasm-bindgen"))
        .context("neither CARGO_HOME nor HOME is set")?;
    match version_of(&installed) {
        Some(v) if v == wanted => Ok(installed),
        other => bail!(
            "{} reports version {other:?} after installing {wanted}",
            installed.display()
        ),
    }
}

/// `wasm-bindgen --version` prints `wasm-bindgen 0.2.130`.
fn version_of(program: &Path) -> Option<String> {
    let out = cmd::stdout(Command::new(program).arg("--version"))?;
    out.split_whitespace().nth(1).map(str::to_owned)
}

/// The version of `name` in a Cargo.lock, if exactly one version is locked.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let header = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    let mut versions = Vec::new();
    while let Some(line) = lines.next() {
        if line.trim() == header {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            versions.push(version.strip_suffix('"')?.to_owned());
        }
    }
    versions.dedup();
    match versions.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::locked_version;

    const LOCK: &str = r#"
[[package]]
name = "wasm-bindgen"
version = "0.2.130"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "wasm-bindgen-futures"
version = "0.4.80"
"#;

    #[test]
    fn finds_the_exact_package_not_a_prefix() {
        assert_eq!(
            locked_version(LOCK, "wasm-bindgen").as_deref(),
            Some("0.2.130")
        );
        assert_eq!(
            locked_version(LOCK, "wasm-bindgen-futures").as_deref(),
            Some("0.4.80")
        );
        assert_eq!(locked_version(LOCK, "leptos"), None);
    }

    #[test]
    fn two_locked_versions_are_ambiguous() {
        let twice = format!("{LOCK}\n[[package]]\nname = \"wasm-bindgen\"\nversion = \"0.2.99\"\n");
        assert_eq!(locked_version(&twice, "wasm-bindgen"), None);
    }
}
