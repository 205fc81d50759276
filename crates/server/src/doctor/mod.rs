//! `switchboard doctor`: checks a deployment's settings and surroundings and says,
//! for each problem, how to fix it. It reads, it never writes: no migration, no lock
//! taken, no file created.
//!
//! Every check here is caused by a test (`doctor::tests`, on SQLite files and, with
//! `--include-ignored`, on the test PostgreSQL and MariaDB), and `switchboard doctor`
//! itself by `crates/cli/tests/doctor.rs` (exit status and `--json`).

//!
//! `database.rs` checks the database (and SQLite's file), `host.rs` this machine: the
//! token file, disk space, the console and the listener.

mod database;
mod host;
mod signatures;

use crate::config::Config;
use serde::Serialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How bad a finding is. Orders as it reads: `Ok < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Error,
}

impl Status {
    /// The exit status of `switchboard doctor`: 0, 1 or 2.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Error => 2,
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// A stable name: `database`, `migrations`, `sqlite_synchronous`, …
    pub check: &'static str,
    pub status: Status,
    pub message: String,
    /// How to fix it, for a warning or an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, message: impl Into<String>) -> Self {
        Self {
            check,
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }

    fn warning(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            status: Status::Warning,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }

    fn error(check: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            status: Status::Error,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Everything `diagnose` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The worst status of any finding.
    pub status: Status,
    pub findings: Vec<Finding>,
}

impl Report {
    /// The finding of `check`, if it ran.
    pub fn get(&self, check: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.check == check)
    }
}

/// Where a warning turns into an error.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// Free space below this on the data directory's file system is a warning…
    pub warn_free_bytes: u64,
    /// …and below this an error.
    pub error_free_bytes: u64,
    /// Clock skew between this machine and the database beyond this is a warning…
    pub warn_skew: Duration,
    /// …and beyond this an error.
    pub error_skew: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            warn_free_bytes: 1 << 30,
            error_free_bytes: 100 << 20,
            warn_skew: Duration::from_millis(500),
            error_skew: Duration::from_secs(5),
        }
    }
}

/// Where and how the server would listen.
#[derive(Debug, Clone)]
pub struct Listening {
    pub addr: SocketAddr,
    /// The certificate and key files, when serving HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Plain HTTP on a non-loopback address, behind a TLS-terminating proxy.
    pub allow_plain_http: bool,
}

impl From<SocketAddr> for Listening {
    fn from(addr: SocketAddr) -> Self {
        Self {
            addr,
            tls: None,
            allow_plain_http: false,
        }
    }
}

/// Runs every check for a server that would run with `config` on `listen`.
pub async fn diagnose(
    config: &Config,
    listen: impl Into<Listening>,
    thresholds: &Thresholds,
) -> Report {
    let listen = listen.into();
    let mut findings = database::check(config, thresholds).await;
    findings.push(host::token_file(config));
    findings.push(host::disk(&host::data_dir(config), thresholds));
    findings.extend(host::archive(config, thresholds));
    findings.push(host::console(config));
    findings.push(host::horizons(config));
    findings.extend(host::listener(&listen));
    let status = findings
        .iter()
        .map(|f| f.status)
        .max()
        .unwrap_or(Status::Ok);
    Report { status, findings }
}

#[cfg(test)]
mod tests;
