//! The retry loop on a paused clock with scripted attempts: delays (jitter and
//! `Retry-After`), the per-call budget, the quota, and what is never retried.

use std::cell::RefCell;
use std::collections::VecDeque;

use switchboard_proto::{ErrorCode, Problem};

use super::quota::{RETRY_COST, TIMEOUT_RETRY_COST};
use super::*;

const SECOND: Duration = Duration::from_secs(1);

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn api(code: ErrorCode, retry_after: Option<Duration>) -> Error {
    Error::Api {
        status: code.status(),
        problem: Box::new(Problem::new(code, "scripted")),
        retry_after,
    }
}

fn unavailable() -> Error {
    api(ErrorCode::Unavailable, None)
}

/// A policy whose jitter always draws `u` (so its delays are known).
fn policy(u: fn() -> f64) -> RetryPolicy {
    RetryPolicy {
        uniform: u,
        ..RetryPolicy::standard()
    }
}

/// Plays `script` one outcome per attempt (then succeeds), recording when each
/// attempt started, relative to the call's start.
struct Script {
    outcomes: RefCell<VecDeque<Result<(), Error>>>,
    started: Instant,
    at: RefCell<Vec<Duration>>,
}

impl Script {
    fn new(outcomes: impl IntoIterator<Item = Result<(), Error>>) -> Self {
        Self {
            outcomes: RefCell::new(outcomes.into_iter().collect()),
            started: Instant::now(),
            at: RefCell::default(),
        }
    }

    /// Fails with `error()` every time.
    fn failing(error: fn() -> Error) -> Self {
        Self::new((0..100).map(|_| Err(error())))
    }

    async fn run(
        &self,
        policy: &RetryPolicy,
        quota: &RetryQuota,
        repeat: Repeat,
    ) -> Result<(), Error> {
        run(policy, quota, repeat, || async {
            self.at.borrow_mut().push(self.started.elapsed());
            self.outcomes.borrow_mut().pop_front().unwrap_or(Ok(()))
        })
        .await
    }

    fn attempts(&self) -> Vec<Duration> {
        self.at.borrow().clone()
    }
}

#[tokio::test(start_paused = true)]
async fn transient_failures_wait_the_jittered_delays_then_succeed() {
    let quota = RetryQuota::new(500);
    let script = Script::new([Err(unavailable()), Err(unavailable())]);
    script
        .run(&policy(|| 1.0), &quota, Repeat::Safe)
        .await
        .expect("the third attempt succeeds");
    // u = 1: base 100 ms, then 300 ms, then 900 ms.
    assert_eq!(script.attempts(), [ms(0), ms(300), ms(1200)]);
    assert_eq!(
        quota.available(),
        500 - RETRY_COST,
        "two retries took 10 tokens, the success gave back the last retry's 5"
    );
}

/// Issue 6, "Done when": 429 with `Retry-After: 30`, the next attempt is exactly
/// 30 s later (30 s is also the whole default budget: a delay may end on it).
#[tokio::test(start_paused = true)]
async fn retry_after_replaces_the_jitter_exactly() {
    let quota = RetryQuota::new(500);
    let script = Script::new([
        Err(api(ErrorCode::RateLimited, Some(30 * SECOND))),
        Err(api(ErrorCode::Unavailable, Some(Duration::ZERO))),
    ]);
    script
        .run(&policy(|| 1.0), &quota, Repeat::Safe)
        .await
        .expect("succeeds");
    assert_eq!(script.attempts(), [ms(0), 30 * SECOND, 30 * SECOND]);
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_past_the_budget_fails_at_once() {
    let quota = RetryQuota::new(500);
    let script = Script::failing(|| api(ErrorCode::Unavailable, Some(31 * SECOND)));
    let started = Instant::now();
    let err = script
        .run(&policy(|| 1.0), &quota, Repeat::Safe)
        .await
        .expect_err("gives up");
    assert_eq!(err.retry_after(), Some(31 * SECOND), "the server's answer");
    assert_eq!(script.attempts(), [ms(0)]);
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "no sleep past the budget"
    );
    assert_eq!(quota.available(), 500, "no retry, nothing taken");
}

#[tokio::test(start_paused = true)]
async fn the_attempt_budget_stops_after_five() {
    let quota = RetryQuota::new(500);
    let script = Script::failing(unavailable);
    let err = script
        .run(&policy(|| 0.0), &quota, Repeat::Safe)
        .await
        .expect_err("gives up");
    assert_eq!(err.status(), Some(503));
    // u = 0: every delay is the 100 ms base.
    assert_eq!(
        script.attempts(),
        [ms(0), ms(100), ms(200), ms(300), ms(400)]
    );
    assert_eq!(
        quota.available(),
        500 - 4 * RETRY_COST,
        "a call that fails gives nothing back"
    );
}

#[tokio::test(start_paused = true)]
async fn the_time_budget_stops_before_a_delay_that_would_end_past_it() {
    let quota = RetryQuota::new(500);
    let script = Script::failing(unavailable);
    // base = cap = 10 s: every delay is 10 s; attempts at 0, 10, 20; a third retry
    // would start at 30 > 25.
    let policy = policy(|| 0.5)
        .base_delay(10 * SECOND)
        .max_delay(10 * SECOND)
        .max_elapsed(25 * SECOND)
        .max_attempts(100);
    let started = Instant::now();
    script
        .run(&policy, &quota, Repeat::Safe)
        .await
        .expect_err("gives up");
    assert_eq!(script.attempts(), [ms(0), 10 * SECOND, 20 * SECOND]);
    assert_eq!(
        started.elapsed(),
        20 * SECOND,
        "returns without the last sleep"
    );
}

#[tokio::test(start_paused = true)]
async fn final_failures_are_not_retried() {
    let finals: [fn() -> Error; 5] = [
        || api(ErrorCode::IdempotencyKeyReused, None),
        || api(ErrorCode::StaleClaim, None),
        || api(ErrorCode::Conflict, None),
        || api(ErrorCode::NotFound, Some(SECOND)),
        || Error::Decode("bad shape".into()),
    ];
    let quota = RetryQuota::new(500);
    for error in finals {
        let script = Script::failing(error);
        let err = script
            .run(&policy(|| 1.0), &quota, Repeat::Safe)
            .await
            .expect_err("final");
        assert_eq!(script.attempts(), [ms(0)], "{err}");
    }
    assert_eq!(quota.available(), 500);
}

#[tokio::test(start_paused = true)]
async fn a_claim_is_retried_only_when_told_when_to_come_back() {
    let quota = RetryQuota::new(500);
    let bare = Script::failing(unavailable);
    bare.run(&policy(|| 1.0), &quota, Repeat::Claim)
        .await
        .expect_err("final");
    assert_eq!(
        bare.attempts().len(),
        1,
        "a 503 without Retry-After may have run"
    );

    let told = Script::new([Err(api(ErrorCode::Unavailable, Some(SECOND)))]);
    told.run(&policy(|| 1.0), &quota, Repeat::Claim)
        .await
        .expect("retried");
    assert_eq!(told.attempts(), [ms(0), SECOND]);

    let unkeyed = Script::failing(|| api(ErrorCode::Unavailable, Some(SECOND)));
    unkeyed
        .run(&policy(|| 1.0), &quota, Repeat::Unsafe)
        .await
        .expect_err("final");
    assert_eq!(
        unkeyed.attempts().len(),
        1,
        "an unkeyed POST is never repeated"
    );
}

#[tokio::test(start_paused = true)]
async fn request_in_progress_is_retried_after_its_retry_after() {
    let quota = RetryQuota::new(500);
    let script = Script::new([Err(api(ErrorCode::RequestInProgress, Some(SECOND)))]);
    script
        .run(&policy(|| 1.0), &quota, Repeat::Safe)
        .await
        .expect("retried");
    assert_eq!(script.attempts(), [ms(0), SECOND]);
}

#[tokio::test(start_paused = true)]
async fn an_empty_quota_stops_retries_and_successes_refill_it() {
    // Room for exactly one retry.
    let quota = RetryQuota::new(RETRY_COST);
    let first = Script::failing(unavailable);
    first
        .run(&policy(|| 0.0), &quota, Repeat::Safe)
        .await
        .expect_err("gives up");
    assert_eq!(
        first.attempts().len(),
        2,
        "one retry, then the bucket is dry"
    );
    assert_eq!(quota.available(), 0);

    let second = Script::failing(unavailable);
    second
        .run(&policy(|| 0.0), &quota, Repeat::Safe)
        .await
        .expect_err("gives up");
    assert_eq!(second.attempts().len(), 1, "no tokens, no retry");

    for _ in 0..TIMEOUT_RETRY_COST {
        Script::new([])
            .run(&policy(|| 0.0), &quota, Repeat::Safe)
            .await
            .expect("clean success");
    }
    assert_eq!(
        quota.available(),
        RETRY_COST,
        "each clean success adds 1, up to the capacity"
    );
}

#[tokio::test(start_paused = true)]
async fn none_makes_one_attempt() {
    let quota = RetryQuota::new(500);
    let script = Script::failing(unavailable);
    script
        .run(&RetryPolicy::none(), &quota, Repeat::Safe)
        .await
        .expect_err("one attempt");
    assert_eq!(script.attempts(), [ms(0)]);
}
