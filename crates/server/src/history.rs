//! The overview's sample history: every `sample_interval` the workers record the
//! inbox depth of each tenant and the server's counters, and keep the last
//! `history_samples` of them in memory (an hour at the defaults). The console's charts
//! draw them, and the overview's per-minute rates are differences between the
//! counters now and a sample about a minute old.
//!
//! In memory, not in a table: the history is a view of this process (its counters
//! start at zero with it), cheap to lose at restart, and never written on the hot path.

use crate::clock::{Millis, to_timestamp};
use crate::metrics::{Counters, TenantSample};
use crate::store::DepthRow;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;
use switchboard_proto::{LatencyBucket, OpsHistory, OpsRates, OpsSample, TenantId};

/// Depth of one tenant's inboxes: pending, claimed, quarantined.
type Depth = (u64, u64, u64);

/// One tenant's numbers in a sample: each operator sees only its own tenant's (I9).
#[derive(Debug, Clone, Default)]
struct Sampled {
    depth: Depth,
    counters: Counters,
    /// Cumulative delivery-latency buckets `(upper bound, count)`.
    latency: Vec<(f64, u64)>,
}

struct Tick {
    at: Millis,
    tenants: HashMap<TenantId, Sampled>,
}

impl Tick {
    fn of(&self, tenant: TenantId) -> Sampled {
        self.tenants.get(&tenant).cloned().unwrap_or_default()
    }
}

pub struct History {
    ticks: Mutex<VecDeque<Tick>>,
    interval: Duration,
    capacity: usize,
}

const MINUTE_MS: Millis = 60_000;

impl History {
    pub fn new(interval: Duration, capacity: usize) -> Self {
        Self {
            ticks: Mutex::new(VecDeque::with_capacity(capacity.min(4096))),
            interval,
            capacity: capacity.max(2),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Tick>> {
        self.ticks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when the newest sample is `interval` old (or there is none).
    pub fn due(&self, now: Millis) -> bool {
        self.lock()
            .back()
            .is_none_or(|t| now - t.at >= self.interval.as_millis() as Millis)
    }

    /// Adds a sample of every tenant's depth and counters, dropping the oldest beyond
    /// the capacity, unless one was taken less than `interval` ago (two worker passes
    /// may race to it: the check is made again under the lock). Returns whether it
    /// added one.
    pub fn record(&self, now: Millis, depth: &[DepthRow], metrics: Vec<TenantSample>) -> bool {
        let mut tenants: HashMap<TenantId, Sampled> = HashMap::new();
        for row in depth {
            let d = &mut tenants.entry(row.tenant_id).or_default().depth;
            d.0 += row.counts.pending;
            d.1 += row.counts.claimed;
            d.2 += row.counts.quarantined;
        }
        for m in metrics {
            let t = tenants.entry(m.tenant).or_default();
            t.counters = m.counters;
            t.latency = m.latency;
        }
        let mut ticks = self.lock();
        let interval = self.interval.as_millis() as Millis;
        if ticks.back().is_some_and(|t| now - t.at < interval) {
            return false;
        }
        while ticks.len() >= self.capacity {
            ticks.pop_front();
        }
        ticks.push_back(Tick { at: now, tenants });
        true
    }

    /// The samples of `tenant`, oldest first, and the latency distribution of its
    /// acks made in their window.
    pub fn samples(&self, tenant: TenantId) -> OpsHistory {
        let ticks = self.lock();
        let samples = ticks
            .iter()
            .map(|t| {
                let s = t.of(tenant);
                let (pending, claimed, quarantined) = s.depth;
                OpsSample {
                    at: to_timestamp(t.at),
                    pending,
                    claimed,
                    quarantined,
                    lease_expirations_total: s.counters.lease_expirations,
                    stale_claim_rejections_total: s.counters.stale_claim_rejections,
                    fencing_rejections_total: s.counters.fencing_rejections,
                    delivered_total: s.counters.delivered,
                }
            })
            .collect();
        let latency = match (ticks.front(), ticks.back()) {
            (Some(first), Some(last)) => {
                distribution(&first.of(tenant).latency, &last.of(tenant).latency)
            }
            _ => Vec::new(),
        };
        OpsHistory {
            interval_seconds: self.interval.as_secs_f64(),
            samples,
            latency,
        }
    }

    /// `tenant`'s counters per minute: `current` minus its newest sample at least a
    /// minute old, scaled to one minute. While the server is younger than a minute,
    /// the counts since the oldest sample (not extrapolated). `None` without samples.
    pub fn rates(&self, tenant: TenantId, now: Millis, current: Counters) -> Option<OpsRates> {
        let ticks = self.lock();
        let base = ticks
            .iter()
            .rev()
            .find(|t| now - t.at >= MINUTE_MS)
            .or_else(|| ticks.front())?;
        let span = now - base.at;
        let scale = if span > MINUTE_MS {
            MINUTE_MS as f64 / span as f64
        } else {
            1.0
        };
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 * scale;
        let b = base.of(tenant).counters;
        Some(OpsRates {
            lease_expirations_per_minute: rate(current.lease_expirations, b.lease_expirations),
            stale_claim_rejections_per_minute: rate(
                current.stale_claim_rejections,
                b.stale_claim_rejections,
            ),
            fencing_rejections_per_minute: rate(current.fencing_rejections, b.fencing_rejections),
            quarantined_per_minute: rate(current.quarantined, b.quarantined),
            delivered_per_minute: rate(current.delivered, b.delivered),
        })
    }
}

/// Per-bucket counts of the observations between two cumulative snapshots.
fn distribution(first: &[(f64, u64)], last: &[(f64, u64)]) -> Vec<LatencyBucket> {
    let mut out = Vec::with_capacity(last.len());
    let mut below = 0u64;
    for (i, &(le, n)) in last.iter().enumerate() {
        let before = first.get(i).map_or(0, |&(_, m)| m);
        let cumulative = n.saturating_sub(before);
        out.push(LatencyBucket {
            le_seconds: le.is_finite().then_some(le),
            count: cumulative.saturating_sub(below),
        });
        below = cumulative;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_proto::StatusCounts;

    fn tenant() -> TenantId {
        "0192f0c4-0000-7000-8000-000000000001".parse().unwrap()
    }

    fn row(tenant: TenantId, pending: u64, quarantined: u64) -> DepthRow {
        DepthRow {
            agent_id: uuid::Uuid::now_v7().to_string().parse().unwrap(),
            tenant_id: tenant,
            agent_name: "a".into(),
            counts: StatusCounts {
                pending,
                quarantined,
                ..StatusCounts::default()
            },
            oldest_pending_at: None,
        }
    }

    fn delivered(n: u64) -> Vec<TenantSample> {
        vec![TenantSample {
            tenant: tenant(),
            counters: Counters {
                delivered: n,
                lease_expirations: n / 2,
                ..Counters::default()
            },
            latency: Vec::new(),
        }]
    }

    fn current(n: u64) -> Counters {
        delivered(n).remove(0).counters
    }

    #[test]
    fn samples_are_due_at_the_interval_and_capped() {
        let h = History::new(Duration::from_secs(5), 3);
        assert!(h.due(0), "the first sample is due at once");
        h.record(0, &[], delivered(0));
        assert!(!h.due(4_999));
        assert!(h.due(5_000));
        assert!(
            !h.record(4_999, &[], delivered(0)),
            "a pass that raced another one adds nothing"
        );
        for i in 1..=4 {
            assert!(h.record(i * 5_000, &[], delivered(0)));
        }
        let s = h.samples(tenant());
        assert_eq!(s.samples.len(), 3, "the oldest are dropped");
        assert_eq!(s.samples[0].at, to_timestamp(10_000));
        assert_eq!(s.interval_seconds, 5.0);
    }

    #[test]
    fn depth_is_summed_per_tenant_and_other_tenants_are_not_shown() {
        let h = History::new(Duration::from_secs(5), 10);
        let other: TenantId = "0192f0c4-0000-7000-8000-000000000002".parse().unwrap();
        h.record(
            0,
            &[row(tenant(), 3, 1), row(tenant(), 2, 0), row(other, 50, 50)],
            delivered(7),
        );
        let s = &h.samples(tenant()).samples[0];
        assert_eq!((s.pending, s.claimed, s.quarantined), (5, 0, 1));
        assert_eq!(s.delivered_total, 7);
        let o = &h.samples(other).samples[0];
        assert_eq!(o.pending, 50);
        assert_eq!(
            o.delivered_total, 0,
            "another tenant's counters are not this tenant's"
        );
        let unknown: TenantId = "0192f0c4-0000-7000-8000-000000000003".parse().unwrap();
        assert_eq!(h.samples(unknown).samples[0].pending, 0);
    }

    #[test]
    fn rates_count_the_last_minute_and_scale_a_longer_span() {
        let h = History::new(Duration::from_secs(5), 100);
        assert_eq!(
            h.rates(tenant(), 0, current(10)),
            None,
            "no samples, no rate"
        );
        h.record(0, &[], delivered(0));
        // Younger than a minute: what happened since the first sample, as is.
        let r = h.rates(tenant(), 20_000, current(10)).unwrap();
        assert_eq!(r.delivered_per_minute, 10.0);
        assert_eq!(r.lease_expirations_per_minute, 5.0);
        h.record(30_000, &[], delivered(40));
        h.record(65_000, &[], delivered(100));
        // At 100 s: the newest sample at least 60 s old is the one at 30 s (40).
        // 160 - 40 = 120 in 70 s = 102.857… per minute.
        let r = h.rates(tenant(), 100_000, current(160)).unwrap();
        assert!((r.delivered_per_minute - 120.0 * 60.0 / 70.0).abs() < 1e-9);
        // Exactly a minute: no scaling.
        let r = h.rates(tenant(), 90_000, current(100)).unwrap();
        assert_eq!(r.delivered_per_minute, 60.0);
    }

    #[test]
    fn latency_distribution_covers_the_window_only() {
        let h = History::new(Duration::from_secs(5), 100);
        let first = vec![(0.1, 4), (1.0, 6), (f64::INFINITY, 7)];
        let last = vec![(0.1, 5), (1.0, 10), (f64::INFINITY, 12)];
        let with = |latency| {
            let mut s = delivered(0);
            s[0].latency = latency;
            s
        };
        h.record(0, &[], with(first));
        h.record(5_000, &[], with(last));
        let l = h.samples(tenant()).latency;
        let counts: Vec<_> = l.iter().map(|b| (b.le_seconds, b.count)).collect();
        // Cumulative in the window: 1, 4, 5, so per bucket 1, 3 and 1.
        assert_eq!(counts, vec![(Some(0.1), 1), (Some(1.0), 3), (None, 1)]);
    }
}
