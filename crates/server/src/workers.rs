//! Background workers: the scavenger (expired leases back to pending, or to the
//! quarantine at the attempt limit, I5), expiry of events past `expires_at`, and
//! retention (terminal events removed, low-water marks advanced, I6; old idempotency
//! records dropped), and on a shared database the rescue of bulk jobs whose instance
//! died. Every pass reads time from the configured clock, so tests drive
//! it with a manual clock and [`Workers::tick`].

use crate::app::AppState;
use crate::store::{Horizon, ReapStats, RetentionStats, StoreResult};

/// How often an instance of a shared database beats.
const BEAT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct Workers {
    state: AppState,
    /// When the maintenance tasks last ran (server clock), shared by clones.
    maintained: std::sync::Arc<std::sync::Mutex<Option<i64>>>,
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

/// How often the maintenance tasks run (key rotation, expired tokens and codes,
/// the horizons): every pass would only find nothing.
const MAINTAIN_EVERY_MS: i64 = 60_000;

impl Workers {
    pub(crate) fn new(state: AppState) -> Self {
        Self {
            state,
            maintained: Default::default(),
        }
    }

    /// Runs one background task, isolated: a failure is logged, counted and
    /// reported, and never keeps the pass's other tasks from running.
    async fn task<T: Default>(
        &self,
        name: &'static str,
        report: &mut TickReport,
        work: impl std::future::Future<Output = StoreResult<T>>,
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

    /// One pass of every worker, each task isolated from the others' failures.
    pub async fn tick(&self) -> TickReport {
        let now = self.state.now();
        let state = &self.state;
        let mut report = TickReport::default();
        let reap = self
            .task("scavenger", &mut report, state.store.reap(now))
            .await;
        state.reaped(&reap);
        if reap.lease_expirations + reap.expired > 0 {
            tracing::info!(
                lease_expirations = reap.lease_expirations,
                quarantined = reap.quarantined,
                expired = reap.expired,
                "scavenger pass"
            );
        }
        report.reap = reap;
        let cutoff = now - state.config.retention.as_millis() as i64;
        let archive = state
            .archive
            .as_ref()
            .map(|a| a as &dyn crate::store::ArchiveSink);
        let retention = self
            .task(
                "retention",
                &mut report,
                state.store.retain(cutoff, now, archive),
            )
            .await;
        if retention.events_removed > 0 {
            tracing::info!(
                events_removed = retention.events_removed,
                archived = retention.archived,
                "retention pass"
            );
        }
        if !report.failures.iter().any(|(t, _)| *t == "retention") {
            state.retention_pass(&retention, now);
        }
        report.retention = retention;
        // Webhook attempts are kept as long as terminal events.
        self.task(
            "callback_attempts",
            &mut report,
            state.store.trim_callback_attempts(cutoff),
        )
        .await;
        let orphaned = self
            .task("job_rescue", &mut report, state.store.jobs_orphaned(now))
            .await;
        for (tenant, job) in &orphaned {
            tracing::warn!(
                job_id = job.job_id,
                done = job.done,
                "a bulk job's instance stopped without ending it; marked interrupted"
            );
            state.publish_job(*tenant, job);
        }
        report.jobs_interrupted = orphaned.len() as u64;
        if self.maintenance_due(now) {
            self.maintain(now, &mut report).await;
        }
        if state.history.due(now) {
            let sampled = self
                .task("history", &mut report, state.store.depth(None))
                .await;
            if !report.failures.iter().any(|(t, _)| *t == "history")
                && state.history.record(now, &sampled, state.metrics.samples())
            {
                state.hub.sampled();
            }
        }
        report
    }

    /// Whether the maintenance tasks are due at `now` (taking the turn if so).
    fn maintenance_due(&self, now: i64) -> bool {
        let mut last = self.maintained.lock().unwrap_or_else(|e| e.into_inner());
        let due = last.is_none_or(|at| (now - at).abs() >= MAINTAIN_EVERY_MS);
        if due {
            *last = Some(now);
        }
        due
    }

    /// The maintenance tasks: signing keys, expired tokens and codes, and the
    /// horizons of the tables that only grow.
    async fn maintain(&self, now: i64, report: &mut TickReport) {
        let state = &self.state;
        self.task(
            "signing_keys",
            report,
            state
                .signing
                .maintain_if_due(state.store.as_ref(), &state.webhooks.key, now),
        )
        .await;
        self.task(
            "access_tokens",
            report,
            state.store.forget_access_tokens(now),
        )
        .await;
        self.task(
            "authorization_codes",
            report,
            state.store.forget_authorization_codes(now),
        )
        .await;
        let h = &state.config.horizons;
        let ms = |d: std::time::Duration| d.as_millis() as i64;
        let refresh = state.config.refresh_lifetimes.absolute_ms;
        for table in Horizon::ALL {
            let keep = match table {
                Horizon::AuditLog => ms(h.audit_log),
                Horizon::LeaseAudit => ms(h.lease_audit),
                Horizon::FencingRejections => ms(h.fencing_rejections),
                Horizon::RevokedTokens | Horizon::IssuedTokens => ms(h.credentials),
                // None can be used once its login's absolute lifetime is over.
                Horizon::RefreshTokens => refresh.max(ms(h.credentials)),
            };
            let trimmed = self
                .task(table.as_str(), report, state.store.trim(table, now - keep))
                .await;
            if trimmed > 0 {
                tracing::info!(table = table.as_str(), rows = trimmed, "horizon trimmed");
                report.trimmed.push((table.as_str(), trimmed));
            }
        }
    }

    /// Beats every second until shutdown, where several instances share the
    /// database: one silent for 10 s is taken for dead, and its in-flight keys and
    /// live jobs are taken over (`store/engine/instances.rs`). Apart from the passes,
    /// so that a long pass never makes a live instance look dead.
    /// One heartbeat at the configured clock's now (the loop below runs it every
    /// second; tests on a manual clock call it after moving the clock).
    pub async fn beat_once(&self) -> StoreResult<()> {
        self.state.store.beat(self.state.now()).await
    }

    pub(crate) async fn beat(self) {
        if self.state.store.instance_name().is_none() {
            return;
        }
        let mut every = tokio::time::interval(BEAT_INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.state.shutdown.cancelled() => break,
                _ = every.tick() => {
                    if let Err(e) = self.beat_once().await {
                        tracing::warn!(error = %e, "heartbeat failed; beating again in a second");
                    }
                }
            }
        }
    }

    /// Runs passes at the configured interval until shutdown. A failed task is logged,
    /// counted and run again at the next interval; it never stops the loop.
    pub(crate) async fn run(self) {
        let mut every = tokio::time::interval(self.state.config.worker_interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.state.shutdown.cancelled() => break,
                _ = every.tick() => {
                    // Each task logs and counts its own failure.
                    self.tick().await;
                }
            }
        }
    }
}
