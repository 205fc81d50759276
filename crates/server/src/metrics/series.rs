//! The series a scrape renders: histogram buckets, the per-tenant counters and
//! histograms by name, the label sets, and the inbox depth read at scrape time.

use super::{Scope, Scrape, TenantMetrics};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use switchboard_proto::EventStatus;

pub(super) const RENEWAL_BUCKETS: [f64; 11] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];
pub(super) const DELIVERY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];
pub(super) const WEBHOOK_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
];

/// The per-tenant counters: name (without `_total`), help, which.
pub(super) type CounterOf = fn(&TenantMetrics) -> &Counter;
pub(super) const COUNTERS: &[(&str, &str, CounterOf)] = &[
    (
        "lease_expirations",
        "Claims whose visibility lease expired before ack or release",
        |t| &t.lease_expirations,
    ),
    (
        "lease_returns",
        "Claims whose visibility lease expired and that went back to pending (the \
         notifications seed's lease expirations; a last attempt goes to the quarantine)",
        |t| &t.lease_returns,
    ),
    (
        "stale_claim_rejections",
        "Ack, release or extend refused because the claim token was stale (fencing)",
        |t| &t.stale_claim_rejections,
    ),
    (
        "fencing_rejections",
        "Memory record calls refused because the fencing token was not the current one",
        |t| &t.fencing_rejections,
    ),
    (
        "idempotency_cache_hits",
        "Requests answered with the stored response of an earlier one with the same Idempotency-Key",
        |t| &t.idempotency_cache_hits,
    ),
    (
        "idempotent_requests",
        "Requests with a valid Idempotency-Key, replays and refusals included: the whole that idempotency_cache_hits is a share of",
        |t| &t.idempotent_requests,
    ),
    (
        "events_quarantined",
        "Events moved to the dead-letter quarantine",
        |t| &t.quarantined,
    ),
    ("events_expired", "Events that expired unclaimed", |t| {
        &t.expired
    }),
    ("events_acked", "Events acked", |t| &t.delivered),
    (
        "events_archived",
        "Events written to the archive (--archive-dir) before retention removed them",
        |t| &t.archived,
    ),
];

/// The per-tenant histograms: name, help, which.
pub(super) type HistogramOf = fn(&TenantMetrics) -> &Histogram;
pub(super) const HISTOGRAMS: &[(&str, &str, HistogramOf)] = &[
    (
        "lease_renewal_latency_seconds",
        "Time to renew a name + memory lease, in the server",
        |t| &t.lease_renewal_latency,
    ),
    (
        "delivery_latency_seconds",
        "From an event becoming available to its ack",
        |t| &t.delivery_latency,
    ),
    (
        "webhook_delivery_latency_seconds",
        "From sending a webhook delivery to the endpoint's answer",
        |t| &t.webhook_latency,
    ),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TenantLabels {
    pub(super) tenant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) tenant: String,
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct PolicyLabels {
    pub(super) tenant: String,
    pub(super) policy: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct DepthLabels {
    pub(super) tenant: String,
    pub(super) agent: String,
    pub(super) status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RetryLabels {
    pub(super) backend: &'static str,
    pub(super) code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TaskLabels {
    pub(super) task: &'static str,
}

/// The series of one metric family built for one scrape: shared handles of the
/// metrics in scope, each with its labels. (A `Family` cannot be filtered, and
/// would make a metric of its own for each label set.)
#[derive(Debug)]
pub(super) struct Series<L, M>(pub(super) Vec<(L, M)>);

impl<L: EncodeLabelSet, M: EncodeMetric + TypedMetric> EncodeMetric for Series<L, M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, metric) in &self.0 {
            metric.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

/// Shared by every handler, worker and the console.
/// `inbox_depth` of the scrape's rows.
pub(super) fn depth(scrape: &Scrape<'_>) -> Series<DepthLabels, Gauge> {
    let mut series = Vec::new();
    for row in scrape.depth {
        if let Scope::Tenant(t) = scrape.scope
            && row.tenant_id != t
        {
            continue;
        }
        let c = &row.counts;
        for (status, n) in [
            (EventStatus::Pending, c.pending),
            (EventStatus::Claimed, c.claimed),
            (EventStatus::Completed, c.completed),
            (EventStatus::Quarantined, c.quarantined),
            (EventStatus::Expired, c.expired),
            (EventStatus::Purged, c.purged),
        ] {
            let g = Gauge::default();
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
            let labels = DepthLabels {
                tenant: row.tenant_id.to_string(),
                agent: row.agent_name.clone(),
                status: status.as_str().to_owned(),
            };
            series.push((labels, g));
        }
    }
    Series(series)
}
