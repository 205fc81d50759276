//! [`RetryPolicy`] (how often and how long a call may be retried) and the
//! classification (which failures of which calls are retried at all).
//!
//! Terms:
//! - *repeat safety* ([`Repeat`]): whether sending a call a second time can do harm.
//!   Each call carries one, set where the call is built.
//! - *failure* ([`Failure`]): what went wrong with one attempt, reduced to what the
//!   retry decision needs.
//! - *cost*: the tokens a retry takes from the client-wide quota (see `quota`).
//!
//! The table these implement is in the `retry` module documentation.

use std::fmt;
use std::time::Duration;

use reqwest::Method;
use switchboard_proto::ErrorCode;

use super::backoff::{DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, DecorrelatedJitter, uniform_random};
use super::quota::{DEFAULT_QUOTA_CAPACITY, RETRY_COST, TIMEOUT_RETRY_COST};
use crate::Error;

/// Attempts per call by default, the first one included (so at most 4 retries).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Wall time per call by default, from the first attempt: no retry starts later.
pub const DEFAULT_MAX_ELAPSED: Duration = Duration::from_secs(30);

/// How a [`Client`](crate::Client) retries a failed call: the per-call budget, the
/// backoff between attempts, and the size of the client-wide retry quota. Which
/// failures are retried is not configurable: see the table in [`crate::retry`].
///
/// ```
/// use std::time::Duration;
/// use switchboard_sdk::{Client, RetryPolicy};
///
/// let patient = RetryPolicy::standard().max_attempts(8).max_elapsed(Duration::from_secs(120));
/// let client = Client::builder().retry(patient).build("http://127.0.0.1:7070", "sb_token")?;
/// let once = Client::builder().retry(RetryPolicy::none()).build("http://127.0.0.1:7070", "sb_token")?;
/// # Ok::<(), switchboard_sdk::Error>(())
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) max_elapsed: Duration,
    pub(crate) base_delay: Duration,
    pub(crate) max_delay: Duration,
    pub(crate) quota_capacity: u32,
    /// The jitter's uniform source. A plain function, so the policy stays `Clone`,
    /// `Send` and `Sync`; unit tests put a fixed `u` here.
    pub(crate) uniform: fn() -> f64,
}

/// Without the uniform source: a function address says nothing to a reader.
impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("max_elapsed", &self.max_elapsed)
            .field("base_delay", &self.base_delay)
            .field("max_delay", &self.max_delay)
            .field("quota_capacity", &self.quota_capacity)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::standard()
    }
}

impl RetryPolicy {
    /// The default: 5 attempts within 30 s, decorrelated jitter from 100 ms up to
    /// 20 s between them, `Retry-After` honored, a quota of 500 tokens.
    pub fn standard() -> Self {
        Self {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_elapsed: DEFAULT_MAX_ELAPSED,
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
            quota_capacity: DEFAULT_QUOTA_CAPACITY,
            uniform: uniform_random,
        }
    }

    /// No retries: every call makes exactly one attempt.
    pub fn none() -> Self {
        Self::standard().max_attempts(1)
    }

    /// Attempts per call, the first one included (at least 1; default 5).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Wall time per call, from the start of the first attempt (default 30 s). A
    /// retry whose delay would end past it is not made: the call returns its last
    /// error instead. An attempt in flight is bounded by the request timeout, not
    /// by this.
    pub fn max_elapsed(mut self, budget: Duration) -> Self {
        self.max_elapsed = budget;
        self
    }

    /// The smallest delay between attempts (default 100 ms).
    pub fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// The largest jittered delay between attempts (default 20 s). A `Retry-After`
    /// from the server is honored as sent, even when longer (within
    /// [`RetryPolicy::max_elapsed`]).
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// Tokens in the client-wide retry quota (default 500; a retry costs 5, or 10
    /// after a timeout). Set when the client is built; clones share the bucket.
    pub fn quota_capacity(mut self, tokens: u32) -> Self {
        self.quota_capacity = tokens;
        self
    }

    /// A fresh jitter sequence for one call.
    pub(crate) fn jitter(&self) -> DecorrelatedJitter {
        DecorrelatedJitter::with_uniform(self.base_delay, self.max_delay, self.uniform)
    }
}

/// Whether sending a call a second time can do harm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Twice has the effect of once: `GET`, `PUT`, `DELETE`, a `POST` carrying an
    /// `Idempotency-Key` (the server replays the stored answer), and ack / release
    /// / extend (the claim token makes a repeat harmless).
    Safe,
    /// `POST …/inbox/claim`: a repeat after a lost answer leases more events that
    /// nobody handles until the lease expires. Retried only when it surely did not
    /// run: a connect error, or a 429/503 that says when to come back.
    Claim,
    /// Any other `POST` (create an agent or a room, bulk actions): retried only on
    /// a connect error, when the request never left.
    Unsafe,
}

impl Repeat {
    /// What the method alone says: idempotent methods are safe, others are not.
    pub(crate) fn of_method(method: &Method) -> Self {
        if method.is_idempotent() {
            Self::Safe
        } else {
            Self::Unsafe
        }
    }
}

/// What went wrong with one attempt, as far as retrying cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No connection was made (refused, DNS, TLS handshake, connect timeout): the
    /// request never reached the server.
    Connect { timeout: bool },
    /// The request timed out after connecting: the server may have run it.
    Timeout,
    /// The connection broke mid-exchange (reset, closed early, body cut short):
    /// the server may have run it.
    Lost,
    /// A non-2xx answer.
    Status {
        status: u16,
        /// The problem's code is `request_in_progress`.
        in_progress: bool,
        /// The answer had a (parsable) `Retry-After`.
        retry_after: bool,
    },
    /// Anything else (an unusable request, a decode error): never retried.
    Other,
}

impl Failure {
    pub(crate) fn of(error: &Error) -> Self {
        match error {
            Error::Api {
                status,
                retry_after,
                ..
            } => Self::Status {
                status: *status,
                in_progress: error.code() == Some(ErrorCode::RequestInProgress),
                retry_after: retry_after.is_some(),
            },
            Error::Transport(e) if e.is_connect() => Self::Connect {
                timeout: e.is_timeout(),
            },
            Error::Transport(e) if e.is_timeout() => Self::Timeout,
            Error::Timeout(_) => Self::Timeout,
            // Request: the send failed after connecting. Decode: reqwest reports a
            // failed body read as one (we decode JSON ourselves, into
            // `Error::Decode`, so here it is always the connection).
            Error::Transport(e) if e.is_request() || e.is_body() || e.is_decode() => Self::Lost,
            _ => Self::Other,
        }
    }
}

/// The tokens a retry costs when a `failure` of a `repeat` call may be retried;
/// `None` when the failure is final.
pub(crate) fn retry_cost(repeat: Repeat, failure: Failure) -> Option<u32> {
    let safe = repeat == Repeat::Safe;
    let retry = match failure {
        Failure::Connect { .. } => true,
        Failure::Timeout | Failure::Lost => safe,
        Failure::Status {
            status: 408 | 500 | 502 | 504,
            ..
        } => safe,
        Failure::Status {
            status: 429 | 503,
            retry_after,
            ..
        } => safe || (repeat == Repeat::Claim && retry_after),
        Failure::Status {
            status: 409,
            in_progress,
            ..
        } => safe && in_progress,
        Failure::Status { .. } | Failure::Other => false,
    };
    let cost = match failure {
        Failure::Connect { timeout: true } | Failure::Timeout => TIMEOUT_RETRY_COST,
        _ => RETRY_COST,
    };
    retry.then_some(cost)
}

#[cfg(test)]
mod tests;
