//! The classification table, row by row: which failures of which calls are retried,
//! and at what cost.

use super::*;
use switchboard_proto::Problem;

use Repeat::{Claim, Safe, Unsafe};

fn status(status: u16) -> Failure {
    Failure::Status {
        status,
        in_progress: false,
        retry_after: false,
    }
}

fn with_retry_after(status: u16) -> Failure {
    Failure::Status {
        status,
        in_progress: false,
        retry_after: true,
    }
}

const IN_PROGRESS: Failure = Failure::Status {
    status: 409,
    in_progress: true,
    retry_after: true,
};
const CONNECT: Failure = Failure::Connect { timeout: false };
const CONNECT_TIMEOUT: Failure = Failure::Connect { timeout: true };

/// A row: failure, then the cost of retrying it for a Safe call, a Claim and an
/// Unsafe POST; `None` means final.
type Row = (Failure, Option<u32>, Option<u32>, Option<u32>);

fn table() -> Vec<Row> {
    let mut rows = vec![
        (CONNECT, Some(5), Some(5), Some(5)),
        (CONNECT_TIMEOUT, Some(10), Some(10), Some(10)),
        (Failure::Timeout, Some(10), None, None),
        (Failure::Lost, Some(5), None, None),
        (status(408), Some(5), None, None),
        (status(429), Some(5), None, None),
        (with_retry_after(429), Some(5), Some(5), None),
        (status(503), Some(5), None, None),
        (with_retry_after(503), Some(5), Some(5), None),
        (IN_PROGRESS, Some(5), None, None),
        (Failure::Other, None, None, None),
    ];
    for code in [500, 502, 504] {
        rows.push((status(code), Some(5), None, None));
        rows.push((with_retry_after(code), Some(5), None, None));
    }
    // Final: every other 4xx (409 other than request_in_progress included), the
    // 5xx that a retry cannot fix, and non-2xx outside 4xx/5xx.
    for code in [
        400, 401, 403, 404, 405, 409, 410, 411, 412, 413, 415, 422, 423, 428, 431, 451, 501, 505,
        507, 300, 304,
    ] {
        rows.push((status(code), None, None, None));
        rows.push((with_retry_after(code), None, None, None));
    }
    rows
}

#[test]
fn the_classification_table() {
    for (failure, safe, claim, not_safe) in table() {
        assert_eq!(retry_cost(Safe, failure), safe, "Safe call, {failure:?}");
        assert_eq!(retry_cost(Claim, failure), claim, "claim, {failure:?}");
        assert_eq!(
            retry_cost(Unsafe, failure),
            not_safe,
            "unkeyed POST, {failure:?}"
        );
    }
}

#[test]
fn repeat_safety_of_methods() {
    for method in [Method::GET, Method::HEAD, Method::PUT, Method::DELETE] {
        assert_eq!(Repeat::of_method(&method), Safe, "{method}");
    }
    for method in [Method::POST, Method::PATCH] {
        assert_eq!(Repeat::of_method(&method), Unsafe, "{method}");
    }
}

fn api(code: ErrorCode, retry_after: Option<Duration>) -> Error {
    Error::Api {
        status: code.status(),
        problem: Box::new(Problem::new(code, "test")),
        retry_after,
    }
}

#[test]
fn failures_of_api_errors_read_status_code_and_retry_after() {
    let one = Some(Duration::from_secs(1));
    let cases = [
        (api(ErrorCode::RequestInProgress, one), IN_PROGRESS),
        (
            api(ErrorCode::StaleClaim, None),
            Failure::Status {
                status: 409,
                in_progress: false,
                retry_after: false,
            },
        ),
        (api(ErrorCode::Conflict, None), status(409)),
        (api(ErrorCode::Unavailable, one), with_retry_after(503)),
        (api(ErrorCode::ValidationFailed, None), status(400)),
        (api(ErrorCode::IdempotencyKeyReused, None), status(422)),
    ];
    for (error, failure) in cases {
        assert_eq!(Failure::of(&error), failure, "{error}");
    }
    assert_eq!(
        Failure::of(&Error::Timeout(std::time::Duration::from_secs(30))),
        Failure::Timeout
    );
    assert_eq!(
        Failure::of(&Error::Decode("bad json".into())),
        Failure::Other
    );
    assert_eq!(
        Failure::of(&Error::InvalidInput("bad key".into())),
        Failure::Other
    );
}

#[test]
fn none_makes_one_attempt_and_builders_set_the_budget() {
    assert_eq!(RetryPolicy::none().max_attempts, 1);
    assert_eq!(RetryPolicy::standard().max_attempts(0).max_attempts, 1);
    let policy = RetryPolicy::default();
    assert_eq!(
        (
            policy.max_attempts,
            policy.max_elapsed,
            policy.base_delay,
            policy.max_delay,
            policy.quota_capacity
        ),
        (
            5,
            Duration::from_secs(30),
            Duration::from_millis(100),
            Duration::from_secs(20),
            500
        )
    );
}
