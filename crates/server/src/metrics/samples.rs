//! What the overview and the sample history read from the metrics: a tenant's
//! counters and latency buckets, and the quantile of a cumulative histogram.

use switchboard_proto::TenantId;

/// One tenant's counters and delivery-latency buckets at a sample.
pub struct TenantSample {
    pub tenant: TenantId,
    pub counters: Counters,
    pub latency: Vec<(f64, u64)>,
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
pub(super) fn buckets(text: &str) -> Vec<(f64, u64)> {
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
