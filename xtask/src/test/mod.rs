//! `cargo xtask test`: everything CI checks, in one command.
//!
//! Prerequisites and the UI build must succeed for anything else to run. After that
//! every step runs even if an earlier one failed, so one run reports every problem;
//! the summary lists each step, and any failure makes the exit status non-zero.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{chaos, cmd, mariadb, postgres, prereqs, ui};

mod isolated;
mod package;
use isolated::{desktop_smoke, keyring_tests, smoke_screenshot};

/// The suites that run on PostgreSQL and MariaDB too: the HTTP conformance suite
/// (`protocol`, `api`), plus what needs a database server (`instances`, and the
/// chaos crash loop at CI size, ignored without one).
const CONFORMANCE: &[&str] = &[
    "--test",
    "protocol",
    "--test",
    "api",
    "--test",
    "instances",
    "--test",
    "chaos_crash",
];

/// The store's tests (name filters) run on PostgreSQL: the driver suite's run there,
/// and `switchboard doctor`'s PostgreSQL checks.
const ON_POSTGRES: &[&str] = &[
    "engine::suite::every_statement_on_postgres",
    "doctor::tests::postgres_checks",
];

/// The MySQL backend's tests (name filters), run on MariaDB: the store's own and the
/// driver suite's MySQL run, and `switchboard doctor`'s MariaDB checks.
const ON_MARIADB: &[&str] = &[
    "store::mysql",
    "engine::suite::every_statement_on_mysql",
    "doctor::tests::mysql_checks",
];

/// The browser tests that also run on PostgreSQL (a name filter).
const BROWSER_ON_POSTGRES: &str = "queue_table";

/// What runs on the database server `database` (its URL variable and URL) names:
/// the store's tests matching `lib_filters`, then the conformance suite.
fn on_server(
    database: (&str, &str),
    lib_filters: &[&str],
    cargo_test_args: &[String],
    counts: &mut Counts,
) -> Result<()> {
    run_counting(
        cmd::cargo()
            .args(["test", "--workspace", "--lib"])
            .args(cargo_test_args)
            .args(include_ignored(cargo_test_args))
            .args(lib_filters)
            .env(database.0, database.1),
        counts,
    )?;
    let conformance = run_counting(
        cmd::cargo()
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(CONFORMANCE)
            .args(cargo_test_args)
            .args(include_ignored(cargo_test_args))
            .env(database.0, database.1),
        counts,
    );
    // The chaos scenario between the server and its database (the one between
    // agents and server runs on SQLite in the workspace step), whatever the
    // conformance suite said.
    let network = run_counting(
        cmd::cargo()
            .args(["test", "--workspace", "--test", "network_faults"])
            .args(cargo_test_args)
            .args(include_ignored(cargo_test_args))
            .arg("database")
            .env(database.0, database.1),
        counts,
    );
    conformance.and(network)
}

/// The database-restart test (`crates/cli/tests/db_restart.rs`) on the server that
/// `database` names, which `ctl` stops and starts.
fn restart_test(
    database: (&str, &str),
    ctl: &str,
    cargo_test_args: &[String],
    counts: &mut Counts,
) -> Result<()> {
    run_counting(
        cmd::cargo()
            .args(["test", "--workspace", "--test", "db_restart"])
            .args(include_ignored(cargo_test_args))
            .env(database.0, database.1)
            .env("SWITCHBOARD_TEST_DB_CTL", ctl),
        counts,
    )
}

struct Outcome {
    name: &'static str,
    result: Result<()>,
    seconds: f64,
}

fn step(outcomes: &mut Vec<Outcome>, name: &'static str, f: impl FnOnce() -> Result<()>) -> bool {
    eprintln!("\n== {name}");
    let start = Instant::now();
    let result = f();
    let ok = result.is_ok();
    if let Err(error) = &result {
        eprintln!("== {name}: FAILED: {error:#}");
    }
    outcomes.push(Outcome {
        name,
        result,
        seconds: start.elapsed().as_secs_f64(),
    });
    ok
}

pub(crate) fn test(cargo_test_args: &[String]) -> Result<()> {
    let started = Instant::now();
    let mut outcomes = Vec::new();
    let mut counts = Counts::default();

    let mut tools = None;
    let mut dist = PathBuf::new();
    chaos::clear_rows();
    let ready = step(&mut outcomes, "prerequisites", || {
        let found = prereqs::ensure()?;
        cmd::remember(&found);
        tools = Some(found);
        Ok(())
    }) && step(&mut outcomes, "ui build (wasm32)", || {
        dist = ui::build(tools.as_ref().expect("prerequisites ran"))?;
        Ok(())
    });

    if ready {
        step(&mut outcomes, "cargo fmt --check", || {
            cmd::run(cmd::cargo().args(["fmt", "--all", "--", "--check"]))
        });
        step(&mut outcomes, "clippy (host, all targets)", || {
            cmd::run(cmd::cargo().args([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]))
        });
        step(&mut outcomes, "clippy (ui, wasm32)", || {
            cmd::run(cmd::cargo().args([
                "clippy",
                "-p",
                "switchboard-ui",
                "--target",
                "wasm32-unknown-unknown",
                "--",
                "-D",
                "warnings",
            ]))
        });
        step(&mut outcomes, "cargo test --workspace", || {
            run_counting(
                cmd::cargo()
                    .args(["test", "--workspace", "--no-fail-fast"])
                    .args(cargo_test_args)
                    .env("SWITCHBOARD_UI_DIR", &dist),
                &mut counts,
            )
        });
        let mut pg = None;
        step(&mut outcomes, "postgres (start)", || {
            pg = Some(postgres::ensure()?);
            Ok(())
        });
        if let Some(pg) = &pg {
            step(&mut outcomes, "conformance on PostgreSQL", || {
                on_server(
                    (postgres::URL_ENV, &pg.url),
                    ON_POSTGRES,
                    cargo_test_args,
                    &mut counts,
                )?;
                // The console's one PostgreSQL-only part: the queue table's tiles.
                run_counting(
                    cmd::cargo()
                        // `--workspace`, as the steps before: `-p` would unify other
                        // features and rebuild every dependency.
                        .args(["test", "--workspace", "--test", "browser"])
                        .arg(BROWSER_ON_POSTGRES)
                        .args(cargo_test_args)
                        .env(postgres::URL_ENV, &pg.url)
                        .env("SWITCHBOARD_UI_DIR", &dist),
                    &mut counts,
                )
            });
            // Alone: it restarts the cluster under every connection.
            if let Some(ctl) = &pg.ctl {
                step(&mut outcomes, "PostgreSQL restart under load", || {
                    restart_test(
                        (postgres::URL_ENV, &pg.url),
                        ctl,
                        cargo_test_args,
                        &mut counts,
                    )
                });
            }
            if let Err(e) = postgres::drop_test_databases(&pg.url) {
                eprintln!("postgres: could not drop the test databases: {e:#}");
            }
        }
        let mut maria = None;
        step(&mut outcomes, "mariadb (start)", || {
            maria = mariadb::ensure()?;
            Ok(())
        });
        if let Some(db) = &maria {
            step(&mut outcomes, "conformance on MariaDB", || {
                on_server(
                    (mariadb::URL_ENV, &db.url),
                    ON_MARIADB,
                    cargo_test_args,
                    &mut counts,
                )
            });
            // Alone: it stops the server under every connection.
            if let Some(ctl) = &db.ctl {
                step(&mut outcomes, "MariaDB restart under load", || {
                    restart_test(
                        (mariadb::URL_ENV, &db.url),
                        ctl,
                        cargo_test_args,
                        &mut counts,
                    )
                });
            }
            if let Err(e) = mariadb::drop_test_databases(&db.url) {
                eprintln!("mariadb: could not drop the test databases: {e:#}");
            }
        }
        step(&mut outcomes, "keyring (keyutils, Secret Service)", || {
            keyring_tests(&mut counts)
        });
        step(&mut outcomes, "desktop package, smoke (Xvfb)", || {
            desktop_smoke(&dist)
        });
        let wasm_opt = tools.as_ref().and_then(|t| t.wasm_opt.clone());
        step(&mut outcomes, "installed binary serves its console", || {
            installed_console(cargo_test_args, wasm_opt.as_deref(), &mut counts)
        });
        // The server package carries that installed binary: no build of its own.
        step(&mut outcomes, "server package (.deb)", || {
            package::server_package(&installed_bin(), cargo_test_args, &mut counts)
        });
    }

    // The reliability scenarios' rows at CI size (issue 17).
    if ready && let Err(e) = chaos::print_table() {
        eprintln!("chaos table: {e:#}");
    }
    print_summary(&outcomes, started.elapsed().as_secs_f64());
    // The plain closing line CI reads: every test of every `cargo test` binary.
    println!(
        "tests: {} passed, {} failed, {} skipped",
        counts.passed, counts.failed, counts.ignored
    );
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    if failed > 0 {
        bail!("{failed} of {} steps failed", outcomes.len());
    }
    Ok(())
}

/// `cargo install --path crates/cli`, as a user would, into `target/installed`, then
/// the browser test of that binary's console (`tests/tests/browser/installed.rs`).
///
/// `--debug` reuses the test build's artifacts instead of a second, release, build of
/// everything; `SWITCHBOARD_EMBED_UI=1` makes the server's build script build and
/// embed the console itself, exactly as it does in the release build a user gets (it
/// must not be handed `ui/dist`: that path is the one a user never takes).
fn installed_console(
    cargo_test_args: &[String],
    wasm_opt: Option<&Path>,
    counts: &mut Counts,
) -> Result<()> {
    let root = installed_root();
    let mut install = cmd::cargo();
    install
        .args([
            "install",
            "--path",
            "crates/cli",
            "--debug",
            "--locked",
            "--force",
        ])
        .arg("--root")
        .arg(&root)
        .env("SWITCHBOARD_EMBED_UI", "1")
        .env_remove("SWITCHBOARD_UI_DIST");
    // The wasm-opt the prerequisites found, which `PATH` does not have.
    match wasm_opt {
        Some(path) => install.env("SWITCHBOARD_WASM_OPT", path),
        None => install.env("SWITCHBOARD_WASM_OPT", ""),
    };
    cmd::run(&mut install)?;
    run_counting(
        cmd::cargo()
            .args(["test", "--workspace", "--test", "browser", "installed"])
            .args(cargo_test_args)
            .env("SWITCHBOARD_INSTALLED_BIN", installed_bin()),
        counts,
    )
}

/// Where [`installed_console`] installs: `cargo install --root`.
fn installed_root() -> PathBuf {
    cmd::target_dir().join("installed")
}

/// The `switchboard` [`installed_console`] installs.
fn installed_bin() -> PathBuf {
    installed_root().join("bin").join("switchboard")
}

/// `--include-ignored` for the test binaries, after the `--` the arguments may
/// already have.
fn include_ignored(cargo_test_args: &[String]) -> Vec<&'static str> {
    if cargo_test_args.iter().any(|a| a == "--") {
        vec!["--include-ignored"]
    } else {
        vec!["--", "--include-ignored"]
    }
}

/// Totals of the `test result:` lines of a `cargo test` run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Counts {
    /// Adds one `test result: ok. 3 passed; 0 failed; 1 ignored; …` line.
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result:") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                "ignored" => self.ignored += n,
                _ => {}
            }
        }
    }
}

/// Runs `cmd` like [`cmd::run`], echoing its stdout while counting test results.
fn run_counting(cmd: &mut Command, counts: &mut Counts) -> Result<()> {
    use std::io::{BufRead, BufReader};
    let line = cmd::render(cmd);
    eprintln!("$ {line}");
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{line}`"))?;
    let out = child.stdout.take().context("no stdout")?;
    for l in BufReader::new(out).lines() {
        let l = l.context("reading test output")?;
        counts.add_line(&l);
        println!("{l}");
    }
    let status = child.wait().context("waiting for cargo test")?;
    if !status.success() {
        bail!("`{line}` failed ({status})");
    }
    Ok(())
}

fn print_summary(outcomes: &[Outcome], total: f64) {
    eprintln!("\n== xtask test summary");
    for o in outcomes {
        let status = if o.result.is_ok() { "ok  " } else { "FAIL" };
        eprintln!("  {status}  {:<28} {:>7.1}s", o.name, o.seconds);
    }
    let shot = smoke_screenshot();
    if shot.is_file() {
        eprintln!("  desktop screenshot: {}", shot.display());
    }
    eprintln!("  total {total:.0}s");
}

#[cfg(test)]
mod tests {
    use super::Counts;

    #[test]
    fn counts_add_up_test_result_lines() {
        let mut c = Counts::default();
        c.add_line("test result: ok. 36 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 6.74s");
        c.add_line(
            "test result: FAILED. 2 passed; 1 failed; 3 ignored; 0 measured; 0 filtered out",
        );
        c.add_line("running 3 tests");
        assert_eq!(
            c,
            Counts {
                passed: 38,
                failed: 1,
                ignored: 3
            }
        );
    }
}
