//! `cargo xtask run | test | bench`: the project's one entry point for developers and CI.
//!
//! - `run`: install prerequisites, build the console UI, then open the desktop app
//!   (or, with no display, the headless server).
//! - `test`: prerequisites, fmt, one build linted by clippy as it compiles (the console
//!   built by the server's build script and embedded), every workspace test, the
//!   Python package's pytest suite, the real-keyring tests (keyutils and Secret
//!   Service) and a desktop smoke test under Xvfb. Prints a summary; exits non-zero
//!   on any failure.
//! - `bench`: the benchmark binary of the `tests` crate, then W5 (`w5.rs`).
//! - `dist`: Debian packages of the server and the desktop app, and the Python
//!   package's wheel (`dist.rs`).
//! - `chaos`: the reliability suite at full size, and its table (`chaos.rs`).
//! - `prereqs` and `ui` run the first two stages of `run` on their own; `mariadb`
//!   finds or starts the test MariaDB (see `mariadb.rs`); `promtool` runs the
//!   Prometheus rules' step of `test` alone (`test/promtool.rs`); `pytest` runs the
//!   Python package's step of `test` alone (`test/python.rs`).
//!
//! Everything xtask itself says goes to stderr, so a program's stdout (for example the
//! server's JSON ready line) stays machine-readable.

mod bench;
mod bench_compare;
mod chaos;
mod cmd;
mod dist;
mod mariadb;
mod postgres;
mod prereqs;
mod python;
mod run;
mod test;
mod ui;
mod w5;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <task> [args…]

tasks:
  run [args…]    prerequisites, UI build, then the desktop app (args go to it), or
                 `switchboard serve` when no display is available
  test [args…]   prerequisites, fmt, one build linted by clippy (the console inside),
                 `cargo test --workspace [args…]`, the Python package's pytest,
                 the real-keyring tests (keyctl session; dbus-run-session with
                 gnome-keyring) and the desktop smoke test under Xvfb
  bench [args…]  `cargo run --release -p switchboard-tests --bin bench -- [args…]`,
                 then W5 (the desktop app under Xvfb; `--only W5` for it alone)
  dist [args…]   Debian packages of the server and the desktop app, and the Python
                 package's wheel, into target/dist (`dist --help`)
  chaos [args…]  the reliability suite at full size (crash loop and the other
                 scenarios on SQLite, PostgreSQL and MariaDB), then one table
  prereqs        only install/check the prerequisites
  promtool       the Prometheus recording rules (deploy/prometheus): `promtool check
                 rules`, `promtool test rules`, and the Grafana dashboard against
                 them (a step of `test`)
  pytest         the Python package (crates/python): its wheel (a debug build)
                 into target/python-venv, then its pytest suite against the
                 debug `switchboard` (a step of `test`; the PostgreSQL half runs
                 when SWITCHBOARD_TEST_POSTGRES is set)
  layers         only the import check of `test`: no cycle between modules, no
                 upward import between the server's layers
  mariadb        find or start the test MariaDB and print its admin URL (for
                 SWITCHBOARD_TEST_MYSQL); `mariadb stop|start|restart` controls the
                 one xtask started (the restart test does)
  ui             only build the console UI into ui/dist";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let mut rest: Vec<String> = args.collect();
    // `cargo xtask run -- --flag` and `cargo xtask run --flag` mean the same.
    if rest.first().is_some_and(|a| a == "--") {
        rest.remove(0);
    }
    let result = match task.as_deref() {
        Some("run") => run::run(&rest),
        Some("test") => test::test(&rest),
        Some("bench") => bench::bench(&rest),
        Some("chaos") => chaos::chaos(&rest),
        Some("dist") => dist::dist(&rest),
        Some("prereqs") => prereqs::ensure().map(drop),
        Some("promtool") => prereqs::ensure_debian(&[test::promtool::PACKAGE])
            .and_then(|()| test::promtool::check()),
        Some("pytest") => test::python::alone(),
        Some("layers") => test::layers::check(&cmd::root()),
        Some("mariadb") if !rest.is_empty() => mariadb::control(&rest[0]),
        Some("mariadb") => mariadb::ensure().and_then(|db| match db {
            Some(db) => {
                println!("{}", db.url);
                Ok(())
            }
            None => Err(anyhow::anyhow!("no MariaDB")),
        }),
        Some("ui") => prereqs::ensure()
            .and_then(|tools| ui::build(&tools))
            .map(drop),
        Some("help" | "-h" | "--help") => {
            eprintln!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(anyhow::anyhow!("unknown task `{other}`\n\n{USAGE}")),
        None => Err(anyhow::anyhow!("no task given\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
