//! How long a fuzz target runs (see the crate docs), and the chaos row it records.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Seconds per target in CI (`cargo test` without `SWITCHBOARD_CHAOS=full`). The
/// issue asks for about 30 s; the targets sit in three test binaries that cargo runs
/// one after the other, so 20 s each keeps the suite's added time at about 1 min.
pub const CI_SECONDS: u64 = 20;

/// Seconds per target in a full chaos run.
pub const FULL_SECONDS: u64 = 600;

/// The fewest cases a full run of a target checks, however long that takes (up
/// to [`FULL_CAP_SECONDS`]).
pub const FULL_MIN_CASES: u64 = 1_000_000;

/// The longest a full run of a target goes on to reach [`FULL_MIN_CASES`].
pub const FULL_CAP_SECONDS: u64 = 1_800;

/// The fewest cases a run checks: `SWITCHBOARD_FUZZ_MIN_CASES` if set; else
/// [`FULL_MIN_CASES`] in a full run whose time is not set by
/// `SWITCHBOARD_CHAOS_SECONDS`; else none.
pub fn min_cases() -> u64 {
    if let Some(n) = std::env::var("SWITCHBOARD_FUZZ_MIN_CASES")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        return n;
    }
    let full = std::env::var("SWITCHBOARD_CHAOS").as_deref() == Ok("full");
    if full && std::env::var_os("SWITCHBOARD_CHAOS_SECONDS").is_none() {
        FULL_MIN_CASES
    } else {
        0
    }
}

/// How long the engine runs next, after `elapsed` and `cases` (`None`: the run is
/// done). First the `budget`; then, while short of `min_cases`, the time the rate
/// so far says the rest takes (a tenth more, at least 5 s), never past `cap` in
/// all.
pub fn next_slice(
    elapsed: Duration,
    cases: u64,
    budget: Duration,
    min_cases: u64,
    cap: Duration,
) -> Option<Duration> {
    if elapsed.is_zero() {
        return Some(budget);
    }
    if cases >= min_cases || elapsed >= cap {
        return None;
    }
    let left = cap - elapsed;
    let rest = if cases == 0 {
        left
    } else {
        // (min - cases) / (cases / elapsed) × 1.1, in whole milliseconds.
        let ms =
            u128::from(min_cases - cases) * elapsed.as_millis() * 11 / (u128::from(cases) * 10);
        Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    };
    Some(rest.max(Duration::from_secs(5)).min(left))
}

/// How long a target runs (see the crate docs).
pub fn budget() -> Duration {
    if let Some(s) = std::env::var("SWITCHBOARD_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        return Duration::from_secs(s);
    }
    match std::env::var("SWITCHBOARD_CHAOS").as_deref() {
        Ok("full") => Duration::from_secs(FULL_SECONDS),
        _ => Duration::from_secs(CI_SECONDS),
    }
}

/// One target's run: counts cases and records the row when dropped, also when a
/// property failed (the row's note then says so), as the chaos scenarios record
/// before they assert.
#[derive(Debug)]
pub struct Run {
    target: String,
    note: String,
    started: Instant,
    budget: Duration,
    min_cases: u64,
    slices: u32,
    cases: Arc<AtomicU64>,
}

impl Run {
    /// Starts the clock for `target` (the row's scenario is `fuzz-<target>`); `note`
    /// names the properties checked.
    pub fn start(target: &str, note: &str) -> Self {
        Self {
            target: target.to_owned(),
            note: note.to_owned(),
            started: Instant::now(),
            budget: budget(),
            min_cases: min_cases(),
            slices: 0,
            cases: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// How long the engine runs next ([`next_slice`] with this run's numbers), or
    /// `None` when the run is done.
    pub fn next_slice(&mut self) -> Option<Duration> {
        let elapsed = if self.slices == 0 {
            Duration::ZERO
        } else {
            self.started.elapsed().max(Duration::from_nanos(1))
        };
        let cap = Duration::from_secs(FULL_CAP_SECONDS).max(self.budget);
        let slice = next_slice(elapsed, self.cases(), self.budget, self.min_cases, cap)?;
        self.slices += 1;
        Some(slice)
    }

    /// The counter the target body bumps once per case.
    pub fn counter(&self) -> Counter {
        Counter(Arc::clone(&self.cases))
    }

    /// Cases run so far.
    pub fn cases(&self) -> u64 {
        self.cases.load(Ordering::Relaxed)
    }

    /// The row as `ChaosRow` serializes it.
    pub fn row(&self, failed: bool) -> serde_json::Value {
        let cases = self.cases();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = cases as f64 / secs;
        let verdict = if failed { "FAILED; " } else { "" };
        serde_json::json!({
            "scenario": format!("fuzz-{}", self.target),
            "backend": "-",
            "sent": cases,
            "acknowledged": 0,
            "lost": 0,
            "reordered": 0,
            "duplicated": 0,
            "fenced": 0,
            "recovery_ms": null,
            "server_5xx": 0,
            "note": format!(
                "{verdict}bolero random engine, {secs:.0} s, {rate:.0} cases/s{}; {}",
                if self.slices > 1 {
                    " (ran on past its budget to reach its minimum cases)"
                } else {
                    ""
                },
                self.note
            ),
        })
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        let cases = self.cases();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        let rate = cases as f64 / secs;
        println!(
            "fuzz-{}: {cases} cases in {secs:.1} s, {rate:.0} cases/s (1,000,000 cases take {:.0} s)",
            self.target,
            1e6 / rate.max(1e-9)
        );
        let row = self.row(failed);
        println!("chaos: {row}");
        let dir = chaos_dir();
        if std::fs::create_dir_all(&dir).is_ok() {
            let file = dir.join(format!("fuzz-{}--.json", self.target));
            if let Ok(json) = serde_json::to_vec_pretty(&row) {
                let _ = std::fs::write(file, json);
            }
        }
    }
}

/// Bumped once per case.
#[derive(Debug, Clone)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where rows go: `SWITCHBOARD_CHAOS_DIR`, else `<workspace>/target/chaos` (as
/// `switchboard_tests::chaos::chaos_dir`).
pub fn chaos_dir() -> PathBuf {
    std::env::var_os("SWITCHBOARD_CHAOS_DIR").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("..")
                .join("target")
                .join("chaos")
        },
        PathBuf::from,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_short_of_its_cases_goes_on_for_what_its_rate_says() {
        let s = Duration::from_secs;
        let (budget, cap) = (s(600), s(1_800));
        // First the budget.
        assert_eq!(next_slice(s(0), 0, budget, 1_000_000, cap), Some(budget));
        // Enough cases: done, whether a minimum is set or not.
        assert_eq!(next_slice(s(600), 1_000_000, budget, 1_000_000, cap), None);
        assert_eq!(next_slice(s(20), 5, s(20), 0, cap), None);
        // 800,000 in 600 s: 200,000 more at 1,333/s is 150 s, plus a tenth.
        assert_eq!(
            next_slice(s(600), 800_000, budget, 1_000_000, cap),
            Some(s(165))
        );
        // Nearly there: at least 5 s.
        assert_eq!(
            next_slice(s(600), 999_999, budget, 1_000_000, cap),
            Some(s(5))
        );
        // Never past the cap, and done at it.
        assert_eq!(
            next_slice(s(600), 1_000, budget, 1_000_000, cap),
            Some(s(1_200))
        );
        assert_eq!(next_slice(s(1_800), 1_000, budget, 1_000_000, cap), None);
        // No case at all yet: the rest of the cap.
        assert_eq!(
            next_slice(s(600), 0, budget, 1_000_000, cap),
            Some(s(1_200))
        );
    }
}
