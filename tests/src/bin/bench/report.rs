//! Results: the table on stdout, progress on stderr, JSON under `<target>/bench/`,
//! and the process CPU clock (from `/proc/self/stat`).

use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One result row; the JSON files hold an array of these.
///
/// Compatibility: fields are only ever added, so scripts reading old files keep working.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Row {
    /// `W1`, `AUTH`, `W2`, `R1`, `W4`, `WH`, `MCP`, `PY-W1`, `PG-W1`, `PG-W2`, `MY-W1` or
    /// `MY-W2`.
    pub(crate) workload: &'static str,
    /// Machine-friendly name of the variant (`batch_16` …).
    pub(crate) variant: String,
    pub(crate) description: String,
    /// What the baseline is.
    pub(crate) baseline: String,
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    pub(crate) msgs_per_sec: f64,
    pub(crate) baseline_messages: u64,
    pub(crate) baseline_seconds: f64,
    pub(crate) baseline_msgs_per_sec: f64,
    /// `msgs_per_sec / baseline_msgs_per_sec`.
    pub(crate) ratio: f64,
    /// The ratio an issue asks for, if any.
    pub(crate) goal: Option<f64>,
    pub(crate) goal_met: Option<bool>,
    /// CPU time (user + system) of the whole process per message: server, client and
    /// SQLite threads together for the server side. On PostgreSQL (`PG-…`), plus the
    /// CPU of the database's backend processes.
    pub(crate) cpu_us_per_msg: Option<f64>,
    pub(crate) baseline_cpu_us_per_msg: Option<f64>,
    /// msgs/s of every repetition (the row reports the best, as noise only slows).
    pub(crate) samples: Vec<f64>,
    pub(crate) baseline_samples: Vec<f64>,
    pub(crate) quick: bool,
    /// The server side's latency per operation, where measured (W1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) latency: Option<Latency>,
}

impl Row {
    /// The server side's figures as a [`Rate`](crate::w1::Rate).
    pub(crate) fn rate(&self) -> crate::w1::Rate {
        crate::w1::Rate {
            messages: self.messages,
            seconds: self.seconds,
            cpu_seconds: self.cpu_us_per_msg.unwrap_or(0.0) * self.messages as f64 / 1e6,
            latency: self.latency.unwrap_or_default(),
        }
    }
}

/// Latency percentiles of a run's operations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl Latency {
    /// Of `took` (sorted here); zeros for none.
    pub(crate) fn of(took: &mut [std::time::Duration]) -> Self {
        took.sort_unstable();
        let at = |q: f64| {
            let i = ((took.len() as f64 * q).ceil() as usize).clamp(1, took.len().max(1)) - 1;
            took.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
        };
        Self {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

/// A progress line on stderr (the table goes to stdout).
pub(crate) fn progress(line: std::fmt::Arguments<'_>) {
    eprintln!("{line}");
}

pub(crate) fn print_table(rows: &[Row]) {
    println!(
        "{:<5} {:<34} {:>8} {:>7} {:>9} | {:<20} {:>9} | {:>6} {:>12} | {:>8} {:>8}",
        "",
        "server side",
        "msgs",
        "secs",
        "msgs/s",
        "baseline",
        "msgs/s",
        "ratio",
        "goal",
        "cpu µs/msg",
        "base µs"
    );
    println!("{}", "-".repeat(144));
    let label = |row: &Row| match row.workload {
        "W1" if row.variant == "vs_raw_commit" => "W1, group commit (default)".to_owned(),
        "W1" if row.variant == "vs_raw_commit_ungrouped" => "W1, group commit off".to_owned(),
        "W1" | "PG-W1" | "MY-W1" => "enqueue HTTP + Idempotency-Key".to_owned(),
        "AUTH" if row.variant == "jwt" => "W1, JWT access token".to_owned(),
        "AUTH" if row.variant == "signed_w1" => "W1, every send signed".to_owned(),
        "AUTH" if row.variant == "signed_w2" => "W2, claims and acks signed".to_owned(),
        "AUTH" => "W1, rate limiter on".to_owned(),
        "R1" => format!("bulk replay job, {} events", row.messages),
        "W4" => format!("leases: {}", row.variant),
        "WH" => "webhook deliveries, HTTPS".to_owned(),
        "MCP" => format!("switchboard mcp, {}", row.variant.replace('_', " ")),
        "PY-W1" => "Python: outbox send × N, flush".to_owned(),
        _ => format!("drain claim+ack, {}", row.variant.replace('_', " ")),
    };
    let base = |row: &Row| match row.workload {
        "W1" if row.variant.starts_with("vs_raw_commit") => "raw 1-row commits",
        "W1" | "PG-W1" | "MY-W1" => "minimal axum route",
        "AUTH" if row.variant == "jwt" => "W1, static token",
        "AUTH" if row.variant == "signed_w1" => "W1, unsigned",
        "AUTH" if row.variant == "signed_w2" => "W2, unsigned",
        "AUTH" => "W1, limiter off",
        "PG-W2" if row.variant.ends_with("pgmq") => "pgmq read + delete",
        "R1" => "raw sqlx batches",
        "W4" => "store, no HTTP",
        "WH" => "signed POSTs, no queue",
        "MCP" => "the same via the SDK",
        "PY-W1" => "Rust SDK, same calls",
        _ => "raw sqlx loop",
    };
    for row in rows {
        let goal = match (row.goal, row.goal_met) {
            (Some(goal), Some(met)) => {
                format!("≥{goal:.2} {}", if met { "PASS" } else { "MISS" })
            }
            _ => "-".to_owned(),
        };
        let us = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        println!(
            "{:<5} {:<34} {:>8} {:>7.2} {:>9.0} | {:<20} {:>9.0} | {:>5.3}× {:>12} | {:>8} {:>8}",
            row.workload,
            label(row),
            row.messages,
            row.seconds,
            row.msgs_per_sec,
            base(row),
            row.baseline_msgs_per_sec,
            row.ratio,
            goal,
            us(row.cpu_us_per_msg),
            us(row.baseline_cpu_us_per_msg),
        );
    }
}

/// Writes `rows` (a slice of [`Row`]s, or a workload's own result) as pretty JSON.
pub(crate) fn write_json<T: Serialize + ?Sized>(path: &Path, rows: &T) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut text = serde_json::to_string_pretty(rows)?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `<target>/bench`: `$CARGO_TARGET_DIR` if set, else the `target` dir above this
/// executable, else the dir holding the profile dir (`<target>/release/bench`).
pub(crate) fn out_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        let dir = if dir.is_relative() {
            workspace_root().join(dir)
        } else {
            dir
        };
        return dir.join("bench");
    }
    let exe = std::env::current_exe().ok();
    let from_exe = exe.as_deref().and_then(|exe| {
        exe.ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "target"))
            .or_else(|| exe.parent()?.parent())
            .map(Path::to_path_buf)
    });
    from_exe
        .unwrap_or_else(|| workspace_root().join("target"))
        .join("bench")
}

fn workspace_root() -> PathBuf {
    // tests/Cargo.toml lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The 1-, 5- and 15-minute load averages (from `/proc/loadavg`): how busy the
/// machine was, for latency figures that other processes can spoil.
pub(crate) fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// User + system CPU time of this process so far, in seconds (0 where `/proc` is
/// missing). Resolution: one clock tick (10 ms at the usual 100 Hz).
pub(crate) fn cpu_seconds() -> f64 {
    proc_cpu_seconds("self").unwrap_or(0.0)
}

/// User + system CPU time of process `pid` (`self` for this one) so far, in seconds;
/// `None` if `/proc/<pid>/stat` cannot be read (no such process, or no `/proc`).
pub(crate) fn proc_cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: skip past it.
    // After it come field 3 (state) …; utime and stime are fields 14 and 15.
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some((ticks(11)? + ticks(12)?) as f64 / clock_ticks_per_sec())
}

/// `getconf CLK_TCK`, once; 100 when it cannot be asked (the Linux value on every
/// common architecture).
fn clock_ticks_per_sec() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}
