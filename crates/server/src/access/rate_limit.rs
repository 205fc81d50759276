//! Rate limits (issue 15): a token bucket per credential and one per tenant, so a
//! runaway client is refused before it costs the database anything and one noisy
//! credential never slows another.
//!
//! - The credential's bucket is keyed by the SHA-256 of its bearer token (or of the
//!   console's session id) and checked before the token is looked up: a flood of
//!   requests, even with a token that does not exist, does no database work past
//!   its burst.
//! - The tenant's bucket is checked once the token is known (from the lookup cache,
//!   usually), before the handler runs.
//! - Beyond either: 429 `rate_limited` with `Retry-After`. Every response to an
//!   authenticated request carries the IETF `RateLimit-Policy` and `RateLimit` fields
//!   (draft-ietf-httpapi-ratelimit-headers, Structured Fields written with `sfv`).
//!
//! GCRA from `governor` (keyed, a `DashMap` per policy), on the server's clock, so a
//! test on the manual clock refills a bucket by moving time. Idle buckets are full
//! again after `burst / rate` seconds; [`Limiter::forget_idle`] drops them (the
//! server calls it every minute), so memory follows the active credentials.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};
use sfv::{KeyRef, ListSerializer, StringRef};
use switchboard_proto::TenantId;

use crate::clock::Clock;
use crate::config::RateLimit;

/// A bucket of `limit`'s shape, if it is on.
fn quota(limit: &RateLimit) -> Option<Quota> {
    if !limit.is_on() {
        return None;
    }
    let period = Duration::from_secs_f64(1.0 / limit.per_second);
    Some(
        Quota::with_period(period.max(Duration::from_nanos(1)))?
            .allow_burst(NonZeroU32::new(limit.burst)?),
    )
}

/// The time a drained bucket takes to fill again, in whole seconds (the
/// policy's window).
fn window_seconds(limit: &RateLimit) -> u64 {
    (f64::from(limit.burst) / limit.per_second).ceil().max(1.0) as u64
}

/// Which bucket a decision is about (the policy's name in the headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Credential,
    Tenant,
    /// A client address's, drawn before a credential the lookup cache does not
    /// know is looked up.
    Address,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Credential => "credential",
            Self::Tenant => "tenant",
            Self::Address => "address",
        }
    }

    /// The label of `rate_limited` in a tenant's metrics (an address's bucket
    /// belongs to no tenant: the process's own count).
    pub fn metric(self) -> Option<crate::metrics::Policy> {
        match self {
            Self::Credential => Some(crate::metrics::Policy::Credential),
            Self::Tenant => Some(crate::metrics::Policy::Tenant),
            Self::Address => None,
        }
    }
}

/// What a request's buckets said: the `RateLimit` field's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub policy: Policy,
    /// Requests left in the bucket after this one.
    pub remaining: u32,
    /// Seconds until a refused request may be sent again (0 when allowed).
    pub wait_seconds: u64,
}

/// A refusal: which bucket ran dry and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub policy: Policy,
    pub wait: Duration,
}

impl Refused {
    /// `Retry-After`: whole seconds, never earlier than the bucket allows.
    pub fn retry_after(&self) -> u64 {
        self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0)
    }

    pub fn standing(&self) -> Standing {
        Standing {
            policy: self.policy,
            remaining: 0,
            wait_seconds: self.retry_after(),
        }
    }
}

/// The server's clock for `governor`: milliseconds since the epoch.
#[derive(Clone)]
pub struct ServerClock(pub Arc<dyn Clock>);

impl governor::clock::Clock for ServerClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.0.now_ms()).unwrap_or(0))
    }
}

type Keyed<K> = RateLimiter<K, DashMapStateStore<K>, ServerClock, StateInformationMiddleware>;

struct Bucket<K: std::hash::Hash + Eq + Clone> {
    limit: RateLimit,
    limiter: Keyed<K>,
}

impl<K: std::hash::Hash + Eq + Clone> Bucket<K> {
    fn new(limit: RateLimit, clock: &ServerClock) -> Option<Self> {
        let quota = quota(&limit)?;
        Some(Self {
            limit,
            limiter: RateLimiter::dashmap_with_clock(quota, clock.clone())
                .with_middleware::<StateInformationMiddleware>(),
        })
    }

    fn take(&self, key: &K, policy: Policy, clock: &ServerClock) -> Result<Standing, Refused> {
        use governor::clock::Clock as _;
        match self.limiter.check_key(key) {
            Ok(snapshot) => Ok(Standing {
                policy,
                remaining: snapshot.remaining_burst_capacity(),
                wait_seconds: 0,
            }),
            Err(not_until) => Err(Refused {
                policy,
                wait: not_until.wait_time_from(clock.now()),
            }),
        }
    }
}

/// The buckets of one server instance.
pub struct Limiter {
    clock: ServerClock,
    credentials: Option<Bucket<[u8; 32]>>,
    tenants: Option<Bucket<TenantId>>,
    /// Client addresses' buckets: drawn before a lookup of a credential the cache
    /// does not know, so a flood of unknown tokens from one address is refused
    /// before it costs database reads or a bucket each.
    addresses: Option<Bucket<std::net::IpAddr>>,
    /// The `RateLimit-Policy` field, the same on every response: written once.
    policy_field: Option<String>,
}

impl Limiter {
    pub fn new(credential: RateLimit, tenant: RateLimit, clock: Arc<dyn Clock>) -> Self {
        let clock = ServerClock(clock);
        let credentials = Bucket::new(credential, &clock);
        let tenants = Bucket::new(tenant, &clock);
        let policy_field = policy_field(
            credentials.as_ref().map(|b| b.limit),
            tenants.as_ref().map(|b| b.limit),
        );
        Self {
            credentials,
            tenants,
            addresses: None,
            clock,
            policy_field,
        }
    }

    /// With a bucket per client address for credential lookups the cache cannot
    /// answer ([`RateLimit::OFF`]: none).
    pub fn with_addresses(mut self, limit: RateLimit) -> Self {
        self.addresses = Bucket::new(limit, &self.clock);
        self
    }

    /// Takes a token from the bucket of the client address `addr` (`None`: no limit
    /// configured, or no address known).
    pub fn address(&self, addr: Option<std::net::IpAddr>) -> Result<Option<Standing>, Refused> {
        match (&self.addresses, addr) {
            (Some(b), Some(addr)) => b.take(&addr, Policy::Address, &self.clock).map(Some),
            _ => Ok(None),
        }
    }

    /// Takes a token from the bucket of the credential whose SHA-256 is `hash`
    /// (`None`: no limit configured).
    pub fn credential(&self, hash: &[u8; 32]) -> Result<Option<Standing>, Refused> {
        self.credentials
            .as_ref()
            .map(|b| b.take(hash, Policy::Credential, &self.clock))
            .transpose()
    }

    /// Takes a token from `tenant`'s bucket.
    pub fn tenant(&self, tenant: TenantId) -> Result<Option<Standing>, Refused> {
        self.tenants
            .as_ref()
            .map(|b| b.take(&tenant, Policy::Tenant, &self.clock))
            .transpose()
    }

    /// Drops the buckets that are full again (indistinguishable from new ones).
    pub fn forget_idle(&self) {
        if let Some(b) = &self.credentials {
            b.limiter.retain_recent();
            b.limiter.shrink_to_fit();
        }
        if let Some(b) = &self.tenants {
            b.limiter.retain_recent();
            b.limiter.shrink_to_fit();
        }
        if let Some(b) = &self.addresses {
            b.limiter.retain_recent();
            b.limiter.shrink_to_fit();
        }
    }

    /// Buckets held in memory (credentials, tenants).
    pub fn held(&self) -> (usize, usize) {
        (
            self.credentials.as_ref().map_or(0, |b| b.limiter.len()),
            self.tenants.as_ref().map_or(0, |b| b.limiter.len()),
        )
    }

    /// The `RateLimit-Policy` field: every enforced policy, e.g.
    /// `"credential";q=200;w=2, "tenant";q=2000;w=2`. `None` with no limit on.
    pub fn policy_field(&self) -> Option<&str> {
        self.policy_field.as_deref()
    }
}

fn policy_field(credential: Option<RateLimit>, tenant: Option<RateLimit>) -> Option<String> {
    let mut list = ListSerializer::new();
    for (policy, limit) in [(Policy::Credential, credential), (Policy::Tenant, tenant)] {
        let Some(limit) = limit else { continue };
        let _ = list
            .bare_item(name(policy))
            .parameter(KeyRef::constant("q"), integer(u64::from(limit.burst)))
            .parameter(KeyRef::constant("w"), integer(window_seconds(&limit)));
    }
    list.finish()
}

fn name(policy: Policy) -> &'static StringRef {
    StringRef::constant(policy.as_str())
}

fn integer(n: u64) -> sfv::Integer {
    sfv::Integer::try_from(n).unwrap_or(sfv::Integer::MAX)
}

/// The `RateLimit` field for what a request's buckets said, e.g.
/// `"credential";r=199` or `"tenant";r=0;t=3`. `None` when nothing was checked.
pub fn standing_field(standings: &[Standing]) -> Option<String> {
    let mut list = ListSerializer::new();
    for s in standings {
        let item = list
            .bare_item(name(s.policy))
            .parameter(KeyRef::constant("r"), integer(u64::from(s.remaining)));
        if s.wait_seconds > 0 {
            let _ = item.parameter(KeyRef::constant("t"), integer(s.wait_seconds));
        }
    }
    list.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// A credential's key, as `authenticate` makes it.
    fn key(token: &[u8]) -> [u8; 32] {
        let mut key = [0; 32];
        key[..token.len()].copy_from_slice(token);
        key
    }

    fn limiter(credential: RateLimit, tenant: RateLimit) -> (Limiter, ManualClock) {
        let clock = ManualClock::new();
        (
            Limiter::new(credential, tenant, Arc::new(clock.clone())),
            clock,
        )
    }

    const TWO_PER_SECOND: RateLimit = RateLimit {
        per_second: 2.0,
        burst: 3,
    };

    #[test]
    fn a_bucket_empties_refuses_and_refills_on_the_clock() {
        let (l, clock) = limiter(TWO_PER_SECOND, RateLimit::OFF);
        let remaining: Vec<u32> = (0..3)
            .map(|_| l.credential(&key(b"alice")).unwrap().unwrap().remaining)
            .collect();
        assert_eq!(remaining, [2, 1, 0]);
        let refused = l.credential(&key(b"alice")).unwrap_err();
        assert_eq!(refused.policy, Policy::Credential);
        assert_eq!(
            refused.wait,
            Duration::from_millis(500),
            "one token per 500 ms"
        );
        assert_eq!(refused.retry_after(), 1, "rounded up to whole seconds");
        // Another credential has its own bucket.
        assert_eq!(l.credential(&key(b"bob")).unwrap().unwrap().remaining, 2);
        clock.advance(499);
        assert!(l.credential(&key(b"alice")).is_err(), "not yet");
        clock.advance(1);
        assert_eq!(l.credential(&key(b"alice")).unwrap().unwrap().remaining, 0);
        clock.advance(10_000);
        assert_eq!(
            l.credential(&key(b"alice")).unwrap().unwrap().remaining,
            2,
            "full again"
        );
        assert!(
            l.tenant(TenantId::new()).unwrap().is_none(),
            "no tenant limit"
        );
    }

    #[test]
    fn a_tenant_bucket_is_shared_by_its_credentials() {
        let (l, _clock) = limiter(RateLimit::OFF, TWO_PER_SECOND);
        let (mine, theirs) = (TenantId::new(), TenantId::new());
        for _ in 0..3 {
            l.tenant(mine).unwrap();
        }
        assert_eq!(l.tenant(mine).unwrap_err().policy, Policy::Tenant);
        assert_eq!(l.tenant(theirs).unwrap().unwrap().remaining, 2);
        assert!(l.credential(&key(b"x")).unwrap().is_none());
    }

    #[test]
    fn idle_buckets_are_forgotten() {
        let (l, clock) = limiter(TWO_PER_SECOND, TWO_PER_SECOND);
        for name in [&b"a"[..], b"b", b"c"] {
            l.credential(&key(name)).unwrap();
        }
        l.tenant(TenantId::new()).unwrap();
        assert_eq!(l.held(), (3, 1));
        l.forget_idle();
        assert_eq!(l.held(), (3, 1), "not full yet");
        clock.advance(2_000);
        l.forget_idle();
        assert_eq!(l.held(), (0, 0));
    }

    #[test]
    fn the_fields_follow_the_draft() {
        let (l, _) = limiter(
            RateLimit {
                per_second: 100.0,
                burst: 200,
            },
            RateLimit {
                per_second: 0.5,
                burst: 3,
            },
        );
        assert_eq!(
            l.policy_field(),
            Some(r#""credential";q=200;w=2, "tenant";q=3;w=6"#)
        );
        let (off, _) = limiter(RateLimit::OFF, RateLimit::OFF);
        assert_eq!(off.policy_field(), None);
        let standings = [
            Standing {
                policy: Policy::Credential,
                remaining: 199,
                wait_seconds: 0,
            },
            Refused {
                policy: Policy::Tenant,
                wait: Duration::from_millis(2_100),
            }
            .standing(),
        ];
        assert_eq!(
            standing_field(&standings).as_deref(),
            Some(r#""credential";r=199, "tenant";r=0;t=3"#)
        );
        assert_eq!(standing_field(&[]), None);
    }

    #[test]
    fn bad_limits_are_refused_with_a_fix() {
        assert!(TWO_PER_SECOND.check("rate_limit").is_ok());
        assert!(RateLimit::OFF.check("rate_limit").is_ok());
        for bad in [
            RateLimit {
                per_second: -1.0,
                burst: 1,
            },
            RateLimit {
                per_second: f64::NAN,
                burst: 1,
            },
            RateLimit {
                per_second: 1.0,
                burst: 0,
            },
        ] {
            let e = bad.check("rate_limit").unwrap_err();
            assert!(e.contains("rate_limit_"), "{e}");
        }
    }
}
