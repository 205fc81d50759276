//! W5 of `cargo xtask bench`: the desktop app's footprint. The release build of the
//! app starts in smoke mode (`--smoke-test`) under Xvfb and a private D-Bus session,
//! exactly as the test suite's desktop smoke test runs it (the embedded server on a
//! fresh SQLite file, the console it carries). When the console is logged in and
//! ready, the app prints `smoke: ready <secs>s after start, pid <pid>`; from then
//! until the app exits, this samples the proportional set size (PSS, `Pss:` of
//! `/proc/<pid>/smaps_rollup`) of the app and every process below it (WebKit's web
//! and network processes), every 100 ms. Xvfb and the D-Bus daemon are the
//! environment, not the app, and are not counted.
//!
//! Three runs; the first starts with whatever the page cache holds, the others warm.
//! The table gives each run and the goals (≤ 150 MB PSS, console ready ≤ 1 s after
//! start); `target/bench/w5.json` has the runs and each process's share.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::cmd;
use crate::test::{Scratch, smoke_command};

const RUNS: usize = 3;
/// The goals: proportional memory of the process tree, start → ready.
const GOAL_PSS_MB: f64 = 150.0;
const GOAL_READY_SECS: f64 = 1.0;
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug)]
struct Run {
    /// From the app's start (`run`) to a logged-in, rendered console.
    ready_secs: f64,
    /// Sum over the tree at the first sample after ready.
    pss_mb_at_ready: f64,
    /// The largest sum seen while the app ran on (the smoke's later steps send
    /// work, quarantine it and wait for the tray's notification).
    pss_mb_max: f64,
    /// Each process's PSS in the largest sample.
    processes: Vec<Process>,
}

#[derive(Debug, Clone)]
struct Process {
    name: String,
    pss_mb: f64,
}

/// The runs; the table and the JSON report each one and the best of each figure.
#[derive(Debug)]
struct Report {
    runs: Vec<Run>,
}

impl Report {
    fn best(&self, figure: impl Fn(&Run) -> f64) -> f64 {
        self.runs.iter().map(figure).fold(f64::MAX, f64::min)
    }

    fn best_ready_secs(&self) -> f64 {
        self.best(|r| r.ready_secs)
    }

    fn best_pss_mb_max(&self) -> f64 {
        self.best(|r| r.pss_mb_max)
    }
}

/// Builds the desktop app in release and measures it; prints the table and writes
/// `target/bench/w5.json`.
pub(crate) fn run() -> Result<()> {
    // Xvfb, D-Bus, WebKitGTK and the wasm target, as `cargo xtask run` needs them.
    let tools = crate::prereqs::ensure()?;
    let mut build = cmd::cargo();
    build.args(["build", "--release", "-p", "switchboard-desktop"]);
    if let Some(wasm_opt) = &tools.wasm_opt {
        // The console as a package carries it: optimized.
        build.env("SWITCHBOARD_WASM_OPT", wasm_opt);
    }
    cmd::run(&mut build)?;
    let bin = cmd::target_dir().join("release/switchboard-desktop");
    let mut runs = Vec::new();
    for n in 1..=RUNS {
        let run = measure(&bin).with_context(|| format!("W5 run {n}"))?;
        eprintln!(
            "W5 run {n}: ready {:.2}s after start, {:.0} MB PSS at ready, {:.0} MB max",
            run.ready_secs, run.pss_mb_at_ready, run.pss_mb_max
        );
        runs.push(run);
    }
    let report = Report { runs };
    print(&report);
    let dir = cmd::target_dir().join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("w5.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&report.json())?)?;
    eprintln!("W5: {}", path.display());
    Ok(())
}

impl Report {
    fn json(&self) -> serde_json::Value {
        let runs: Vec<_> = self
            .runs
            .iter()
            .map(|r| {
                let processes: Vec<_> = r
                    .processes
                    .iter()
                    .map(|p| json!({ "name": p.name, "pss_mb": p.pss_mb }))
                    .collect();
                json!({
                    "ready_secs": r.ready_secs,
                    "pss_mb_at_ready": r.pss_mb_at_ready,
                    "pss_mb_max": r.pss_mb_max,
                    "processes": processes,
                })
            })
            .collect();
        json!({
            "workload": "W5",
            "goal_pss_mb": GOAL_PSS_MB,
            "goal_ready_secs": GOAL_READY_SECS,
            "best_ready_secs": self.best_ready_secs(),
            "best_pss_mb_max": self.best_pss_mb_max(),
            "runs": runs,
        })
    }
}

fn print(report: &Report) {
    let verdict = |ok: bool| if ok { "PASS" } else { "MISS" };
    println!("\nW5 desktop app (release, Xvfb, embedded SQLite server; PSS of its process tree)");
    println!(
        "{:>4} {:>14} {:>14} {:>12}  processes (largest sample)",
        "run", "ready after", "PSS at ready", "PSS max"
    );
    for (n, r) in report.runs.iter().enumerate() {
        let procs: Vec<String> = r
            .processes
            .iter()
            .map(|p| format!("{} {:.0}", p.name, p.pss_mb))
            .collect();
        println!(
            "{:>4} {:>13.2}s {:>11.0} MB {:>9.0} MB  {}",
            n + 1,
            r.ready_secs,
            r.pss_mb_at_ready,
            r.pss_mb_max,
            procs.join(", ")
        );
    }
    println!(
        "best: ready {:.2}s (goal ≤ {GOAL_READY_SECS:.1} s: {}), PSS {:.0} MB (goal ≤ \
         {GOAL_PSS_MB:.0} MB: {})",
        report.best_ready_secs(),
        verdict(report.best_ready_secs() <= GOAL_READY_SECS),
        report.best_pss_mb_max(),
        verdict(report.best_pss_mb_max() <= GOAL_PSS_MB),
    );
}

/// One smoke run of `bin`, sampled from its ready line until it exits.
fn measure(bin: &Path) -> Result<Run> {
    let scratch = Scratch::new("switchboard-w5")?;
    let mut smoke = smoke_command(bin, &scratch, "w5")?;
    smoke
        .arg("--smoke-test")
        .stdout(Stdio::piped())
        // Its request log would bury the bench's table; warnings still show.
        .env("RUST_LOG", "warn");
    eprintln!("$ {}", cmd::render(&smoke));
    let mut child = smoke.spawn().context("starting the desktop app")?;
    let stdout = child.stdout.take().context("the app's stdout")?;
    let mut ready = None;
    let mut lines = Vec::new();
    let mut sampler = None;
    let stop = Arc::new(AtomicBool::new(false));
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if ready.is_none()
            && let Some((secs, pid)) = ready_line(&line)
        {
            ready = Some(secs);
            let stop = stop.clone();
            sampler = Some(std::thread::spawn(move || sample(pid, &stop)));
        }
        lines.push(line);
    }
    let status = child.wait()?;
    stop.store(true, Ordering::Relaxed);
    let samples = match sampler {
        Some(thread) => thread.join().expect("the sampler does not panic"),
        None => Vec::new(),
    };
    if !status.success() {
        bail!(
            "the desktop smoke run failed ({status}); it printed:\n{}",
            lines.join("\n")
        );
    }
    let (Some(ready_secs), Some(first)) = (ready, samples.first()) else {
        bail!(
            "the app printed no `smoke: ready` line, or exited before one sample; it printed:\n{}",
            lines.join("\n")
        );
    };
    let largest = samples
        .iter()
        .max_by(|a, b| total(a).total_cmp(&total(b)))
        .unwrap_or(first);
    Ok(Run {
        ready_secs,
        pss_mb_at_ready: total(first),
        pss_mb_max: total(largest),
        processes: largest.clone(),
    })
}

fn total(sample: &[Process]) -> f64 {
    sample.iter().map(|p| p.pss_mb).sum()
}

/// `smoke: ready 0.812s after start, pid 1234` → (0.812, 1234).
fn ready_line(line: &str) -> Option<(f64, u32)> {
    let rest = line.strip_prefix("smoke: ready ")?;
    let (secs, rest) = rest.split_once("s after start, pid ")?;
    Some((secs.parse().ok()?, rest.trim().parse().ok()?))
}

/// Samples the tree under `root` every [`SAMPLE_EVERY`] until `stop` or it is gone.
fn sample(root: u32, stop: &AtomicBool) -> Vec<Vec<Process>> {
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let tree = tree_pss(root);
        if tree.is_empty() {
            break;
        }
        samples.push(tree);
        std::thread::sleep(SAMPLE_EVERY);
    }
    samples
}

/// PSS of `root` and its descendants, by process name (MB, 10⁶ bytes).
fn tree_pss(root: u32) -> Vec<Process> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = parent(pid) {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut by_name: Vec<Process> = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        if let Some(kib) = pss_kib(pid) {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map(|n| n.trim().to_owned())
                .unwrap_or_else(|_| pid.to_string());
            let mb = kib as f64 * 1024.0 / 1e6;
            match by_name.iter_mut().find(|p| p.name == name) {
                Some(p) => p.pss_mb += mb,
                None => by_name.push(Process { name, pss_mb: mb }),
            }
        }
        todo.extend(children.get(&pid).into_iter().flatten());
    }
    by_name
}

/// The parent of `pid` (field 4 of `/proc/<pid>/stat`, after the `(comm)`).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

fn pss_kib(pid: u32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_ready_line() {
        assert_eq!(
            ready_line("smoke: ready 0.812s after start, pid 1234"),
            Some((0.812, 1234))
        );
        assert_eq!(ready_line("smoke: ok: page loaded in 0.5s"), None);
    }

    #[test]
    fn sums_this_process() {
        let me = std::process::id();
        assert_eq!(parent(me), Some(std::os::unix::process::parent_id()));
        let tree = tree_pss(me);
        assert!(total(&tree) > 0.0, "{tree:?}");
    }
}
