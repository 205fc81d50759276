//! The consumer's public types: the handler and its outcome, settings, status,
//! errors.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;
use switchboard_proto::InboxEvent;
use time::OffsetDateTime;

use super::Mode;
use crate::Error;
use crate::local::LocalError;

/// What a handler decided about an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Done: ack it.
    Ack,
    /// Not now (a dependency is down): release it, to be claimed again after this
    /// delay, or after a backoff when `None`. Not counted as a failure.
    RetryLater(Option<Duration>),
    /// It failed; the reason is kept locally and sent with the release. Counts
    /// toward the local quarantine.
    Failed(String),
    /// It can never succeed: quarantine it now.
    Poison(String),
}

/// One event handed to a handler.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The event (payload included).
    pub event: InboxEvent,
    /// When the current lease expires (it is extended while the handler runs).
    pub lease_expires_at: OffsetDateTime,
    /// Local failures of this event so far.
    pub local_failures: u32,
}

/// Handles events. Implemented for async closures `Fn(Delivery) -> impl Future<Output
/// = Outcome>`.
pub trait Handler: Send + Sync + 'static {
    /// Handles one event. It may take long: the lease is extended meanwhile.
    fn handle(&self, delivery: Delivery) -> impl Future<Output = Outcome> + Send;
}

impl<F, Fut> Handler for F
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send,
{
    fn handle(&self, delivery: Delivery) -> impl Future<Output = Outcome> + Send {
        self(delivery)
    }
}

/// Consumer settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Lease asked for each claim (60 s).
    pub lease: Duration,
    /// Events claimed at a time (1). They are handled one after another, in order.
    pub batch: u32,
    /// Subscribe to the SSE wake-up stream (true); polling only when false.
    pub sse: bool,
    /// A silence on the stream longer than this is a dead connection (75 s: the
    /// server's default heartbeat is 15 s… set it to ~2× yours).
    pub heartbeat_timeout: Duration,
    /// Polling interval right after activity (1 s).
    pub min_poll: Duration,
    /// Polling ceiling, and the safety-net interval while SSE is up (5 min).
    pub max_poll: Duration,
    /// Local failures before an event is quarantined (3).
    pub max_local_failures: u32,
    /// Release delays after a failure: decorrelated jitter from this… (1 s)
    pub retry_base: Duration,
    /// …up to this (5 min).
    pub retry_cap: Duration,
    /// How long finished events are remembered for dedup (7 days)…
    pub dedup_ttl: Duration,
    /// …and at most how many (100,000).
    pub dedup_max: u64,
    /// Return from `run` as soon as a claim finds nothing claimable, instead of
    /// waiting for more (false): batch jobs, scripts and tests. Events released
    /// with a delay are not claimable until it passes, so they do not keep it up.
    pub stop_when_idle: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            batch: 1,
            sse: true,
            heartbeat_timeout: Duration::from_secs(75),
            min_poll: Duration::from_secs(1),
            max_poll: Duration::from_secs(300),
            max_local_failures: 3,
            retry_base: Duration::from_secs(1),
            retry_cap: Duration::from_secs(300),
            dedup_ttl: Duration::from_secs(7 * 24 * 3600),
            dedup_max: 100_000,
            stop_when_idle: false,
        }
    }
}

/// What the consumer has done, for status displays and the report to the server.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumerStatus {
    #[serde(flatten)]
    pub mode: Mode,
    /// Handler runs that ended in `Ack`.
    pub handled: u64,
    /// Acks the server confirmed.
    pub acked: u64,
    /// Redeliveries acked without running the handler.
    pub deduplicated: u64,
    /// Claim requests sent (empty answers included): with the wake-up stream up,
    /// about one per wake-up and one more to find the inbox empty.
    pub claims: u64,
    /// Events quarantined locally.
    pub poisoned: u64,
    /// Handler outcomes applied: the event marked handled (its ack waits for the
    /// next claim), released, or quarantined. It moves once per handler call, after
    /// the outcome's local write and release, so a caller that hands the consumer an
    /// outcome from elsewhere (the Python package's `event.ack()`) can wait for it.
    /// In-process only: not serialized.
    #[serde(skip)]
    pub settled: u64,
    /// The last error talking to the server, if the last attempt failed.
    pub last_error: Option<String>,
}

/// Why the consumer stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The server refused the consumer for good (unknown agent, bad token,
    /// missing scope).
    #[error("the server refused the consumer: {0}")]
    Refused(#[source] Error),
    /// The local state file failed.
    #[error(transparent)]
    Local(#[from] LocalError),
}

/// A locally quarantined event.
#[derive(Debug, Clone, Serialize)]
pub struct LocalPoison {
    pub event_id: String,
    pub seq: u64,
    pub failures: u32,
    pub reason: Option<String>,
    /// Unix ms.
    pub at: i64,
}
