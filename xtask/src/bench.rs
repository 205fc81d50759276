//! `cargo xtask bench`: runs the `bench` binary of the `tests` crate in release mode.

use std::os::unix::process::CommandExt;

use anyhow::{Result, bail};

use crate::cmd;

pub(crate) fn bench(args: &[String]) -> Result<()> {
    if !bench_bin_exists() {
        eprintln!("bench: not yet implemented");
        std::process::exit(1);
    }
    let mut cargo = cmd::cargo();
    cargo
        .args([
            "run",
            "--release",
            "-p",
            "switchboard-tests",
            "--bin",
            "bench",
            "--",
        ])
        .args(args);
    eprintln!("$ {}", cmd::render(&cargo));
    let error = cargo.exec();
    bail!("could not start cargo: {error}")
}

/// `tests/src/bin/bench.rs`, `tests/src/bin/bench/main.rs`, or a `[[bin]]` named
/// `bench` in `tests/Cargo.toml`.
fn bench_bin_exists() -> bool {
    let tests = cmd::root().join("tests");
    let manifest = std::fs::read_to_string(tests.join("Cargo.toml")).unwrap_or_default();
    tests.join("src/bin/bench.rs").is_file()
        || tests.join("src/bin/bench/main.rs").is_file()
        || manifest
            .lines()
            .any(|l| l.replace(' ', "") == "name=\"bench\"")
}
