//! Prometheus metrics, one registry per server (tests run several in one process).
//! Gauges of the inbox (`inbox_depth`) are read from the store at scrape time, so they
//! are exact rather than tracked.

use crate::store::DepthRow;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};
use switchboard_proto::EventStatus;
use switchboard_proto::QueueTableHealth;

/// The label of `webhook_deliveries`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    outcome: &'static str,
}

/// The label of `rate_limited`: the bucket that ran dry.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    policy: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    /// The agent's tenant: one scrape shows one tenant's agents (the scraping
    /// token's), and the label keeps series of several tenants' scrapes apart.
    tenant: String,
    agent: String,
    status: String,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    pub lease_expirations: Counter,
    pub stale_claim_rejections: Counter,
    pub fencing_rejections: Counter,
    pub idempotency_cache_hits: Counter,
    pub lease_renewal_latency: Histogram,
    pub quarantined: Counter,
    pub expired: Counter,
    pub delivered: Counter,
    pub delivery_latency: Histogram,
    pub sse_subscribers: Gauge,
    /// Webhook delivery attempts by outcome (`delivered`, `failed`, `gone`).
    pub webhook_deliveries: Family<OutcomeLabels, Counter>,
    pub webhook_latency: Histogram,
    /// Requests refused with 429 by policy (`credential`, `tenant`).
    pub rate_limited: Family<PolicyLabels, Counter>,
    /// Events retention wrote to the archive before removing them.
    pub archived: Counter,
    /// 1 while archive writes fail and retention keeps what it would remove.
    pub retention_held_back: Gauge,
    /// The shared database's health; rendered only for a backend that has it.
    db: Arc<Mutex<Registry>>,
    events_dead_tuples: Gauge,
    events_live_tuples: Gauge,
    oldest_transaction: Gauge<f64, std::sync::atomic::AtomicU64>,
    events_vacuum_age: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = Self {
            registry: Arc::new(Mutex::new(Registry::default())),
            lease_expirations: Counter::default(),
            stale_claim_rejections: Counter::default(),
            fencing_rejections: Counter::default(),
            idempotency_cache_hits: Counter::default(),
            lease_renewal_latency: Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            ]),
            quarantined: Counter::default(),
            expired: Counter::default(),
            delivered: Counter::default(),
            delivery_latency: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
            sse_subscribers: Gauge::default(),
            webhook_deliveries: Family::default(),
            webhook_latency: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
            ]),
            rate_limited: Family::default(),
            archived: Counter::default(),
            retention_held_back: Gauge::default(),
            db: Arc::new(Mutex::new(Registry::default())),
            events_dead_tuples: Gauge::default(),
            events_live_tuples: Gauge::default(),
            oldest_transaction: Gauge::default(),
            events_vacuum_age: Gauge::default(),
        };
        let mut db = Registry::default();
        db.register(
            "events_dead_tuples",
            "Dead row versions in the events table (PostgreSQL): what autovacuum has yet to remove",
            m.events_dead_tuples.clone(),
        );
        db.register(
            "events_live_tuples",
            "Live rows in the events table (PostgreSQL statistics)",
            m.events_live_tuples.clone(),
        );
        db.register(
            "oldest_transaction_age_seconds",
            "Age of the oldest open transaction on the database; vacuum cannot clean behind it",
            m.oldest_transaction.clone(),
        );
        db.register(
            "events_vacuum_age_seconds",
            "Seconds since the events table was last vacuumed (NaN: never)",
            m.events_vacuum_age.clone(),
        );
        *m.db.lock().unwrap_or_else(|e| e.into_inner()) = db;
        registry.register(
            "lease_expirations",
            "Claims whose visibility lease expired before ack or release",
            m.lease_expirations.clone(),
        );
        registry.register(
            "stale_claim_rejections",
            "Ack, release or extend refused because the claim token was stale (fencing)",
            m.stale_claim_rejections.clone(),
        );
        registry.register(
            "fencing_rejections",
            "Memory record calls refused because the fencing token was not the current one",
            m.fencing_rejections.clone(),
        );
        registry.register(
            "idempotency_cache_hits",
            "Requests answered with the stored response of an earlier one with the same Idempotency-Key",
            m.idempotency_cache_hits.clone(),
        );
        registry.register(
            "lease_renewal_latency_seconds",
            "Time to renew a name + memory lease, in the server",
            m.lease_renewal_latency.clone(),
        );
        registry.register(
            "events_quarantined",
            "Events moved to the dead-letter quarantine",
            m.quarantined.clone(),
        );
        registry.register(
            "events_expired",
            "Events that expired unclaimed",
            m.expired.clone(),
        );
        registry.register("events_acked", "Events acked", m.delivered.clone());
        registry.register(
            "delivery_latency_seconds",
            "From an event becoming available to its ack",
            m.delivery_latency.clone(),
        );
        registry.register(
            "sse_subscribers",
            "Open SSE subscriptions",
            m.sse_subscribers.clone(),
        );
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by outcome: delivered (2xx), failed (retried), gone (410, disabled)",
            m.webhook_deliveries.clone(),
        );
        registry.register(
            "webhook_delivery_latency_seconds",
            "From sending a webhook delivery to the endpoint's answer",
            m.webhook_latency.clone(),
        );
        registry.register(
            "rate_limited",
            "Requests refused with 429 rate_limited, by the bucket that ran dry (credential, tenant)",
            m.rate_limited.clone(),
        );
        registry.register(
            "events_archived",
            "Events written to the archive (--archive-dir) before retention removed them",
            m.archived.clone(),
        );
        registry.register(
            "retention_held_back",
            "1 while archive writes fail: retention keeps the events it would remove until the archive takes them",
            m.retention_held_back.clone(),
        );
        *m.registry.lock().unwrap_or_else(|e| e.into_inner()) = registry;
        m
    }

    /// Counts one request refused by the `policy` bucket.
    pub fn rate_limited(&self, policy: &'static str) {
        self.rate_limited
            .get_or_create(&PolicyLabels { policy })
            .inc();
    }

    /// Counts one webhook attempt's outcome.
    pub fn webhook_outcome(&self, outcome: &'static str) {
        self.webhook_deliveries
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Renders the text exposition format with the given depth rows and count of
    /// disabled webhook callbacks (the scraping tenant's). Those are built for this
    /// one scrape, so two tenants' scrapes at the same moment never see each other's.
    pub fn render(
        &self,
        depth: &[DepthRow],
        disabled_callbacks: u64,
        health: Option<&QueueTableHealth>,
    ) -> String {
        let inbox_depth = Family::<DepthLabels, Gauge>::default();
        for row in depth {
            let c = &row.counts;
            for (status, n) in [
                (EventStatus::Pending, c.pending),
                (EventStatus::Claimed, c.claimed),
                (EventStatus::Completed, c.completed),
                (EventStatus::Quarantined, c.quarantined),
                (EventStatus::Expired, c.expired),
                (EventStatus::Purged, c.purged),
            ] {
                inbox_depth
                    .get_or_create(&DepthLabels {
                        tenant: row.tenant_id.to_string(),
                        agent: row.agent_name.clone(),
                        status: status.as_str().to_owned(),
                    })
                    .set(n as i64);
            }
        }
        let mut scrape = Registry::default();
        scrape.register("inbox_depth", "Events per agent and status", inbox_depth);
        let disabled = Gauge::<i64>::default();
        disabled.set(i64::try_from(disabled_callbacks).unwrap_or(i64::MAX));
        scrape.register(
            "webhook_callbacks_disabled",
            "Webhook callbacks that are disabled",
            disabled,
        );
        let mut out = String::new();
        {
            let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
            append(&mut out, &registry);
        }
        append(&mut out, &scrape);
        if let Some(h) = health {
            self.events_dead_tuples
                .set(i64::try_from(h.dead_tuples).unwrap_or(i64::MAX));
            self.events_live_tuples
                .set(i64::try_from(h.live_tuples).unwrap_or(i64::MAX));
            self.oldest_transaction
                .set(h.oldest_transaction_age_seconds);
            self.events_vacuum_age
                .set(h.vacuum_age_seconds.unwrap_or(f64::NAN));
            let db = self.db.lock().unwrap_or_else(|e| e.into_inner());
            append(&mut out, &db);
        }
        out
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
}

/// The server counters behind the overview's per-minute tiles.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub lease_expirations: u64,
    pub stale_claim_rejections: u64,
    pub fencing_rejections: u64,
    pub quarantined: u64,
    pub delivered: u64,
}

/// `(upper bound, cumulative count)` of the `*_bucket{le="…"} N` lines of `text`.
fn buckets(text: &str) -> Vec<(f64, u64)> {
    text.lines()
        .filter(|l| l.contains("_bucket{"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let n = l.rsplit(' ').next()?.parse().ok()?;
            Some((le, n))
        })
        .collect()
}

/// The `q` quantile of a cumulative histogram, interpolated linearly inside its
/// bucket; `None` without observations. A quantile in the `+Inf` bucket is reported
/// as the largest finite bound.
pub fn quantile(buckets: &[(f64, u64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut lower = (0.0, 0u64);
    for &(le, n) in buckets {
        if n as f64 >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let inside = (n - lower.1) as f64;
            let frac = if inside > 0.0 {
                (rank - lower.1 as f64) / inside
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * frac);
        }
        lower = (le, n);
    }
    Some(lower.0)
}

/// Encodes `registry` onto `out`, keeping a single `# EOF` at the end: one exposition.
fn append(out: &mut String, registry: &Registry) {
    let mut more = String::new();
    if prometheus_client::encoding::text::encode(&mut more, registry).is_ok() {
        out.truncate(out.trim_end().trim_end_matches("# EOF").len());
        out.push_str(&more);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_fresh_registry_has_empty_buckets_and_zero_counters() {
        let m = Metrics::new();
        let b = m.latency_buckets();
        assert_eq!(b.len(), 15, "14 bounds and +Inf");
        assert!(b.iter().all(|&(_, n)| n == 0));
        assert_eq!(quantile(&b, 0.5), None);
        assert_eq!(m.counters(), Counters::default());
        m.delivery_latency.observe(0.2);
        m.delivered.inc();
        let b = m.latency_buckets();
        assert_eq!(b.iter().find(|(le, _)| *le == 0.25).map(|x| x.1), Some(1));
        assert_eq!(b.iter().find(|(le, _)| *le == 0.1).map(|x| x.1), Some(0));
        assert_eq!(m.counters().delivered, 1);
    }
}
