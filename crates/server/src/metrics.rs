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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DepthLabels {
    agent: String,
    status: String,
}

#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    pub lease_expirations: Counter,
    pub stale_claim_rejections: Counter,
    pub quarantined: Counter,
    pub expired: Counter,
    pub delivered: Counter,
    pub delivery_latency: Histogram,
    inbox_depth: Family<DepthLabels, Gauge>,
    pub sse_subscribers: Gauge,
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
            quarantined: Counter::default(),
            expired: Counter::default(),
            delivered: Counter::default(),
            delivery_latency: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
            inbox_depth: Family::default(),
            sse_subscribers: Gauge::default(),
        };
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
            "inbox_depth",
            "Events per agent and status",
            m.inbox_depth.clone(),
        );
        registry.register(
            "sse_subscribers",
            "Open SSE subscriptions",
            m.sse_subscribers.clone(),
        );
        *m.registry.lock().unwrap_or_else(|e| e.into_inner()) = registry;
        m
    }

    /// Renders the text exposition format with the given depth rows.
    pub fn render(&self, depth: &[DepthRow]) -> String {
        self.inbox_depth.clear();
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
                self.inbox_depth
                    .get_or_create(&DepthLabels {
                        agent: row.agent_name.clone(),
                        status: status.as_str().to_owned(),
                    })
                    .set(n as i64);
            }
        }
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
            out.clear();
        }
        out
    }
}
