//! The application's state: what every request handler, background worker and
//! bulk job shares (the store, the wake-up hub, metrics, caches, the shutdown
//! signal). Its own layer, below the HTTP API and the workers: both use it, and it
//! uses neither.

pub mod callbacks;
pub mod clients;
pub mod credentials;
pub mod deliveries;
pub mod devices;
pub mod idempotency;
pub mod inbox;
pub mod jobs;
pub mod keys;
pub mod leases;
pub mod lookups;
pub mod memories;
pub mod messages;
pub mod ops;
pub(crate) mod running;
pub mod signin;
pub mod system;
pub mod tenants;

use crate::config::Config;
use crate::error::ApiResult;
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::store::Store;
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
    /// The keys that sign access tokens (`oauth/keys.rs`).
    pub signing: crate::oauth::keys::SigningKeys,
    /// The rate-limit buckets of this instance (`http/rate_limit.rs`).
    pub limiter: crate::access::rate_limit::Limiter,
    /// Signed requests' nonces seen (`access/replays.rs`).
    pub replays: crate::access::replays::Replays,
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

    /// Console sessions and login tickets, now.
    pub fn sessions(&self) -> crate::access::sessions::Sessions<'_> {
        crate::access::sessions::Sessions::new(self.store.as_ref(), self.now())
    }

    /// The store's backend: `sqlite`, `postgres` or `mysql`.
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// After a retention pass: counts what it archived, and holds the reason while
    /// archive writes fail (in `/metrics`, the overview and the log, once per hold).
    pub(crate) fn retention_pass(&self, stats: &crate::store::RetentionStats, now: i64) {
        for (tenant, n) in &stats.archived_by_tenant {
            self.metrics.tenant(*tenant).archived.inc_by(*n);
        }
        let mut held = self
            .retention_held
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let was_held = held.is_some();
        *held = hold_after(held.take(), stats.held_back.as_ref(), now);
        match (&*held, was_held) {
            (Some((_, why)), false) => tracing::error!(
                error = %why,
                "retention held back: {}",
                crate::archive::HELD_BACK_FIX
            ),
            (None, true) => tracing::info!("retention resumed: the archive takes writes again"),
            _ => {}
        }
        self.metrics.retention_held_back(held.is_some());
    }

    /// After expired leases went back and events expired (by the scavenger, or by a
    /// claim first): counts them and their quarantines in each tenant's metrics. (Their
    /// wake-ups went out with the commit: the store hands them to the hub.)
    pub fn reaped(&self, reaped: &crate::store::ReapStats) {
        for (tenant, r) in &reaped.by_tenant {
            let m = self.metrics.tenant(*tenant);
            m.lease_expirations.inc_by(r.lease_expirations);
            m.lease_returns
                .inc_by(r.lease_expirations.saturating_sub(r.quarantined));
            m.quarantined.inc_by(r.quarantined);
            m.expired.inc_by(r.expired);
        }
    }

    /// Counts an ack of `tenant` that completed an event (not a repeat).
    pub fn acked(&self, tenant: TenantId, acked: &crate::store::Acked) {
        if let Some(ms) = acked.latency_ms {
            let m = self.metrics.tenant(tenant);
            m.delivered.inc();
            m.delivery_latency.observe(ms.max(0) as f64 / 1000.0);
        }
    }

    /// After a release of `tenant` committed: counts a quarantine.
    pub fn released(
        &self,
        tenant: TenantId,
        done: &crate::store::Committed<switchboard_proto::EventState>,
    ) {
        if done.value.status == switchboard_proto::EventStatus::Quarantined {
            self.metrics.tenant(tenant).quarantined.inc();
        }
    }

    /// The queue table's health where the backend has it. Best effort: `/metrics`
    /// and the overview still answer without it.
    pub(crate) async fn queue_health(&self) -> Option<switchboard_proto::QueueTableHealth> {
        self.store.health().await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not read the database's health");
            None
        })
    }

    /// Transactions the store ran again after a transient error, by backend and code.
    pub(crate) fn transaction_retries(&self) -> Vec<crate::store::RetryCount> {
        self.store.transaction_retries()
    }

    /// Tells the console how a bulk job is doing.
    pub fn publish_job(&self, tenant: TenantId, job: &switchboard_proto::Job) {
        self.hub.job(tenant, job);
    }
}

/// A store answer whose `NotFound` names `what` (a 404 that says what was not
/// there); other errors as they are.
pub(crate) fn or_not_found<T>(
    found: crate::store::StoreResult<T>,
    what: impl std::fmt::Display,
) -> ApiResult<T> {
    found.map_err(|e| match e {
        crate::store::StoreError::NotFound => crate::error::ApiError::not_found(what),
        e => e.into(),
    })
}

/// The retention hold after a pass at `now` that was (`held_back`) or was not held
/// back: `(since, why)`. A pass that began before the hold (its `now` is older) cannot
/// speak for the events that were due later: it does not lift it. Passes overlap (the
/// background loop and a manual tick, or a slow pass and the next), and the one that
/// finishes last is not always the newest.
fn hold_after(
    previous: Option<(i64, String)>,
    held_back: Option<&String>,
    now: i64,
) -> Option<(i64, String)> {
    match (held_back, previous) {
        (Some(why), None) => Some((now, why.clone())),
        (Some(why), Some((since, _))) => Some((since, why.clone())),
        (None, Some((since, why))) if now < since => Some((since, why)),
        (None, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::hold_after;

    #[test]
    fn a_pass_older_than_the_hold_does_not_lift_it() {
        let full = "the disk is full".to_owned();
        let held = hold_after(None, Some(&full), 20);
        assert_eq!(held, Some((20, full.clone())));
        // A pass that began at 10 and finished after the one at 20 failed.
        assert_eq!(hold_after(held.clone(), None, 10), held);
        // Still failing later: the hold keeps its start.
        assert_eq!(hold_after(held.clone(), Some(&full), 30), Some((20, full)));
        // A pass at or after the hold that archived lifts it.
        assert_eq!(hold_after(held.clone(), None, 20), None);
        assert_eq!(hold_after(held, None, 25), None);
    }
}
