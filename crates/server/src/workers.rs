//! Background workers: the scavenger (expired leases back to pending, or to the
//! quarantine at the attempt limit, I5), expiry of events past `expires_at`, and
//! retention (terminal events removed, low-water marks advanced, I6; old idempotency
//! records dropped), and on a shared database the rescue of bulk jobs whose instance
//! died. Every pass reads time from the configured clock, so tests drive
//! it with a manual clock and [`Workers::tick`].

use crate::app::AppState;
use crate::store::{ReapStats, RetentionStats, StoreResult};

/// How often an instance of a shared database beats.
const BEAT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct Workers {
    state: AppState,
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub reap: ReapStats,
    pub retention: RetentionStats,
    /// Bulk jobs whose instance stopped beating, marked interrupted (PostgreSQL).
    pub jobs_interrupted: u64,
}

impl Workers {
    pub(crate) fn new(state: AppState) -> Self {
        Self { state }
    }

    /// One pass of every worker.
    pub async fn tick(&self) -> StoreResult<TickReport> {
        let now = self.state.now();
        let reap = self.state.store.reap(now).await?;
        self.state.reaped(&reap);
        self.state.metrics.expired.inc_by(reap.expired);
        if reap.lease_expirations + reap.expired > 0 {
            tracing::info!(
                lease_expirations = reap.lease_expirations,
                quarantined = reap.quarantined,
                expired = reap.expired,
                "scavenger pass"
            );
        }
        let cutoff = now - self.state.config.retention.as_millis() as i64;
        let archive = self
            .state
            .archive
            .as_ref()
            .map(|a| a as &dyn crate::store::ArchiveSink);
        let retention = self.state.store.retain(cutoff, now, archive).await?;
        if retention.events_removed > 0 {
            tracing::info!(
                events_removed = retention.events_removed,
                archived = retention.archived,
                "retention pass"
            );
        }
        self.state.retention_pass(&retention, now);
        // Webhook attempts are kept as long as terminal events.
        self.state.store.trim_callback_attempts(cutoff).await?;
        let orphaned = self.state.store.jobs_orphaned(now).await?;
        for (tenant, job) in &orphaned {
            tracing::warn!(
                job_id = job.job_id,
                done = job.done,
                "a bulk job's instance stopped without ending it; marked interrupted"
            );
            self.state.publish_job(*tenant, job);
        }
        if self
            .state
            .signing
            .maintain_if_due(self.state.store.as_ref(), &self.state.webhooks.key, now)
            .await?
        {
            self.state.store.forget_access_tokens(now).await?;
            self.state.store.forget_authorization_codes(now).await?;
        }
        if self.state.history.due(now) {
            let depth = self.state.store.depth(None).await?;
            let m = &self.state.metrics;
            if self
                .state
                .history
                .record(now, &depth, m.counters(), m.latency_buckets())
            {
                self.state.hub.sampled();
            }
        }
        Ok(TickReport {
            reap,
            retention,
            jobs_interrupted: orphaned.len() as u64,
        })
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

    /// Runs passes at the configured interval until shutdown. A failed pass is logged
    /// and retried at the next interval; it never stops the loop.
    pub(crate) async fn run(self) {
        let mut every = tokio::time::interval(self.state.config.worker_interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = self.state.shutdown.cancelled() => break,
                _ = every.tick() => {
                    if let Err(e) = self.tick().await {
                        tracing::warn!(error = %e, "background pass failed; retrying at the next interval");
                    }
                }
            }
        }
    }
}
