//! The Python package (`crates/python`, distribution `switchboard-agents`): the
//! virtual environment xtask builds it with, and its wheel. `cargo xtask test`
//! installs a debug wheel there and runs pytest (`test/python.rs`), `cargo xtask
//! dist` builds the release wheel, `cargo xtask bench` runs PY-W1 with one.
//!
//! The wheel is built by maturin in the workspace's target dir (maturin's cargo
//! honours `CARGO_TARGET_DIR`, and without it uses the workspace's `target/`), not
//! in a temporary one as `pip install ./crates/python` does: the SDK and its
//! dependencies are compiled once per profile and feature set, and later builds are
//! incremental. In `cargo xtask test` the build also gets the test build's
//! variables ([`cmd::BUILD_ENV`]), so the package's code, which the workspace build
//! compiles without its `python` feature (an empty crate), is linted by clippy with
//! it on.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::prereqs::PYTHON_VENV;

/// What the environment holds, pinned: the build backend the package names in
/// `pyproject.toml` (its range admits this one) and the test runner.
const TOOLS: &[&str] = &["maturin==1.16.0", "pytest==9.2.0"];

/// The package's directory in the workspace.
pub(crate) fn package_dir() -> PathBuf {
    cmd::root().join("crates").join("python")
}

/// A virtual environment in the target dir with [`TOOLS`] (made once per pin set);
/// the wheel is installed into it afresh each time.
pub(crate) struct Venv {
    dir: PathBuf,
}

impl Venv {
    /// `target/python-venv`, made by the `python3` on `PATH` (≥ 3.11) if missing.
    pub(crate) fn ensure() -> Result<Self> {
        let dir = cmd::target_dir().join("python-venv");
        let marker = dir.join(".pins");
        let pins = TOOLS.join("\n");
        let venv = Self { dir };
        if std::fs::read_to_string(&marker).is_ok_and(|m| m == pins) && venv.python().is_file() {
            eprintln!(
                "python: {} present ({})",
                venv.dir.display(),
                TOOLS.join(", ")
            );
            return Ok(venv);
        }
        let _ = std::fs::remove_dir_all(&venv.dir);
        cmd::run(Command::new("python3").args(["-m", "venv"]).arg(&venv.dir)).with_context(
            || format!("creating a virtual environment (on Debian: apt install {PYTHON_VENV})"),
        )?;
        cmd::run(
            venv.pip()
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .args(TOOLS),
        )
        .context("installing maturin and pytest from PyPI")?;
        std::fs::write(&marker, pins)?;
        Ok(venv)
    }

    pub(crate) fn python(&self) -> PathBuf {
        self.bin("python")
    }

    pub(crate) fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    fn pip(&self) -> Command {
        let mut pip = Command::new(self.python());
        pip.args(["-m", "pip"]);
        pip
    }

    /// Builds the wheel with this environment's maturin into `out` (emptied
    /// first); `profile` is cargo's (`dev`, `release`). Returns its path.
    pub(crate) fn build_wheel(&self, profile: &str, out: &Path) -> Result<PathBuf> {
        let _ = std::fs::remove_dir_all(out);
        let mut maturin = Command::new(self.bin("maturin"));
        maturin
            .current_dir(package_dir())
            .args(["build", "--locked", "--profile", profile, "--interpreter"])
            .arg(self.python())
            .arg("--out")
            .arg(out);
        cmd::build_env(&mut maturin);
        cmd::run(&mut maturin)?;
        let wheels: Vec<PathBuf> = std::fs::read_dir(out)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "whl"))
            .collect();
        match wheels.as_slice() {
            [wheel] => Ok(wheel.clone()),
            other => bail!("maturin left {} wheels in {}", other.len(), out.display()),
        }
    }

    /// Installs `wheel` into this environment, replacing the one there.
    pub(crate) fn install(&self, wheel: &Path) -> Result<()> {
        cmd::run(
            self.pip()
                .args([
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--force-reinstall",
                    "--no-deps",
                ])
                .arg(wheel),
        )
    }
}
