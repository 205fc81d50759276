//! The reliability suite's shared parts (issue 17): how big a run is, and the one row
//! every scenario reports.
//!
//! A scenario is an ordinary test. Under `cargo xtask test` it runs at CI size; under
//! `cargo xtask chaos` (`SWITCHBOARD_CHAOS=full`) at full size. Each scenario ends by
//! [`ChaosRow::record`]ing what it saw: the row is printed and written as JSON into
//! `target/chaos/`, from which `cargo xtask chaos` prints one table. A scenario
//! asserts its own invariants (nothing lost, nothing reordered) after recording, so a
//! failing run still leaves its row.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// How big a run is: `SWITCHBOARD_CHAOS=full` for `cargo xtask chaos`, otherwise the
/// CI subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Ci,
    Full,
}

impl Scale {
    pub fn current() -> Self {
        match std::env::var("SWITCHBOARD_CHAOS").as_deref() {
            Ok("full") => Self::Full,
            _ => Self::Ci,
        }
    }

    /// `ci` in the CI subset, `full` in a full run.
    pub fn pick<T>(self, ci: T, full: T) -> T {
        match self {
            Self::Ci => ci,
            Self::Full => full,
        }
    }

    /// How long a time-bounded target (a fuzz or property target) runs:
    /// `SWITCHBOARD_CHAOS_SECONDS` if set, else `ci` or `full`.
    pub fn duration(self, ci: Duration, full: Duration) -> Duration {
        std::env::var("SWITCHBOARD_CHAOS_SECONDS")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .map_or_else(|| self.pick(ci, full), Duration::from_secs)
    }
}

/// One line of the chaos table. Counts a scenario does not measure stay 0 (or `None`
/// for the recovery time).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ChaosRow {
    pub scenario: String,
    /// `sqlite`, `postgres` or `mysql`, or `-` where no database is involved.
    pub backend: String,
    pub sent: u64,
    pub acknowledged: u64,
    pub lost: u64,
    pub reordered: u64,
    /// Events handled twice before the SDK's dedup (after a lease expiry).
    pub duplicated: u64,
    /// Stale writes refused by a fence (claim token or lease token).
    pub fenced: u64,
    /// The longest time from a fault to the first success after it.
    pub recovery_ms: Option<u64>,
    /// 5xx answers seen by clients.
    pub server_5xx: u64,
    /// Anything else worth a line (faults injected, cases run…).
    pub note: String,
}

impl ChaosRow {
    pub fn new(scenario: &str, backend: &str) -> Self {
        Self {
            scenario: scenario.to_owned(),
            backend: backend.to_owned(),
            ..Self::default()
        }
    }

    /// Prints the row and writes it to `target/chaos/<scenario>-<backend>.json`.
    pub fn record(&self) {
        println!(
            "chaos: {}",
            serde_json::to_string(self).expect("a row is JSON")
        );
        let dir = chaos_dir();
        if std::fs::create_dir_all(&dir).is_ok() {
            let file = dir.join(format!("{}-{}.json", self.scenario, self.backend));
            let _ = std::fs::write(file, serde_json::to_vec_pretty(self).expect("JSON"));
        }
    }
}

/// Where rows go: `SWITCHBOARD_CHAOS_DIR`, else `<workspace>/target/chaos`.
pub fn chaos_dir() -> PathBuf {
    std::env::var_os("SWITCHBOARD_CHAOS_DIR").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
                .join("chaos")
        },
        PathBuf::from,
    )
}

/// The rows recorded so far, sorted by scenario and backend.
pub fn rows() -> Vec<ChaosRow> {
    let mut rows: Vec<ChaosRow> = std::fs::read_dir(chaos_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice(&b).ok())
        .collect();
    rows.sort_by(|a, b| (&a.scenario, &a.backend).cmp(&(&b.scenario, &b.backend)));
    rows
}

/// The table `cargo xtask chaos` prints.
pub fn table(rows: &[ChaosRow]) -> String {
    let mut out = format!(
        "| {:<24} | {:<8} | {:>7} | {:>7} | {:>4} | {:>9} | {:>10} | {:>6} | {:>10} | {:>4} | note\n",
        "scenario",
        "backend",
        "sent",
        "acked",
        "lost",
        "reordered",
        "duplicated",
        "fenced",
        "recovery",
        "5xx"
    );
    out.push_str(&format!(
        "|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|------\n",
        "-".repeat(26),
        "-".repeat(10),
        "-".repeat(9),
        "-".repeat(9),
        "-".repeat(6),
        "-".repeat(11),
        "-".repeat(12),
        "-".repeat(8),
        "-".repeat(12),
        "-".repeat(6)
    ));
    for r in rows {
        let recovery = r.recovery_ms.map_or_else(
            || "-".to_owned(),
            |ms| format!("{:.1} s", ms as f64 / 1000.0),
        );
        out.push_str(&format!(
            "| {:<24} | {:<8} | {:>7} | {:>7} | {:>4} | {:>9} | {:>10} | {:>6} | {:>10} | {:>4} | {}\n",
            r.scenario,
            r.backend,
            r.sent,
            r.acknowledged,
            r.lost,
            r.reordered,
            r.duplicated,
            r.fenced,
            recovery,
            r.server_5xx,
            r.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_line_per_row_with_its_counts() {
        let mut row = ChaosRow::new("crash-loop", "sqlite");
        row.sent = 10_000;
        row.acknowledged = 10_000;
        row.recovery_ms = Some(2_500);
        let t = table(&[row]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[2].contains("crash-loop"), "{t}");
        assert!(lines[2].contains("10000"), "{t}");
        assert!(lines[2].contains("2.5 s"), "{t}");
    }
}
