//! `cargo xtask chaos`: the reliability suite at full size (issue 17).
//!
//! Each scenario is an ordinary test that reads `SWITCHBOARD_CHAOS=full` for its full
//! size and records one row per backend into `target/chaos/` (see
//! `tests/src/chaos.rs`); `cargo xtask test` runs the same tests at CI size. This
//! command runs every scenario on SQLite, then those that need a database server on
//! PostgreSQL and MariaDB (started as for `cargo xtask test`), and prints one table:
//! scenario, backend, events sent, acknowledged, lost, reordered, duplicated before
//! dedup, fenced writes, recovery time, 5xx seen.

use anyhow::{Result, bail};

use crate::{cmd, mariadb, postgres, prereqs};

/// One scenario's tests.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    /// The `cargo test --workspace` arguments that select its tests.
    pub(crate) args: &'static [&'static str],
    /// Whether it also runs on PostgreSQL and MariaDB (its tests there are
    /// `#[ignore]`d without a server, and run with `--include-ignored`), and the
    /// name filters that pick its tests there.
    pub(crate) on_servers: Option<&'static [&'static str]>,
}

/// Every scenario, in the order they run.
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "crash and pause loops (SIGKILL, SIGSTOP under load)",
        args: &["--test", "chaos_crash"],
        on_servers: Some(&["on_a_shared_database"]),
    },
    Scenario {
        name: "agents paused holding claims (SIGSTOP of `agent run`)",
        args: &["--test", "chaos_agents"],
        on_servers: None,
    },
    Scenario {
        name: "load (1,000 SSE consumers on one process for 10 minutes, RSS over time)",
        args: &["--test", "chaos_load"],
        on_servers: None,
    },
    Scenario {
        name: "races held open (passes every 2 ms under every kind of write)",
        args: &["--test", "protocol", "races::"],
        on_servers: Some(&[]),
    },
    Scenario {
        name: "network faults (agents and server, server and database)",
        args: &["--test", "network_faults"],
        on_servers: Some(&["database"]),
    },
    Scenario {
        name: "bad input (schemathesis, operator and agent)",
        args: &["--test", "schemathesis"],
        on_servers: None,
    },
    Scenario {
        name: "fuzz targets (names, SSE, privacy gate, headers, queries; 600 s each)",
        args: &["fuzz_"],
        on_servers: None,
    },
    Scenario {
        name: "storage faults (a full disk, an unwritable file)",
        args: &["--test", "chaos_storage"],
        on_servers: None,
    },
];

/// Clears the rows of an earlier run.
pub(crate) fn clear_rows() {
    let _ = std::fs::remove_dir_all(cmd::target_dir().join("chaos"));
}

/// Prints the table of the rows recorded so far (through the tests crate, which
/// owns the row's format).
pub(crate) fn print_table() -> Result<()> {
    cmd::run(cmd::cargo().args([
        "run",
        "--quiet",
        "-p",
        "switchboard-tests",
        "--bin",
        "chaos-table",
    ]))
}

pub(crate) fn chaos(args: &[String]) -> Result<()> {
    cmd::remember(&prereqs::ensure()?);
    clear_rows();
    let mut failed = Vec::new();
    let full = |c: &mut std::process::Command| {
        c.env("SWITCHBOARD_CHAOS", "full");
    };
    for s in SCENARIOS {
        eprintln!("\n== chaos: {} on SQLite", s.name);
        let mut c = cmd::cargo();
        c.args(["test", "--workspace"]).args(s.args).args(args);
        full(&mut c);
        if let Err(e) = cmd::run(&mut c) {
            failed.push(format!("{} on SQLite: {e:#}", s.name));
        }
    }
    let pg = postgres::ensure()
        .map_err(|e| eprintln!("chaos: no PostgreSQL, its runs are skipped: {e:#}"))
        .ok()
        .map(|p| (postgres::URL_ENV, p.url, "PostgreSQL"));
    let maria = mariadb::ensure()
        .map_err(|e| eprintln!("chaos: no MariaDB, its runs are skipped: {e:#}"))
        .ok()
        .flatten()
        .map(|m| (mariadb::URL_ENV, m.url, "MariaDB"));
    for (env, url, server) in pg.into_iter().chain(maria) {
        for (s, filters) in SCENARIOS
            .iter()
            .filter_map(|s| s.on_servers.map(|f| (s, f)))
        {
            eprintln!("\n== chaos: {} on {server}", s.name);
            let mut c = cmd::cargo();
            c.args(["test", "--workspace"])
                .args(s.args)
                .args(args)
                .args(["--", "--include-ignored"])
                .args(filters)
                .env(env, &url);
            full(&mut c);
            if let Err(e) = cmd::run(&mut c) {
                failed.push(format!("{} on {server}: {e:#}", s.name));
            }
        }
    }
    print_table()?;
    if !failed.is_empty() {
        bail!(
            "{} chaos runs failed:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}
