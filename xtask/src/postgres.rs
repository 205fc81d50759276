//! The PostgreSQL server the conformance suite runs against.
//!
//! `SWITCHBOARD_TEST_POSTGRES` (an admin URL) picks a server you run yourself.
//! Otherwise the Debian cluster is used: started if it is down, with a `switchboard`
//! superuser created for the tests (as root, through the `postgres` account). Each
//! test makes its own database `sb_t_…`; the ones a previous run left are dropped.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::prereqs::is_root;

pub(crate) const URL_ENV: &str = "SWITCHBOARD_TEST_POSTGRES";
const ROLE: &str = "switchboard";

/// The server the tests use.
pub(crate) struct Postgres {
    /// An admin URL (a superuser: tests create databases).
    pub(crate) url: String,
    /// The command that stops, starts and restarts it (`pg_ctlcluster 15 main`), for
    /// the restart test; `None` for a server given by URL (that test is then not run).
    pub(crate) ctl: Option<String>,
}

/// Starts (or finds) PostgreSQL and returns how to reach it.
pub(crate) fn ensure() -> Result<Postgres> {
    if let Ok(url) = std::env::var(URL_ENV)
        && !url.is_empty()
    {
        eprintln!("postgres: using {URL_ENV}");
        drop_test_databases(&url)?;
        return Ok(Postgres { url, ctl: None });
    }
    let clusters = cmd::stdout(Command::new("pg_lsclusters").arg("--no-header")).context(
        "no PostgreSQL: install the Debian package `postgresql` (cargo xtask test does, as \
         root), or set SWITCHBOARD_TEST_POSTGRES to an admin URL of a server you run",
    )?;
    // Ver Cluster Port Status Owner Data-directory Log-file
    let Some(cluster) = clusters.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() >= 4).then(|| {
            (
                f[0].to_owned(),
                f[1].to_owned(),
                f[2].to_owned(),
                f[3].to_owned(),
            )
        })
    }) else {
        bail!(
            "the postgresql package is installed but has no cluster; create one with `pg_createcluster --start 15 main`"
        );
    };
    let (version, name, port, status) = cluster;
    if !status.starts_with("online") {
        eprintln!("postgres: starting cluster {version}/{name}");
        cmd::run(Command::new("pg_ctlcluster").args([&version, &name, "start"]))
            .context("starting PostgreSQL (run as root, or start the cluster yourself)")?;
    }
    let url = format!("postgres://{ROLE}:{ROLE}@127.0.0.1:{port}/postgres");
    if psql(&url, "SELECT 1").is_err() {
        if !is_root() {
            bail!(
                "cannot log in to PostgreSQL as {ROLE}; create the role with\n  sudo -u postgres \
                 psql -p {port} -c \"CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{ROLE}'\"\n\
                 or set {URL_ENV}"
            );
        }
        eprintln!("postgres: creating the {ROLE} role");
        cmd::run(Command::new("runuser").args([
            "-u",
            "postgres",
            "--",
            "psql",
            "-p",
            &port,
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            &format!(
                "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{ROLE}') \
                 THEN CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{ROLE}'; END IF; END$$"
            ),
        ]))?;
    }
    // A server that just started may still be recovering: wait for a login.
    let mut tries = 0;
    while let Err(e) = psql(&url, "SELECT 1") {
        tries += 1;
        if tries > 60 {
            return Err(e.context("PostgreSQL did not accept logins within 30 s"));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    drop_test_databases(&url)?;
    eprintln!("postgres: cluster {version}/{name} on port {port}");
    Ok(Postgres {
        url,
        ctl: Some(format!("pg_ctlcluster {version} {name}")),
    })
}

/// Drops the databases tests made (`sb_t_…`); run before and after the suite.
pub(crate) fn drop_test_databases(url: &str) -> Result<()> {
    let list = psql(
        url,
        "SELECT datname FROM pg_database WHERE datname LIKE 'sb\\_t\\_%'",
    )?;
    let names: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for db in &names {
        psql(
            url,
            &format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"),
        )?;
    }
    if !names.is_empty() {
        eprintln!(
            "postgres: dropped {} databases of an earlier run",
            names.len()
        );
    }
    Ok(())
}

fn psql(url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .output()
        .context("running psql")?;
    if !out.status.success() {
        bail!(
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
