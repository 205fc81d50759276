//! Background work, a room per task, each supervised on its own loop:
//!
//! | room | what | how often |
//! |---|---|---|
//! | [`scavenger`] | expired leases back to pending or to the quarantine (I5); events past `expires_at` | `--worker-interval` |
//! | [`retention`] | terminal events removed (archived first), low-water marks (I6), webhook attempts | `--worker-interval` |
//! | [`jobs`] | bulk jobs of a dead instance marked interrupted (the runner is `app::jobs`) | `--worker-interval` |
//! | [`expiry`] | signing-key rotation, expired tokens and codes, the horizons | every minute |
//! | [`sampler`] | the overview's history | `--sample-interval` |
//! | [`deliverer`] | webhook deliveries | on wake-ups, every 500 ms |
//! | [`beat`] | the heartbeat of a shared database | every second |
//! | `remote` | other instances' wake-ups into the hub | a listener |
//! | `limits` | idle rate-limit buckets forgotten | every minute |
//!
//! Inside a room each task is isolated ([`Workers::task`]): a failure is logged,
//! counted (`background_task_failures_total{task}`) and run again at the next pass.
//! A room that panics is started again by its supervisor ([`start`]) after a
//! second, counted the same way, and the other rooms never notice. Every pass
//! reads time from the configured clock, so tests drive the passes with a manual
//! clock and [`Workers::tick`] (one pass of every periodic room, in order).

pub mod beat;
pub mod deliverer;
pub mod expiry;
mod jobs;
mod limits;
mod remote;
pub mod retention;
pub mod sampler;
pub mod scavenger;

use crate::app::AppState;
use crate::store::{ReapStats, RetentionStats, StoreResult};
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The handle tests and the rooms share: the state, and when the expiry tasks last
/// ran (shared by clones).
#[derive(Clone)]
pub struct Workers {
    state: AppState,
    expired_at: std::sync::Arc<std::sync::Mutex<Option<i64>>>,
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub reap: ReapStats,
    pub retention: RetentionStats,
    /// Bulk jobs whose instance stopped beating, marked interrupted (PostgreSQL).
    pub jobs_interrupted: u64,
    /// Rows the horizons trimmed, by table.
    pub trimmed: Vec<(&'static str, u64)>,
    /// The tasks that failed in this pass, with why. Each was logged and counted
    /// (`background_task_failures_total{task}`); the others ran all the same, and
    /// it runs again at the next pass.
    pub failures: Vec<(&'static str, String)>,
}

impl TickReport {
    /// Whether `task` failed in this pass.
    pub fn failed(&self, task: &str) -> bool {
        self.failures.iter().any(|(t, _)| *t == task)
    }
}

impl Workers {
    pub(crate) fn new(state: AppState) -> Self {
        Self {
            state,
            expired_at: Default::default(),
        }
    }

    /// Runs one background task, isolated: a failure is logged, counted and
    /// reported, and never keeps the pass's other tasks from running.
    async fn task<T: Default>(
        &self,
        name: &'static str,
        report: &mut TickReport,
        work: impl Future<Output = StoreResult<T>>,
    ) -> T {
        let outcome = match self.state.config.hooks.before_background_task(name) {
            Err(why) => Err(crate::store::StoreError::Aborted(why)),
            Ok(()) => work.await,
        };
        match outcome {
            Ok(value) => value,
            Err(e) => {
                tracing::warn!(task = name, error = %e, "background task failed; it runs again at the next pass");
                self.state.metrics.task_failed(name);
                report.failures.push((name, e.to_string()));
                T::default()
            }
        }
    }

    /// One pass of every periodic room, in order, each task isolated from the
    /// others' failures.
    pub async fn tick(&self) -> TickReport {
        let now = self.state.now();
        let mut report = TickReport::default();
        for room in Periodic::ALL {
            self.pass(room, now, &mut report).await;
        }
        report
    }

    /// One pass of `room`.
    async fn pass(&self, room: Periodic, now: i64, report: &mut TickReport) {
        match room {
            Periodic::Scavenger => scavenger::pass(self, now, report).await,
            Periodic::Retention => retention::pass(self, now, report).await,
            Periodic::Jobs => jobs::rescue(self, now, report).await,
            Periodic::Expiry => self.expire_if_due(now, report).await,
            Periodic::Sampler => sampler::pass(self, now, report).await,
        }
    }

    /// The expiry tasks, if due at `now` (taking the turn if so).
    async fn expire_if_due(&self, now: i64, report: &mut TickReport) {
        let due = {
            let mut last = self.expired_at.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|at| (now - at).abs() >= expiry::EVERY_MS);
            if due {
                *last = Some(now);
            }
            due
        };
        if due {
            expiry::pass(self, now, report).await;
        }
    }

    /// One heartbeat at the configured clock's now (the beat room runs it every
    /// second; tests on a manual clock call it after moving the clock).
    pub async fn beat_once(&self) -> StoreResult<()> {
        beat::once(self).await
    }
}

/// The rooms that run a pass at `--worker-interval` ([`Workers::tick`] runs
/// each once, in this order).
#[derive(Debug, Clone, Copy)]
enum Periodic {
    Scavenger,
    Retention,
    Jobs,
    Expiry,
    Sampler,
}

impl Periodic {
    const ALL: [Self; 5] = [
        Self::Scavenger,
        Self::Retention,
        Self::Jobs,
        Self::Expiry,
        Self::Sampler,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Scavenger => "scavenger",
            Self::Retention => "retention",
            Self::Jobs => "jobs",
            Self::Expiry => "expiry",
            Self::Sampler => "sampler",
        }
    }
}

/// Runs `pass` every `interval` (the first at once; a late one is not made up)
/// until `shutdown`.
async fn every<F, Fut>(interval: Duration, shutdown: CancellationToken, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut every = tokio::time::interval(interval);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = every.tick() => pass().await,
        }
    }
}

/// The running rooms, until [`Rooms::stopped`].
pub(crate) struct Rooms(Vec<tokio::task::JoinHandle<()>>);

impl Rooms {
    /// Waits for every room to end (after the shutdown was cancelled).
    pub(crate) async fn stopped(self) {
        for room in self.0 {
            let _ = room.await;
        }
    }
}

/// Starts every room under its supervisor; they end when `state.shutdown` is
/// cancelled.
pub(crate) fn start(state: &AppState) -> Rooms {
    let workers = Workers::new(state.clone());
    let interval = state.config.worker_interval;
    let mut rooms: Vec<_> = Periodic::ALL
        .into_iter()
        .map(|room| {
            let w = workers.clone();
            supervise(state, room.name(), move |shutdown| {
                let w = w.clone();
                every(interval, shutdown, move || {
                    let w = w.clone();
                    async move {
                        // Each task logs and counts its own failure.
                        let mut report = TickReport::default();
                        w.pass(room, w.state.now(), &mut report).await;
                    }
                })
            })
        })
        .collect();
    rooms.push(supervise(state, "beat", move |shutdown| {
        beat::run(workers.clone(), shutdown)
    }));
    let shared = |name, run: fn(AppState, CancellationToken) -> RoomFuture| {
        let state2 = state.clone();
        supervise(state, name, move |shutdown| run(state2.clone(), shutdown))
    };
    rooms.push(shared("deliverer", |s, stop| {
        Box::pin(deliverer::run(s, stop))
    }));
    rooms.push(shared("remote", |s, stop| Box::pin(remote::run(s, stop))));
    rooms.push(shared("limits", |s, stop| Box::pin(limits::run(s, stop))));
    Rooms(rooms)
}

/// A room's loop, boxed so that rooms of one shape fit one list.
type RoomFuture = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a room that panicked waits before it starts again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs `room` until `state.shutdown`; a panic is logged and counted under the
/// room's name, and the room starts again after [`RESTART_AFTER`].
fn supervise<F, Fut>(state: &AppState, name: &'static str, room: F) -> tokio::task::JoinHandle<()>
where
    F: Fn(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let state = state.clone();
    tokio::spawn(async move {
        let shutdown = state.shutdown.clone();
        loop {
            match tokio::spawn(room(shutdown.clone())).await {
                Ok(()) => break,
                Err(e) if e.is_panic() => {
                    tracing::error!(room = name, "a background room panicked; starting it again");
                    state.metrics.task_failed(name);
                }
                Err(_) => break,
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(RESTART_AFTER) => {}
            }
        }
    })
}
