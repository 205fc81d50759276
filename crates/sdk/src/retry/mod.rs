//! Retries: which failed calls are sent again, when, and how many times.
//!
//! Every typed method of [`Client`](crate::Client) builds a `Call` and sends it
//! through one place; the retry loop (`run`, below) wraps that place. A retried call
//! is the same call: same method, URL, body and `Idempotency-Key`, so the server can
//! recognize a repeat. Configure it with [`ClientBuilder::retry`] and a
//! [`RetryPolicy`]; the escape hatch [`Client::request`] is never retried.
//!
//! [`ClientBuilder::retry`]: crate::ClientBuilder::retry
//! [`Client::request`]: crate::Client::request
//!
//! # What is retried
//!
//! A failure is retried only when the failure is transient and the call is safe to
//! send again. *Safe* calls are `GET`, `PUT`, `DELETE`, every `POST` that carries an
//! `Idempotency-Key` (messages), and ack / release / extend, whose claim token makes
//! a repeat harmless (a repeated ack answers as the first; a release whose answer
//! was lost answers `stale_claim` on the repeat, without releasing twice). *Claim*
//! is not safe: if its answer is lost, a repeat leases more events, which then sit
//! unhandled until their lease expires. *Other `POST`s* (create an agent or a room,
//! bulk actions) carry no key.
//!
//! | failure of an attempt                          | safe call | claim | other `POST` | cost |
//! |------------------------------------------------|-----------|-------|--------------|------|
//! | connect error (refused, DNS, TLS handshake)    | retry     | retry | retry        | 5    |
//! | connect timeout                                | retry     | retry | retry        | 10   |
//! | timeout after connecting                       | retry     | final | final        | 10   |
//! | connection lost mid-exchange                   | retry     | final | final        | 5    |
//! | 408, 500, 502, 504                             | retry     | final | final        | 5    |
//! | 429, 503 with `Retry-After`                    | retry     | retry | final        | 5    |
//! | 429, 503 without `Retry-After`                 | retry     | final | final        | 5    |
//! | 409 with code `request_in_progress`            | retry     | n/a   | n/a          | 5    |
//! | 409 other (`stale_claim`, `conflict`, …)       | final     | final | final        |      |
//! | any other 4xx (400, 401, 403, 404, 410, 413, 415, 422, 423, …) | final | final | final |  |
//! | any other 5xx (501, 505, …), any other non-2xx | final     | final | final        |      |
//! | a 2xx body that does not decode, invalid input | final     | final | final        |      |
//!
//! A connect error is retried for every call because the request never reached the
//! server. A 429 turns a request away before it runs, and Switchboard puts
//! `Retry-After` on a 503 only when nothing ran (its database was unavailable), so a
//! claim may come back then; a 503 without it may come from a proxy that lost the
//! real answer, after the claim leased events. 409 `request_in_progress` only
//! answers keyed requests: the first request with that key is still running, and
//! the retry gets its stored answer. 5xx outside 500, 502, 503 and 504 say the
//! server cannot do this at all, so a retry would not help. The *cost* is what a
//! retry takes from the quota (below).
//!
//! # When, and how many times
//!
//! - **Delay**: the server's `Retry-After` (delay-seconds or HTTP-date, as
//!   [`Error::retry_after`] parsed it) when the answer had one, honored exactly;
//!   otherwise [`DecorrelatedJitter`] (base 100 ms, cap 20 s: the AWS SDKs' standard
//!   base and maximum delay). The jitter sequence advances on every retry, whether or
//!   not `Retry-After` replaced its value.
//! - **Per-call budget**: at most [`RetryPolicy::max_attempts`] attempts (5) and
//!   [`RetryPolicy::max_elapsed`] of wall time (30 s) from the first attempt. A retry
//!   whose delay would end past the budget is not made, and the call returns the last
//!   error at once rather than sleeping past it (a `Retry-After: 60` against 30 s
//!   fails fast).
//! - **Client-wide quota**: a token bucket shared by all calls and clones of a client
//!   (the AWS SDKs' standard mode, with its original costs): each retry takes 5
//!   tokens, 10 after a timeout, and a retry the bucket cannot pay for is not made;
//!   a call that succeeds gives back what its last retry took, or 1 token if it
//!   needed none; a call that fails gives nothing back. From a full bucket of 500,
//!   a dead server gets at most 100 retries in all, then single attempts.
//!
//! Time is `tokio::time`, so tests drive it with a paused clock.
//!
//! The defaults are [`DEFAULT_MAX_ATTEMPTS`], [`DEFAULT_MAX_ELAPSED`],
//! [`DEFAULT_BASE_DELAY`], [`DEFAULT_MAX_DELAY`] and [`DEFAULT_QUOTA_CAPACITY`].
//!
//! # Mechanics: `backon`
//!
//! The loop is [`backon`]'s `Retry` future: our [`DecorrelatedJitter`] is its
//! backoff (any `Iterator<Item = Duration>` is one), `when` holds the classification,
//! `adjust` applies `Retry-After`, the budget and the quota (it may replace the
//! jittered delay, or return `None` to stop), and `tokio::time::sleep` sleeps. What
//! we add is what it does not do: the classification, the decorrelated jitter, the
//! wall-time budget and the quota. `backon` wraps any async closure, so an attempt
//! can read the response body inside it (a body cut short is retried too);
//! `reqwest-retry` would have wrapped only the request, behind
//! `reqwest-middleware`'s client type. The shape is not a Tower `Retry`/`RetryLayer`
//! either: the client is not a Tower service stack, and the one seam that needs
//! retries is `Client::send`.

mod backoff;
mod policy;
mod quota;

use std::time::Duration;

use backon::Retryable;
use tokio::time::Instant;

pub use backoff::{DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, DecorrelatedJitter};
pub use policy::{DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_ELAPSED, RetryPolicy};
pub use quota::DEFAULT_QUOTA_CAPACITY;

pub(crate) use backoff::uniform_random;
pub(crate) use policy::Repeat;
pub(crate) use quota::RetryQuota;

use crate::Error;
use policy::{Failure, retry_cost};

/// Makes `attempt` (one send of a `repeat` call) until it succeeds, fails for good,
/// or the per-call budget or the client-wide `quota` runs out; returns the last
/// outcome.
pub(crate) async fn run<T, F, Fut>(
    policy: &RetryPolicy,
    quota: &RetryQuota,
    repeat: Repeat,
    mut attempt: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    if policy.max_attempts <= 1 {
        return attempt().await;
    }
    let mut budget = CallBudget {
        policy,
        quota,
        repeat,
        started: Instant::now(),
        attempts: 1,
        last_cost: None,
    };
    let outcome = attempt
        .retry(policy.jitter())
        .sleep(tokio::time::sleep)
        .when(|error| retry_cost(repeat, Failure::of(error)).is_some())
        .adjust(|error, jittered| budget.next_delay(error, jittered))
        .await;
    if outcome.is_ok() {
        quota.succeeded(budget.last_cost);
    }
    outcome
}

/// What one call has used of its budget, and what its last retry cost.
struct CallBudget<'a> {
    policy: &'a RetryPolicy,
    quota: &'a RetryQuota,
    repeat: Repeat,
    /// When the first attempt started: the wall-time budget counts from here.
    started: Instant,
    /// Attempts made so far, the first one included.
    attempts: u32,
    /// The tokens the last retry took: what a success gives back to the quota.
    last_cost: Option<u32>,
}

impl CallBudget<'_> {
    /// After a retryable `error`: how long to wait before the next attempt, or
    /// `None` to give up. `jittered` is the backoff's proposal; `Retry-After`
    /// replaces it. Takes the retry's tokens from the quota when it says yes.
    fn next_delay(&mut self, error: &Error, jittered: Option<Duration>) -> Option<Duration> {
        let cost = retry_cost(self.repeat, Failure::of(error))?;
        if self.attempts >= self.policy.max_attempts {
            return None;
        }
        let delay = error.retry_after().or(jittered)?;
        let remaining = self
            .policy
            .max_elapsed
            .checked_sub(self.started.elapsed())?;
        if delay > remaining || !self.quota.acquire(cost) {
            return None;
        }
        self.attempts += 1;
        self.last_cost = Some(cost);
        Some(delay)
    }
}

/// Whether `error` is transient for a call that is safe to repeat (see the table
/// above): the durable outbox schedules another attempt for these and gives up on
/// the rest.
pub(crate) fn is_transient(error: &Error) -> bool {
    retry_cost(Repeat::Safe, Failure::of(error)).is_some()
}

#[cfg(test)]
mod tests;
