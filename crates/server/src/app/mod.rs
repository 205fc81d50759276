//! The application's state: what every request handler, background worker and
//! bulk job shares (the store, the wake-up hub, metrics, caches, the shutdown
//! signal). Its own layer, below the HTTP API and the workers: both use it, and it
//! uses neither.

pub mod lookups;
pub(crate) mod running;

use crate::config::Config;
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::store::{Store, Wake};
use std::ops::Deref;
use std::sync::Arc;
use switchboard_proto::TenantId;
use tokio_util::sync::CancellationToken;

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState(Arc<StateInner>);

pub struct StateInner {
    pub store: Arc<dyn Store>,
    pub config: Config,
    pub hub: Hub,
    pub metrics: Metrics,
    /// The tenant of the operator token this server minted at start.
    pub tenant: TenantId,
    /// Cancelled at shutdown: SSE streams end so graceful shutdown can finish.
    pub shutdown: CancellationToken,
    /// The overview's sample history.
    pub history: crate::history::History,
    /// Background tasks (bulk jobs) that shutdown waits for before closing the store.
    pub tasks: tokio_util::task::TaskTracker,
    /// Recent token and agent lookups (see `lookups`).
    pub lookups: lookups::Lookups,
    /// The rate-limit buckets of this instance (`http/rate_limit.rs`).
    pub limiter: crate::http::rate_limit::Limiter,
    /// The idempotency keys this process is running a request for.
    pub(crate) running: running::Running,
    /// Webhook callbacks: the key, the guarded client, the rules.
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    /// Where retention writes what it removes (`--archive-dir`).
    pub archive: Option<crate::archive::ArchiveDir>,
    /// Set while archive writes fail and retention is held back (since when, why).
    pub retention_held: std::sync::Mutex<Option<(i64, String)>>,
}

impl Deref for AppState {
    type Target = StateInner;
    fn deref(&self) -> &StateInner {
        &self.0
    }
}

impl AppState {
    pub fn new(inner: StateInner) -> Self {
        Self(Arc::new(inner))
    }

    pub fn now(&self) -> i64 {
        self.config.clock.now_ms()
    }

    /// Sends wake-ups; call after the commit that made them.
    pub fn wake(&self, wakes: &[Wake]) {
        self.hub.notify(wakes);
    }

    /// After a retention pass: counts what it archived, and holds the reason while
    /// archive writes fail (in `/metrics`, the overview and the log, once per hold).
    pub(crate) fn retention_pass(&self, stats: &crate::store::RetentionStats, now: i64) {
        self.metrics.archived.inc_by(stats.archived);
        let mut held = self
            .retention_held
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *held = match (&stats.held_back, held.take()) {
            (Some(why), None) => {
                tracing::error!(
                    error = %why,
                    "retention held back: {}",
                    crate::archive::HELD_BACK_FIX
                );
                Some((now, why.clone()))
            }
            (Some(why), Some((since, _))) => Some((since, why.clone())),
            (None, Some(_)) => {
                tracing::info!("retention resumed: the archive takes writes again");
                None
            }
            (None, None) => None,
        };
        self.metrics
            .retention_held_back
            .set(i64::from(held.is_some()));
    }

    /// After expired leases went back (by the scavenger, or by a claim first): counts
    /// them and their quarantines, and sends their wake-ups.
    pub fn reaped(&self, reaped: &crate::store::ReapStats) {
        self.metrics
            .lease_expirations
            .inc_by(reaped.lease_expirations);
        self.metrics.quarantined.inc_by(reaped.quarantined);
        self.wake(&reaped.wakes);
    }

    /// Counts an ack that completed an event (not a repeat) in the metrics.
    pub fn acked(&self, acked: &crate::store::Acked) {
        if let Some(ms) = acked.latency_ms {
            self.metrics.delivered.inc();
            self.metrics
                .delivery_latency
                .observe(ms.max(0) as f64 / 1000.0);
        }
    }

    /// After a release committed: counts a quarantine and sends its wake-ups.
    pub fn released(&self, done: &crate::store::Committed<switchboard_proto::EventState>) {
        if done.value.status == switchboard_proto::EventStatus::Quarantined {
            self.metrics.quarantined.inc();
        }
        self.wake(&done.wakes);
    }

    /// The queue table's health where the backend has it. Best effort: `/metrics`
    /// and the overview still answer without it.
    pub(crate) async fn queue_health(&self) -> Option<switchboard_proto::QueueTableHealth> {
        self.store.health().await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read the database's health");
            None
        })
    }

    /// Tells the console how a bulk job is doing.
    pub fn publish_job(&self, tenant: TenantId, job: &switchboard_proto::Job) {
        self.hub.job(tenant, job);
    }
}
