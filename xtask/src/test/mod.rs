//! `cargo xtask test`: everything CI checks, in one command.
//!
//! Prerequisites and the UI build must succeed for anything else to run. After that
//! every step runs even if an earlier one failed, so one run reports every problem;
//! the summary lists each step, and any failure makes the exit status non-zero.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{chaos, cmd, mariadb, postgres, prereqs};

mod build;
mod isolated;
pub(crate) mod layers;
pub(crate) use isolated::{Scratch, smoke_command};
mod package;
pub(crate) mod promtool;
pub(crate) mod python;
use build::{Built, Select, build, build_env};
use isolated::{desktop_smoke, keyring_tests, smoke_screenshot};

/// The suites that run on PostgreSQL and MariaDB too: the HTTP conformance suite
/// (`protocol`, `api`), plus what needs a database server (`instances`, and the
/// chaos crash loop at CI size, ignored without one).
const CONFORMANCE: &[&str] = &["protocol", "api", "instances", "chaos_crash"];

/// The store's tests (name filters) run on PostgreSQL: the PostgreSQL backend's own
/// (migrations under the statement limit, retried deadlocks), the driver suite's
/// run there, and `switchboard doctor`'s PostgreSQL checks.
const ON_POSTGRES: &[&str] = &[
    "postgres::",
    "engine::suite::every_statement_on_postgres",
    "doctor::tests::postgres_checks",
];

/// The MySQL backend's tests (name filters), run on MariaDB: the store's own and the
/// driver suite's MySQL run, and `switchboard doctor`'s MariaDB checks.
const ON_MARIADB: &[&str] = &[
    "mysql::",
    "engine::suite::every_statement_on_mysql",
    "doctor::tests::mysql_checks",
];

/// The browser tests that also run on PostgreSQL (a name filter).
const BROWSER_ON_POSTGRES: &str = "queue_table";

/// What runs on the database server `database` (its URL variable and URL) names:
/// the store's tests matching `lib_filters`, then the conformance suite.
fn on_server(
    built: &Built,
    database: (&str, &str),
    lib_filters: &[&str],
    cargo_test_args: &[String],
    counts: &mut Counts,
) -> Result<()> {
    let env = [(database.0, database.1.as_ref())];
    let mut lib_args = vec!["--include-ignored"];
    lib_args.extend(lib_filters);
    built.run(Select::Libs, &lib_args, cargo_test_args, &env, counts)?;
    let conformance = built.run(
        Select::Tests(CONFORMANCE),
        &["--include-ignored"],
        cargo_test_args,
        &env,
        counts,
    );
    // The chaos scenario between the server and its database (the one between
    // agents and server runs on SQLite in the workspace step), whatever the
    // conformance suite said.
    let network = built.run(
        Select::Tests(&["network_faults"]),
        &["--include-ignored", "database"],
        cargo_test_args,
        &env,
        counts,
    );
    conformance.and(network)
}

/// The database-restart test (`crates/cli/tests/db_restart.rs`) on the server that
/// `database` names, which `ctl` stops and starts.
fn restart_test(
    built: &Built,
    database: (&str, &str),
    ctl: &str,
    cargo_test_args: &[String],
    counts: &mut Counts,
) -> Result<()> {
    built.run(
        Select::Tests(&["db_restart"]),
        &["--include-ignored"],
        cargo_test_args,
        &[
            (database.0, database.1.as_ref()),
            ("SWITCHBOARD_TEST_DB_CTL", ctl.as_ref()),
        ],
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

    let mut built = None;
    chaos::clear_rows();
    let ready = step(&mut outcomes, "prerequisites", || {
        let found = prereqs::ensure()?;
        cmd::remember(&found);
        let _ = cmd::BUILD_ENV.set(build_env(&found));
        Ok(())
    }) && {
        // Fast, and it does not hold back the rest: one run reports every problem.
        step(&mut outcomes, "cargo fmt --check", || {
            cmd::run(cmd::cargo().args(["fmt", "--all", "--", "--check"]))
        });
        step(
            &mut outcomes,
            "layers (no import cycle, no upward import)",
            || {
                layers::check(&cmd::root())?;
                layers::sqlite_only_desktop()
            },
        );
        step(
            &mut outcomes,
            "prometheus rules (promtool)",
            promtool::check,
        );
        step(&mut outcomes, "build + clippy (host, console)", || {
            built = Some(build(cargo_test_args)?);
            Ok(())
        })
    };

    if let Some(built) = built.as_ref().filter(|_| ready) {
        let dist = &built.console;
        step(&mut outcomes, "cargo test --workspace", || {
            run_counting(
                cmd::cargo()
                    .args(["test", "--workspace", "--no-fail-fast"])
                    .args(cargo_test_args)
                    .env("SWITCHBOARD_UI_DIR", dist)
                    // The browser suite's CLI journey runs the build's `switchboard`.
                    .env("SWITCHBOARD_CLI_BIN", &built.server),
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
                    built,
                    (postgres::URL_ENV, &pg.url),
                    ON_POSTGRES,
                    cargo_test_args,
                    &mut counts,
                )?;
                // The console's one PostgreSQL-only part: the queue table's tiles.
                built.run(
                    Select::Tests(&["browser"]),
                    &[BROWSER_ON_POSTGRES],
                    cargo_test_args,
                    &[
                        (postgres::URL_ENV, pg.url.as_ref()),
                        ("SWITCHBOARD_UI_DIR", dist.as_os_str()),
                    ],
                    &mut counts,
                )
            });
            // Alone: it restarts the cluster under every connection.
            if let Some(ctl) = &pg.ctl {
                step(&mut outcomes, "PostgreSQL restart under load", || {
                    restart_test(
                        built,
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
        // The Python package: pytest against the build's `switchboard`, its
        // outbox's tests on PostgreSQL too.
        step(&mut outcomes, "python package (pytest)", || {
            python::pytest(
                &built.server,
                pg.as_ref().map(|pg| pg.url.as_str()),
                &mut counts,
            )
        });
        let mut maria = None;
        step(&mut outcomes, "mariadb (start)", || {
            maria = mariadb::ensure()?;
            Ok(())
        });
        if let Some(db) = &maria {
            step(&mut outcomes, "conformance on MariaDB", || {
                on_server(
                    built,
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
                        built,
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
            keyring_tests(built, &mut counts)
        });
        step(&mut outcomes, "desktop package, smoke (Xvfb)", || {
            desktop_smoke(built, &mut counts)
        });
        step(&mut outcomes, "installed binary serves its console", || {
            installed_console(built, cargo_test_args, &mut counts)
        });
        // The server package carries that installed binary: no build of its own.
        step(&mut outcomes, "server package (.deb)", || {
            package::server_package(&installed_bin(), built, cargo_test_args, &mut counts)
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

/// The built `switchboard`, copied out of the target dir as an install would, then
/// the browser test of that binary's console (`tests/tests/browser/installed.rs`).
///
/// Its console is the one its build script built and embedded (`SWITCHBOARD_EMBED_UI=1`,
/// the code a release build and `cargo install` run), never `ui/dist`. Not `cargo
/// install` itself: it resolves features for one package, which rebuilds every
/// dependency, ten minutes on CI's two cores for what the test build already made.
fn installed_console(built: &Built, cargo_test_args: &[String], counts: &mut Counts) -> Result<()> {
    let installed = installed_bin();
    let dir = installed.parent().context("the install root")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::copy(&built.server, &installed).with_context(|| {
        format!(
            "copying {} to {}",
            built.server.display(),
            installed.display()
        )
    })?;
    built.run(
        Select::Tests(&["browser"]),
        &["installed"],
        cargo_test_args,
        &[("SWITCHBOARD_INSTALLED_BIN", installed.as_os_str())],
        counts,
    )
}

/// Where [`installed_console`] installs.
fn installed_root() -> PathBuf {
    cmd::target_dir().join("installed")
}

/// The `switchboard` [`installed_console`] installs.
fn installed_bin() -> PathBuf {
    installed_root().join("bin").join("switchboard")
}

/// Totals of the `test result:` lines of a `cargo test` run, and of pytest's
/// closing line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Counts {
    /// Adds pytest's closing line (`3 failed, 50 passed, 2 skipped in 30.12s`,
    /// with or without its `=` rule): errors count as failures, skips as ignored.
    fn add_pytest_line(&mut self, line: &str) {
        let line = line.trim().trim_matches('=').trim();
        let Some((results, time)) = line.rsplit_once(" in ") else {
            return;
        };
        if !time.split_whitespace().next().is_some_and(|t| {
            t.strip_suffix('s')
                .is_some_and(|n| n.parse::<f64>().is_ok())
        }) {
            return;
        }
        let mut parsed = Counts::default();
        for part in results.split(", ") {
            let Some((n, what)) = part.split_once(' ') else {
                return;
            };
            let Ok(n) = n.parse::<u64>() else { return };
            match what {
                "passed" => parsed.passed += n,
                "failed" | "error" | "errors" => parsed.failed += n,
                "skipped" => parsed.ignored += n,
                _ => {}
            }
        }
        self.passed += parsed.passed;
        self.failed += parsed.failed;
        self.ignored += parsed.ignored;
    }

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
    each_stdout_line(cmd, |l| {
        counts.add_line(l);
        println!("{l}");
    })
}

/// Runs `cmd` like [`cmd::run`], handing each line of its stdout to `f` as it comes.
fn each_stdout_line(cmd: &mut Command, mut f: impl FnMut(&str)) -> Result<()> {
    use std::io::{BufRead, BufReader};
    let line = cmd::render(cmd);
    eprintln!("$ {line}");
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{line}`"))?;
    let out = child.stdout.take().context("no stdout")?;
    for l in BufReader::new(out).lines() {
        f(&l.with_context(|| format!("reading the output of `{line}`"))?);
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for `{line}`"))?;
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

    #[test]
    fn counts_add_up_pytest_closing_lines() {
        let mut c = Counts::default();
        c.add_pytest_line("56 passed, 2 skipped in 30.58s");
        c.add_pytest_line("==== 1 failed, 3 passed, 1 error, 4 warnings in 2.01s (0:00:02) ====");
        c.add_pytest_line("test_send.py ....                                [100%]");
        c.add_pytest_line("the queue was empty in 3 seconds");
        assert_eq!(
            c,
            Counts {
                passed: 59,
                failed: 2,
                ignored: 2
            }
        );
    }
}
