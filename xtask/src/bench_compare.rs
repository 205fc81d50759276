//! `cargo xtask bench --compare REV [--rounds N] [--old-bin PATH] [bench options]`:
//! the bench binary
//! of `REV` (built from a worktree, sharing this target's dependencies) against this
//! tree's, run in interleaved rounds on the same machine (old, new, then new, old,
//! …), each figure the median of its rounds, and new ÷ old. A change to the server's
//! inside should leave no workload slower; noise on a shared machine is why one run
//! of each proves nothing, and why the order alternates.
//!
//! Figures: every result row's `msgs_per_sec` (higher is better), W3's latency
//! percentiles and W3I's memory and idle CPU per connection (lower is better), read
//! from the JSON each run writes into its own directory. Other options are passed to both binaries unchanged (`--only W1`,
//! `--seconds 3`, …); the PostgreSQL and MariaDB URLs as `cargo xtask bench` finds
//! them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::cmd;

/// A figure's key (`W1 group_commit msgs/s`) → its value in each run.
type Figures = BTreeMap<String, Vec<f64>>;

/// Figures whose keys end so are better lower (latencies, memory, CPU).
const LOWER_IS_BETTER: &[&str] = &["_ms", "per_conn", "cpu_pct", "cpu_us/msg"];

pub(crate) fn compare(args: &[String]) -> Result<()> {
    let (rev, rounds, old_bin, rest) = parse(args)?;
    let root = cmd::root();
    let out = cmd::target_dir().join("bench-compare");
    std::fs::create_dir_all(&out)?;
    let new = build(&root, &out.join("new"))?;
    let old = match &old_bin {
        Some(bin) => bin.clone(),
        None => {
            let old_src = out.join("old-src");
            worktree(&root, &old_src, &rev)?;
            build(&old_src, &out.join("old"))?
        }
    };
    let env = super::bench::database_env(&rest);
    let (mut old_figures, mut new_figures) = (Figures::new(), Figures::new());
    for round in 1..=rounds {
        // Alternate the order so neither binary always runs on a warmer machine.
        let order: [(&str, &Path, &mut Figures); 2] = if round % 2 == 1 {
            [
                ("old", &old, &mut old_figures),
                ("new", &new, &mut new_figures),
            ]
        } else {
            [
                ("new", &new, &mut new_figures),
                ("old", &old, &mut old_figures),
            ]
        };
        for (label, bin, figures) in order {
            eprintln!("\n== round {round}/{rounds}: {label} ({})", bin.display());
            let dir = out.join(format!("run-{round}-{label}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            let mut run = std::process::Command::new(bin);
            run.args(&rest)
                .env("CARGO_TARGET_DIR", &dir)
                .envs(env.clone());
            cmd::run(&mut run).with_context(|| format!("{label} bench, round {round}"))?;
            read_figures(&dir.join("bench"), figures)?;
        }
    }
    print(&rev, rounds, &old_figures, &new_figures);
    Ok(())
}

/// What `--compare` was given: `REV`, the rounds (at least 1; the default 5), the
/// old side's binary if it was built already (`--old-bin PATH`, then `REV` only
/// names it), and what goes to the binaries.
type Parsed = (String, usize, Option<PathBuf>, Vec<String>);

fn parse(args: &[String]) -> Result<Parsed> {
    let (mut rev, mut rounds, mut old_bin, mut rest) = (None, 5, None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--compare" => rev = it.next().cloned(),
            "--old-bin" => old_bin = it.next().map(PathBuf::from),
            "--rounds" => {
                let n = it.next().context("--rounds needs a number")?;
                rounds = n.parse().context("--rounds needs a number")?;
            }
            _ => rest.push(a.clone()),
        }
    }
    let rev = rev.context("--compare needs a git revision (the old side)")?;
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    Ok((rev, rounds, old_bin, rest))
}

/// A worktree of `rev` at `dir` (made again if it holds another commit).
fn worktree(root: &Path, dir: &Path, rev: &str) -> Result<()> {
    if dir.exists() {
        let _ = cmd::run(
            std::process::Command::new("git")
                .args(["worktree", "remove", "--force"])
                .arg(dir)
                .current_dir(root),
        );
        let _ = std::fs::remove_dir_all(dir);
    }
    cmd::run(
        std::process::Command::new("git")
            .args(["worktree", "add", "--detach", "--force"])
            .arg(dir)
            .arg(rev)
            .current_dir(root),
    )
}

/// Builds the bench binary of the workspace at `src` in release and copies it to
/// `to` (so the next build does not overwrite it).
fn build(src: &Path, to: &Path) -> Result<PathBuf> {
    cmd::run(
        cmd::cargo()
            .args([
                "build",
                "--release",
                "-p",
                "switchboard-tests",
                "--bin",
                "bench",
            ])
            .env("CARGO_TARGET_DIR", cmd::target_dir())
            .current_dir(src),
    )?;
    std::fs::copy(cmd::target_dir().join("release").join("bench"), to)
        .with_context(|| format!("copying the bench binary to {}", to.display()))?;
    Ok(to.to_path_buf())
}

/// Adds one run's figures from the JSON files in `dir`.
fn read_figures(dir: &Path, figures: &mut Figures) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        for (key, v) in figures_of(&value) {
            figures.entry(key).or_default().push(v);
        }
    }
    Ok(())
}

/// The figures of one JSON file: result rows (`msgs/s`), or W3's latencies (`ms`).
fn figures_of(value: &serde_json::Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    if let Some(rows) = value.as_array() {
        for row in rows {
            let (Some(w), Some(v), Some(rate)) = (
                row["workload"].as_str(),
                row["variant"].as_str(),
                row["msgs_per_sec"].as_f64(),
            ) else {
                continue;
            };
            out.push((format!("{w} {v} msgs/s"), rate));
            if let Some(cpu) = row["cpu_us_per_msg"].as_f64() {
                out.push((format!("{w} {v} cpu_us/msg"), cpu));
            }
        }
    } else if value.get("commit_to_sse").is_some() {
        for figure in ["commit_to_sse", "commit_to_claim", "send_round_trip"] {
            for q in ["p50_ms", "p99_ms"] {
                if let Some(ms) = value[figure][q].as_f64() {
                    out.push((format!("W3 {figure} {q}"), ms));
                }
            }
        }
    } else if value.get("pss_bytes_per_conn").is_some() {
        for figure in ["pss_bytes_per_conn", "idle_cpu_pct"] {
            if let Some(v) = value[figure].as_f64() {
                out.push((format!("W3I {figure}"), v));
            }
        }
    }
    out
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// How one figure moved: the medians, the median of the rounds' own new ÷ old (the
/// two runs of a round share the machine's state, so their ratio cancels most of
/// the drift between rounds), and in how many rounds new was behind.
#[derive(Debug, PartialEq)]
struct Moved {
    old: f64,
    new: f64,
    paired: f64,
    behind: usize,
    rounds: usize,
}

impl Moved {
    fn of(old: &[f64], new: &[f64], lower_is_better: bool) -> Self {
        let ratios: Vec<f64> = old.iter().zip(new).map(|(o, n)| n / o).collect();
        let behind = ratios
            .iter()
            .filter(|r| {
                if lower_is_better {
                    **r > 1.0
                } else {
                    **r < 1.0
                }
            })
            .count();
        Self {
            old: median(old),
            new: median(new),
            paired: median(&ratios),
            behind,
            rounds: ratios.len(),
        }
    }

    /// WORSE only when the paired ratio is more than 5 % behind and new was behind
    /// in at least four rounds of five (a sign test: by chance alone, one time in
    /// about six); "worse?" when only one of the two holds.
    fn verdict(&self, lower_is_better: bool) -> &'static str {
        let behind_by = if lower_is_better {
            self.paired - 1.0
        } else {
            1.0 - self.paired
        };
        if self.old <= 0.0 {
            // A ratio of figures at or below zero (W3's commit → SSE p50 can be a
            // hair negative: the clocks of two tasks) says nothing.
            return "n/a";
        }
        let mostly = self.behind * 5 >= self.rounds * 4;
        match (behind_by > 0.05, mostly, behind_by < -0.05) {
            (true, true, _) => "WORSE",
            (true, false, _) | (false, true, false) if self.rounds > 1 => "worse? (noise)",
            (_, _, true) => "better",
            _ => "same",
        }
    }
}

/// The table: each figure's medians, the median paired ratio, the rounds new was
/// behind, and a verdict.
fn print(rev: &str, rounds: usize, old: &Figures, new: &Figures) {
    println!("\nbench --compare {rev}: {rounds} interleaved round(s)");
    println!(
        "{:<52} {:>11} {:>11} {:>8} {:>7}  verdict",
        "figure", "old median", "new median", "paired", "behind"
    );
    for (key, old_values) in old {
        let lower_is_better = LOWER_IS_BETTER.iter().any(|end| key.ends_with(end));
        let Some(new_values) = new.get(key) else {
            let o = median(old_values);
            println!(
                "{key:<52} {o:>11.2} {:>11} {:>8} {:>7}  gone",
                "-", "-", "-"
            );
            continue;
        };
        let m = Moved::of(old_values, new_values, lower_is_better);
        println!(
            "{key:<52} {:>11.2} {:>11.2} {:>8.3} {:>7}  {}",
            m.old,
            m.new,
            m.paired,
            format!("{}/{}", m.behind, m.rounds),
            m.verdict(lower_is_better)
        );
    }
    for key in new.keys().filter(|k| !old.contains_key(*k)) {
        let n = median(&new[key]);
        println!("{key:<52} {:>11} {n:>11.2} {:>8} {:>7}  new", "-", "-", "-");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_come_from_rows_and_from_w3() {
        let rows = serde_json::json!([
            {"workload": "W1", "variant": "group_commit", "msgs_per_sec": 1200.5, "cpu_us_per_msg": 310.0},
            {"workload": "W2", "variant": "batch_16", "msgs_per_sec": 800.0},
            {"not": "a row"}
        ]);
        assert_eq!(
            figures_of(&rows),
            vec![
                ("W1 group_commit msgs/s".to_owned(), 1200.5),
                ("W1 group_commit cpu_us/msg".to_owned(), 310.0),
                ("W2 batch_16 msgs/s".to_owned(), 800.0)
            ]
        );
        let w3 = serde_json::json!({
            "commit_to_sse": {"p50_ms": 0.4, "p99_ms": 1.5},
            "commit_to_claim": {"p50_ms": 1.0, "p99_ms": 4.0},
            "send_round_trip": {"p50_ms": 2.0, "p99_ms": 9.0}
        });
        let got = figures_of(&w3);
        assert_eq!(got.len(), 6);
        assert!(got.contains(&("W3 commit_to_claim p99_ms".to_owned(), 4.0)));
        let w3i = serde_json::json!({"pss_bytes_per_conn": 5000.0, "idle_cpu_pct": 0.4});
        assert_eq!(
            figures_of(&w3i),
            vec![
                ("W3I pss_bytes_per_conn".to_owned(), 5000.0),
                ("W3I idle_cpu_pct".to_owned(), 0.4)
            ]
        );
    }

    #[test]
    fn worse_needs_the_paired_ratio_and_most_rounds_behind() {
        // Slower by 10 % in every round: worse.
        let m = Moved::of(&[100.0; 5], &[90.0; 5], false);
        assert_eq!((m.behind, m.verdict(false)), (5, "WORSE"));
        // One bad round among even ones: the median pair says same, one round behind.
        let m = Moved::of(
            &[100.0, 100.0, 100.0, 100.0, 100.0],
            &[101.0, 102.0, 60.0, 100.5, 103.0],
            false,
        );
        assert_eq!(m.verdict(false), "same");
        // Behind in four rounds but by 2 %: noise at most.
        let m = Moved::of(&[100.0; 5], &[98.0, 98.0, 98.0, 98.0, 101.0], false);
        assert_eq!(m.verdict(false), "worse? (noise)");
        // Lower is better: a latency up 20 % in every round is worse, down is better.
        assert_eq!(Moved::of(&[1.0; 5], &[1.2; 5], true).verdict(true), "WORSE");
        assert_eq!(
            Moved::of(&[1.0; 5], &[0.8; 5], true).verdict(true),
            "better"
        );
    }

    #[test]
    fn the_median_of_an_even_count_is_the_middle_pair_s_mean() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn the_rounds_and_the_revision_are_read_and_the_rest_passed_on() {
        let args: Vec<String> = ["--compare", "abc", "--only", "W1", "--rounds", "3"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (rev, rounds, old_bin, rest) = parse(&args).expect("parses");
        assert_eq!(old_bin, None);
        assert_eq!((rev.as_str(), rounds), ("abc", 3));
        assert_eq!(rest, ["--only", "W1"]);
        assert!(parse(&["--rounds".to_owned(), "0".to_owned()]).is_err());
    }
}
