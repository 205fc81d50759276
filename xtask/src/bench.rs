//! `cargo xtask bench`: runs the `bench` binary of the `tests` crate in release mode.
//!
//! For its PostgreSQL parts it starts (or finds) the server `cargo xtask test` uses
//! ([`crate::postgres::ensure`]) and passes its admin URL in `SWITCHBOARD_BENCH_POSTGRES`,
//! unless that is set already, `--postgres` is given, or `--only` picks another
//! part; likewise MariaDB ([`crate::mariadb::ensure`], `SWITCHBOARD_BENCH_MYSQL`,
//! `--mysql`). If PostgreSQL cannot be had, it says so and the SQLite parts still run.
//! Note that `ensure` drops the `sb_t_…` databases of earlier test runs, so do not
//! bench while `cargo xtask test` runs on the same cluster.

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
    if wants_postgres(args) {
        match crate::postgres::ensure() {
            Ok(pg) => {
                cargo.env(BENCH_POSTGRES, &pg.url);
            }
            Err(e) => eprintln!("bench: no PostgreSQL, so its parts are skipped: {e:#}"),
        }
    }
    if wants(args, BENCH_MYSQL, "--mysql", "MY") {
        match crate::mariadb::ensure() {
            Ok(Some(db)) => {
                cargo.env(BENCH_MYSQL, &db.url);
            }
            Ok(None) => eprintln!("bench: no MariaDB, so its parts are skipped"),
            Err(e) => eprintln!("bench: no MariaDB, so its parts are skipped: {e:#}"),
        }
    }
    eprintln!("$ {}", cmd::render(&cargo));
    let error = cargo.exec();
    bail!("could not start cargo: {error}")
}

/// The bench's PostgreSQL admin URL.
const BENCH_POSTGRES: &str = "SWITCHBOARD_BENCH_POSTGRES";

/// The bench's MariaDB admin URL.
const BENCH_MYSQL: &str = "SWITCHBOARD_BENCH_MYSQL";

/// True unless the URL is given already or `--only` names a SQLite part.
fn wants_postgres(args: &[String]) -> bool {
    wants(args, BENCH_POSTGRES, "--postgres", "PG")
}

/// Whether the parts of workloads `family` (`PG`, `MY`) need their server found or
/// started: not when `env` or `flag` gives it, or `--only` picks another part.
fn wants(args: &[String], env: &str, flag: &str, family: &str) -> bool {
    let given = std::env::var(env).is_ok_and(|u| !u.is_empty()) || args.iter().any(|a| a == flag);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    !given && only.is_none_or(|w| w.to_ascii_uppercase().starts_with(family))
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
