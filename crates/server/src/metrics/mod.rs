//! Prometheus metrics, one set per server (tests run several in one process).
//!
//! **Per tenant (I9).** Everything an agent or operator of a tenant causes is counted
//! in that tenant's own [`TenantMetrics`] (`Metrics::tenant`): acks, latencies, lease
//! expiries, quarantines, stale claims, fencing rejections, webhook outcomes, rate
//! limits, SSE subscribers. A tenant's scrape ([`Scope::Tenant`]) renders only its
//! own series, each labelled `tenant`; the deployment admin's scrape ([`Scope::All`])
//! renders every tenant's, and adds the process's own series, which belong to no
//! tenant: the database's health, transaction retries, background task failures,
//! requests refused before any credential was known, retention held back. The
//! overview and the sample history read the same per-tenant numbers
//! ([`TenantMetrics::counters`], [`TenantMetrics::latency_buckets`]), so no operator
//! ever sees another tenant's activity in a number.
//!
//! Gauges of the inbox (`inbox_depth`) are read from the store at scrape time, so they
//! are exact rather than tracked.

use crate::store::DepthRow;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::HashMap;

mod samples;
mod series;
use samples::buckets;
pub use samples::{Counters, TenantSample, quantile};
use series::*;
use std::sync::{Arc, RwLock};
use switchboard_proto::{QueueTableHealth, TenantId};

/// Whose series a scrape shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One tenant's: what its `metrics:read` tokens see.
    Tenant(TenantId),
    /// Every tenant's and the process's: the deployment admin's scrape.
    All,
}

/// What a scrape adds to the counters, read for it alone.
pub struct Scrape<'a> {
    pub scope: Scope,
    /// Inbox depth rows of the tenants in scope.
    pub depth: &'a [DepthRow],
    /// Disabled webhook callbacks per tenant in scope.
    pub disabled_callbacks: &'a [(TenantId, u64)],
    /// The shared database's health ([`Scope::All`] only).
    pub health: Option<&'a QueueTableHealth>,
    /// Transactions run again after a transient failure, by backend and code
    /// ([`Scope::All`] only).
    pub retries: &'a [crate::store::RetryCount],
}

/// A webhook attempt's outcome, the label of `webhook_deliveries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx.
    Delivered,
    /// Anything else but 410: retried.
    Failed,
    /// 410: the callback is disabled.
    Gone,
}

impl Outcome {
    const ALL: [Self; 3] = [Self::Delivered, Self::Failed, Self::Gone];
    fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::Gone => "gone",
        }
    }
}

/// The bucket a rate-limited request ran dry in, the label of `rate_limited`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// One credential's (or subject's) bucket.
    Credential,
    /// The tenant's shared bucket.
    Tenant,
}

impl Policy {
    const ALL: [Self; 2] = [Self::Credential, Self::Tenant];
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Credential => "credential",
            Self::Tenant => "tenant",
        }
    }
}

/// One tenant's counters, histograms and gauges. Cheap to clone handles of; every
/// increment is an atomic add.
#[derive(Debug)]
pub struct TenantMetrics {
    pub lease_expirations: Counter,
    /// The lease expirations that went back to pending (not to the quarantine).
    pub lease_returns: Counter,
    pub stale_claim_rejections: Counter,
    pub fencing_rejections: Counter,
    pub idempotency_cache_hits: Counter,
    /// Requests that reached the idempotency check (`app::once`) with a valid key.
    pub idempotent_requests: Counter,
    pub lease_renewal_latency: Histogram,
    pub quarantined: Counter,
    pub expired: Counter,
    pub delivered: Counter,
    pub delivery_latency: Histogram,
    pub sse_subscribers: Gauge,
    /// Webhook delivery attempts, by [`Outcome`] (in its order).
    webhook_deliveries: [Counter; 3],
    pub webhook_latency: Histogram,
    /// Requests refused with 429, by [`Policy`] (in its order).
    rate_limited: [Counter; 2],
    /// Events retention wrote to the archive before removing them.
    pub archived: Counter,
}

impl TenantMetrics {
    fn new() -> Self {
        Self {
            lease_expirations: Counter::default(),
            lease_returns: Counter::default(),
            stale_claim_rejections: Counter::default(),
            fencing_rejections: Counter::default(),
            idempotency_cache_hits: Counter::default(),
            idempotent_requests: Counter::default(),
            lease_renewal_latency: Histogram::new(RENEWAL_BUCKETS),
            quarantined: Counter::default(),
            expired: Counter::default(),
            delivered: Counter::default(),
            delivery_latency: Histogram::new(DELIVERY_BUCKETS),
            sse_subscribers: Gauge::default(),
            webhook_deliveries: Default::default(),
            webhook_latency: Histogram::new(WEBHOOK_BUCKETS),
            rate_limited: Default::default(),
            archived: Counter::default(),
        }
    }

    /// Counts one webhook attempt's outcome.
    pub fn webhook_outcome(&self, outcome: Outcome) {
        self.webhook_deliveries[outcome as usize].inc();
    }

    /// Counts one request refused by the `policy` bucket.
    pub fn rate_limited(&self, policy: Policy) {
        self.rate_limited[policy as usize].inc();
    }

    /// The counters the overview shows, now.
    pub fn counters(&self) -> Counters {
        Counters {
            lease_expirations: self.lease_expirations.get(),
            stale_claim_rejections: self.stale_claim_rejections.get(),
            fencing_rejections: self.fencing_rejections.get(),
            quarantined: self.quarantined.get(),
            delivered: self.delivered.get(),
        }
    }

    /// `(upper bound, cumulative count)` of the delivery latency histogram.
    pub fn latency_buckets(&self) -> Vec<(f64, u64)> {
        // Only the histogram's buckets are not readable directly: encode it alone.
        let mut registry = Registry::default();
        registry.register("latency", "", self.delivery_latency.clone());
        let mut text = String::new();
        match prometheus_client::encoding::text::encode(&mut text, &registry) {
            Ok(()) => buckets(&text),
            Err(_) => Vec::new(),
        }
    }
}

#[derive(Clone, Default)]
pub struct Metrics(Arc<Inner>);

#[derive(Default)]
struct Inner {
    tenants: RwLock<HashMap<TenantId, Arc<TenantMetrics>>>,
    process: Process,
}

/// The process's own series: they belong to no tenant, so only the deployment
/// admin's scrape shows them.
#[derive(Default)]
struct Process {
    /// Requests refused by a bucket drawn before their tenant was known.
    rate_limited_unattributed: Counter,
    /// 1 while archive writes fail and retention keeps what it would remove.
    retention_held_back: Gauge,
    /// Background tasks that failed, by task (each is retried at the next pass).
    task_failures: Family<TaskLabels, Counter>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// `tenant`'s metrics, made on first use.
    pub fn tenant(&self, tenant: TenantId) -> Arc<TenantMetrics> {
        if let Some(t) = self
            .0
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tenant)
        {
            return t.clone();
        }
        self.0
            .tenants
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(tenant)
            .or_insert_with(|| Arc::new(TenantMetrics::new()))
            .clone()
    }

    /// Every tenant's metrics (sorted by tenant, so scrapes are stable).
    fn all(&self) -> Vec<(TenantId, Arc<TenantMetrics>)> {
        let mut all: Vec<_> = self
            .0
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, m)| (*id, m.clone()))
            .collect();
        all.sort_by_key(|(id, _)| *id);
        all
    }

    /// Counts a request refused by a bucket drawn before its tenant was known.
    pub fn rate_limited_unattributed(&self) {
        self.0.process.rate_limited_unattributed.inc();
    }

    /// Sets whether retention is held back by its archive.
    pub fn retention_held_back(&self, held: bool) {
        self.0.process.retention_held_back.set(i64::from(held));
    }

    /// Counts a failed background task.
    pub fn task_failed(&self, task: &'static str) {
        self.0
            .process
            .task_failures
            .get_or_create(&TaskLabels { task })
            .inc();
    }

    /// How often the background task `task` failed.
    pub fn task_failures(&self, task: &'static str) -> u64 {
        self.0
            .process
            .task_failures
            .get_or_create(&TaskLabels { task })
            .get()
    }

    /// Every tenant's counters and delivery-latency buckets (the sample history).
    pub fn samples(&self) -> Vec<TenantSample> {
        self.all()
            .into_iter()
            .map(|(tenant, m)| TenantSample {
                tenant,
                counters: m.counters(),
                latency: m.latency_buckets(),
            })
            .collect()
    }

    /// Events archived by every tenant's retention.
    pub fn archived_total(&self) -> u64 {
        self.all().iter().map(|(_, m)| m.archived.get()).sum()
    }

    /// Renders the text exposition of `scrape.scope`.
    pub fn render(&self, scrape: &Scrape<'_>) -> String {
        let tenants = match scrape.scope {
            Scope::Tenant(id) => vec![(id, self.tenant(id))],
            Scope::All => {
                // Every tenant the scrape names has its series, at zero until used.
                for id in scrape.disabled_callbacks.iter().map(|(id, _)| id) {
                    self.tenant(*id);
                }
                for row in scrape.depth {
                    self.tenant(row.tenant_id);
                }
                self.all()
            }
        };
        let label = |id: &TenantId| TenantLabels {
            tenant: id.to_string(),
        };
        let mut registry = Registry::default();
        for (name, help, of) in COUNTERS {
            let series = tenants
                .iter()
                .map(|(id, m)| (label(id), of(m).clone()))
                .collect();
            registry.register(*name, *help, Series(series));
        }
        for (name, help, of) in HISTOGRAMS {
            let series = tenants
                .iter()
                .map(|(id, m)| (label(id), of(m).clone()))
                .collect();
            registry.register(*name, *help, Series(series));
        }
        let series = tenants
            .iter()
            .map(|(id, m)| (label(id), m.sse_subscribers.clone()))
            .collect();
        registry.register("sse_subscribers", "Open SSE subscriptions", Series(series));
        let mut outcomes = Vec::new();
        let mut policies = Vec::new();
        for (id, m) in &tenants {
            for o in Outcome::ALL {
                let labels = OutcomeLabels {
                    tenant: id.to_string(),
                    outcome: o.as_str(),
                };
                outcomes.push((labels, m.webhook_deliveries[o as usize].clone()));
            }
            for p in Policy::ALL {
                let labels = PolicyLabels {
                    tenant: id.to_string(),
                    policy: p.as_str(),
                };
                policies.push((labels, m.rate_limited[p as usize].clone()));
            }
        }
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered (2xx), failed (retried), gone (410, disabled)",
            Series(outcomes),
        );
        registry.register(
            "rate_limited",
            "Requests refused with 429 rate_limited, by the bucket that ran dry (credential, tenant)",
            Series(policies),
        );
        registry.register("inbox_depth", "Events per agent and status", depth(scrape));
        let disabled = scrape
            .disabled_callbacks
            .iter()
            .map(|(id, n)| {
                let g = Gauge::<i64>::default();
                g.set(i64::try_from(*n).unwrap_or(i64::MAX));
                (label(id), g)
            })
            .collect();
        registry.register(
            "webhook_callbacks_disabled",
            "Webhook callbacks that are disabled",
            Series(disabled),
        );
        if scrape.scope == Scope::All {
            self.process(&mut registry, scrape);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }

    /// The admin's series: the process's and the database's.
    fn process(&self, registry: &mut Registry, scrape: &Scrape<'_>) {
        let p = &self.0.process;
        registry.register(
            "rate_limited_unattributed",
            "Requests refused with 429 by a bucket drawn before their tenant was known (a source address's, an unknown token's)",
            p.rate_limited_unattributed.clone(),
        );
        registry.register(
            "retention_held_back",
            "1 while archive writes fail: retention keeps the events it would remove until the archive takes them",
            p.retention_held_back.clone(),
        );
        registry.register(
            "background_task_failures",
            "Background tasks that failed, by task; each is retried at the next pass",
            p.task_failures.clone(),
        );
        let retries = scrape
            .retries
            .iter()
            .map(|r| {
                let c = Counter::<u64>::default();
                c.inc_by(r.count);
                let labels = RetryLabels {
                    backend: r.backend,
                    code: r.code,
                };
                (labels, c)
            })
            .collect();
        registry.register(
            "transaction_retries",
            "Transactions run again after a serialization failure, deadlock or lock wait timeout, by backend and SQLSTATE / error number",
            Series(retries),
        );
        if let Some(h) = scrape.health {
            let gauge = |v: u64| {
                let g = Gauge::<i64>::default();
                g.set(i64::try_from(v).unwrap_or(i64::MAX));
                g
            };
            let float = |v: f64| {
                let g = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
                g.set(v);
                g
            };
            registry.register(
                "events_dead_tuples",
                "Dead row versions in the events table (PostgreSQL): what autovacuum has yet to remove",
                gauge(h.dead_tuples),
            );
            registry.register(
                "events_live_tuples",
                "Live rows in the events table (PostgreSQL statistics)",
                gauge(h.live_tuples),
            );
            registry.register(
                "oldest_transaction_age_seconds",
                "Age of the oldest open transaction on the database; vacuum cannot clean behind it",
                float(h.oldest_transaction_age_seconds),
            );
            registry.register(
                "events_vacuum_age_seconds",
                "Seconds since the events table was last vacuumed (NaN: never)",
                float(h.vacuum_age_seconds.unwrap_or(f64::NAN)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(n: u8) -> TenantId {
        format!("0192f0c4-0000-7000-8000-00000000000{n}")
            .parse()
            .unwrap()
    }

    fn scrape(scope: Scope) -> Scrape<'static> {
        Scrape {
            scope,
            depth: &[],
            disabled_callbacks: &[],
            health: None,
            retries: &[],
        }
    }

    #[test]
    fn buckets_are_read_from_the_text_format() {
        let text = "# TYPE latency histogram\nlatency_sum 1.5\nlatency_count 3\n\
                    latency_bucket{le=\"0.1\"} 1\nlatency_bucket{le=\"1.0\"} 3\n\
                    latency_bucket{le=\"+Inf\"} 3\n";
        assert_eq!(buckets(text), vec![(0.1, 1), (1.0, 3), (f64::INFINITY, 3)]);
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let b = [(0.1, 1), (1.0, 3), (f64::INFINITY, 3)];
        let p50 = quantile(&b, 0.5).unwrap();
        assert!((p50 - 0.325).abs() < 1e-9, "{p50}");
        let p99 = quantile(&b, 0.99).unwrap();
        assert!((p99 - 0.9865).abs() < 1e-9, "{p99}");
        assert_eq!(quantile(&[(1.0, 0), (f64::INFINITY, 0)], 0.5), None);
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(
            quantile(&[(1.0, 0), (f64::INFINITY, 4)], 0.5),
            Some(1.0),
            "beyond the last bound: the last finite bound"
        );
    }

    #[test]
    fn a_fresh_tenant_has_empty_buckets_and_zero_counters() {
        let m = Metrics::new();
        let t = m.tenant(tenant(1));
        let b = t.latency_buckets();
        assert_eq!(b.len(), 15, "14 bounds and +Inf");
        assert!(b.iter().all(|&(_, n)| n == 0));
        assert_eq!(quantile(&b, 0.5), None);
        assert_eq!(t.counters(), Counters::default());
        t.delivery_latency.observe(0.2);
        t.delivered.inc();
        let b = m.tenant(tenant(1)).latency_buckets();
        assert_eq!(b.iter().find(|(le, _)| *le == 0.25).map(|x| x.1), Some(1));
        assert_eq!(b.iter().find(|(le, _)| *le == 0.1).map(|x| x.1), Some(0));
        assert_eq!(m.tenant(tenant(1)).counters().delivered, 1);
        assert_eq!(
            m.tenant(tenant(2)).counters(),
            Counters::default(),
            "another tenant's counters are its own"
        );
    }

    #[test]
    fn a_tenant_scrape_shows_its_own_series_and_the_admin_every_tenants() {
        let m = Metrics::new();
        m.tenant(tenant(1)).delivered.inc_by(3);
        m.tenant(tenant(2)).delivered.inc_by(5);
        m.tenant(tenant(2)).webhook_outcome(Outcome::Gone);
        m.task_failed("retention");
        let one = m.render(&scrape(Scope::Tenant(tenant(1))));
        let t1 = tenant(1).to_string();
        let t2 = tenant(2).to_string();
        assert!(
            one.contains(&format!("events_acked_total{{tenant=\"{t1}\"}} 3")),
            "{one}"
        );
        assert!(!one.contains(&t2), "no series of the other tenant: {one}");
        assert!(
            !one.contains("background_task_failures"),
            "the process's series are the admin's: {one}"
        );
        assert_eq!(one.matches("# EOF").count(), 1);
        let all = m.render(&scrape(Scope::All));
        assert!(all.contains(&format!("events_acked_total{{tenant=\"{t1}\"}} 3")));
        assert!(all.contains(&format!("events_acked_total{{tenant=\"{t2}\"}} 5")));
        assert!(all.contains(&format!(
            "webhook_deliveries_total{{tenant=\"{t2}\",outcome=\"gone\"}} 1"
        )));
        assert!(all.contains("background_task_failures_total{task=\"retention\"} 1"));
        assert_eq!(
            all.matches("# TYPE events_acked counter").count(),
            1,
            "one family however many tenants: {all}"
        );
    }
}
