//! The Python package's tests (`crates/python/tests`, pytest against real
//! `switchboard serve` processes): a step of `cargo xtask test`, and `cargo xtask
//! pytest` alone.
//!
//! The package is installed as a user gets it, from its wheel, into the virtual
//! environment of [`crate::python`]; the wheel is a debug build (the tests need no
//! optimizer, and on CI's two cores a release build of the SDK costs minutes). The
//! server is the test build's `switchboard`. With a PostgreSQL admin URL the
//! outbox's tests also run on a server on PostgreSQL (the suite makes and drops
//! its own `sb_t_py_…` database).

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::{Counts, each_stdout_line};
use crate::prereqs::PYTHON_VENV;
use crate::python::{Venv, package_dir};
use crate::{cmd, postgres, prereqs};

/// Builds and installs the wheel, then runs pytest with `server` as the binary the
/// suite starts and `postgres` (an admin URL) for its PostgreSQL half, adding the
/// results to `counts`.
pub(super) fn pytest(server: &Path, postgres: Option<&str>, counts: &mut Counts) -> Result<()> {
    let venv = Venv::ensure()?;
    let wheel = venv.build_wheel("dev", &cmd::target_dir().join("python-wheel"))?;
    venv.install(&wheel)?;
    let mut pytest = Command::new(venv.bin("pytest"));
    pytest
        .current_dir(package_dir())
        // No .pytest_cache in the source tree.
        .args(["tests", "-q", "-p", "no:cacheprovider"])
        .env("SWITCHBOARD_BIN", server);
    cmd::test_env(&mut pytest);
    match postgres {
        Some(url) => pytest.env(postgres::URL_ENV, url),
        None => {
            eprintln!("python: no PostgreSQL, so the outbox's PostgreSQL half is skipped");
            &mut pytest
        }
    };
    each_stdout_line(&mut pytest, |line| {
        counts.add_pytest_line(line);
        println!("{line}");
    })
}

/// `cargo xtask pytest`: the step alone, on a plain debug build of the CLI. Its
/// PostgreSQL half runs when `SWITCHBOARD_TEST_POSTGRES` is set (nothing is
/// started, and no other run's databases are dropped).
pub(crate) fn alone() -> Result<()> {
    prereqs::ensure_debian(&[PYTHON_VENV])?;
    let postgres = std::env::var(postgres::URL_ENV)
        .ok()
        .filter(|u| !u.is_empty());
    cmd::run(cmd::cargo().args(["build", "-p", "switchboard-cli", "--bin", "switchboard"]))?;
    let server = cmd::target_dir().join("debug").join("switchboard");
    let mut counts = Counts::default();
    let ran = pytest(&server, postgres.as_deref(), &mut counts);
    println!(
        "tests: {} passed, {} failed, {} skipped",
        counts.passed, counts.failed, counts.ignored
    );
    ran
}
