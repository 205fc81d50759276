//! [`RetryQuota`]: the client-wide token bucket that stops retry storms.
//!
//! The AWS SDKs' "standard" retry mode quota, with its original ("2.0") costs, as
//! `shared/vectors/backoff_retry.md` §2 spells them out:
//!
//! - one bucket per client (shared by its clones), starting full at
//!   [`DEFAULT_QUOTA_CAPACITY`] (500) tokens;
//! - every *retry* first takes [`RETRY_COST`] (5) tokens, or [`TIMEOUT_RETRY_COST`]
//!   (10) when the failure was a timeout; when the bucket has fewer tokens than that,
//!   the call does not retry and returns its last error;
//! - a call that ends in success gives back what its **last** retry took, or
//!   [`NO_RETRY_INCREMENT`] (1) when it needed no retry; a call that ends in failure
//!   gives back nothing; the bucket never exceeds its capacity.
//!
//! So a healthy server keeps the bucket full, and against a dead one a client makes
//! at most 100 retries (50 if they are all timeouts) in total, across all its calls,
//! before every call fails at its first attempt; each success then refills a little.
//!
//! The newer "2.1" costs (14 per non-throttling retry, 5 for throttling; opt-in in
//! the AWS SDKs until late 2026) are not used: these are the rules the SDKs have
//! shipped for years, and the ones issue 6 asks for.

use std::sync::atomic::{AtomicU32, Ordering};

/// Tokens in a full bucket (AWS `INITIAL_RETRY_TOKENS`).
pub const DEFAULT_QUOTA_CAPACITY: u32 = 500;
/// Tokens a retry takes (AWS `RETRY_COST`).
pub(crate) const RETRY_COST: u32 = 5;
/// Tokens a retry after a timeout takes (AWS `TIMEOUT_RETRY_COST`).
pub(crate) const TIMEOUT_RETRY_COST: u32 = 10;
/// Tokens a success without retry gives back (AWS `NO_RETRY_INCREMENT`).
pub(crate) const NO_RETRY_INCREMENT: u32 = 1;

/// A token bucket shared by every call of a client (and its clones, through an
/// `Arc`), so a dead server gets a bounded number of retries, not a storm.
#[derive(Debug)]
pub(crate) struct RetryQuota {
    capacity: u32,
    /// Tokens left. An atomic rather than a lock: calls on many tasks take from
    /// and give back to it concurrently, and each step is one compare-and-swap.
    tokens: AtomicU32,
}

impl RetryQuota {
    /// A full bucket of `capacity` tokens.
    pub(crate) fn new(capacity: u32) -> Self {
        Self {
            capacity,
            tokens: AtomicU32::new(capacity),
        }
    }

    /// Takes `cost` tokens for a retry; `false` (and nothing taken) when the bucket
    /// cannot pay.
    pub(crate) fn acquire(&self, cost: u32) -> bool {
        self.tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                tokens.checked_sub(cost)
            })
            .is_ok()
    }

    /// Settles a call that ended in success: gives back what its last retry took
    /// (`last_retry_cost`), or [`NO_RETRY_INCREMENT`] when it made no retry.
    pub(crate) fn succeeded(&self, last_retry_cost: Option<u32>) {
        let amount = last_retry_cost.unwrap_or(NO_RETRY_INCREMENT);
        let capacity = self.capacity;
        // `fetch_update` with a closure that always returns `Some` cannot fail.
        let _ = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tokens| {
                Some(tokens.saturating_add(amount).min(capacity))
            });
    }

    /// Tokens left.
    #[cfg(test)]
    pub(crate) fn available(&self) -> u32 {
        self.tokens.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_pays_for_100_retries_or_50_timeout_retries() {
        let quota = RetryQuota::new(DEFAULT_QUOTA_CAPACITY);
        let paid = std::iter::from_fn(|| quota.acquire(RETRY_COST).then_some(())).count();
        assert_eq!((paid, quota.available()), (100, 0));
        assert!(!quota.acquire(1), "an empty bucket pays for nothing");

        let quota = RetryQuota::new(DEFAULT_QUOTA_CAPACITY);
        let paid = std::iter::from_fn(|| quota.acquire(TIMEOUT_RETRY_COST).then_some(())).count();
        assert_eq!((paid, quota.available()), (50, 0));
    }

    #[test]
    fn a_bucket_short_of_the_cost_takes_nothing() {
        let quota = RetryQuota::new(7);
        assert!(!quota.acquire(TIMEOUT_RETRY_COST));
        assert_eq!(quota.available(), 7, "a refused acquisition takes nothing");
        assert!(quota.acquire(RETRY_COST));
        assert_eq!(quota.available(), 2);
    }

    /// The walk-through of the vector file (§3), with our costs: acquire, succeed
    /// (refund of the last acquisition), succeed without retry (+1), fail (nothing).
    #[test]
    fn successes_refund_and_failures_do_not() {
        let quota = RetryQuota::new(DEFAULT_QUOTA_CAPACITY);
        assert!(quota.acquire(RETRY_COST));
        assert_eq!(quota.available(), 495);
        quota.succeeded(Some(RETRY_COST));
        assert_eq!(quota.available(), 500, "the last retry's tokens come back");

        assert!(quota.acquire(RETRY_COST) && quota.acquire(TIMEOUT_RETRY_COST));
        assert_eq!(quota.available(), 485);
        quota.succeeded(Some(TIMEOUT_RETRY_COST));
        assert_eq!(quota.available(), 495, "only the last retry is refunded");
        quota.succeeded(None);
        assert_eq!(quota.available(), 496, "a clean success adds 1");
        // A call that fails for good settles nothing: no method to call.
    }

    #[test]
    fn refunds_never_exceed_the_capacity() {
        let quota = RetryQuota::new(DEFAULT_QUOTA_CAPACITY);
        quota.succeeded(None);
        quota.succeeded(Some(TIMEOUT_RETRY_COST));
        assert_eq!(quota.available(), DEFAULT_QUOTA_CAPACITY);
    }
}
