//! Retries over real TCP against a stand-in server on `127.0.0.1:0`, on a paused
//! clock: attempts are counted by the server (its request log), delays are read off
//! tokio's clock, so `Retry-After: 1` costs no real second.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use common::{TOKEN, TestServer, header, problem};
use serde_json::json;
use switchboard_sdk::proto::{
    AgentId, ClaimRequest, ClaimToken, ErrorCode, EventId, Problem, SendMessage, SendReceipt,
};
use switchboard_sdk::{Client, Error, RetryPolicy};
use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

/// A Switchboard problem with `Retry-After: {seconds}`.
fn problem_retry_after(code: ErrorCode, seconds: u64) -> Response {
    let mut response = problem(Problem::new(code, "scripted"));
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, seconds.into());
    response
}

fn receipt() -> SendReceipt {
    SendReceipt {
        event_id: EventId::new(),
        agent_id: AgentId::new(),
        seq: 1,
    }
}

fn message() -> SendMessage {
    SendMessage {
        payload: json!({"task": "index"}),
        ..Default::default()
    }
}

/// A `POST …/messages` route whose first `failures` answers come from `fail`, and
/// then a 201 receipt.
fn messages_route(failures: usize, fail: fn() -> Response) -> Router {
    let seen = Arc::new(AtomicUsize::new(0));
    Router::new().route(
        "/api/v1/agents/{agent}/messages",
        post(move || async move {
            if seen.fetch_add(1, Ordering::SeqCst) < failures {
                fail()
            } else {
                (StatusCode::CREATED, Json(receipt())).into_response()
            }
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_is_retried_with_the_same_idempotency_key() {
    let fail = || problem_retry_after(ErrorCode::Unavailable, 1);
    let server = TestServer::start(messages_route(3, fail)).await;
    let started = Instant::now();
    let got = server
        .client()
        .send_message("bob", &message(), "key-503")
        .await
        .expect("the fourth attempt succeeds");

    assert_eq!(got.seq, 1);
    let seen = server.seen();
    assert_eq!(seen.len(), 4, "three 503s, then the 201");
    for (n, request) in seen.iter().enumerate() {
        assert_eq!(
            header(request, "idempotency-key"),
            Some("key-503"),
            "attempt {n} reuses the key, so the server can dedupe a repeat"
        );
    }
    assert_eq!(
        started.elapsed(),
        3 * SECOND,
        "each retry waited exactly the 1 s of Retry-After"
    );
}

#[tokio::test(start_paused = true)]
async fn a_422_is_final_after_one_attempt() {
    let fail = || problem(Problem::new(ErrorCode::IdempotencyKeyReused, "other body"));
    let server = TestServer::start(messages_route(usize::MAX, fail)).await;
    let err = server
        .client()
        .send_message("bob", &message(), "key-422")
        .await
        .expect_err("422");
    assert_eq!(err.code(), Some(ErrorCode::IdempotencyKeyReused));
    assert_eq!(server.seen().len(), 1, "a 422 is never retried");
}

#[tokio::test(start_paused = true)]
async fn request_in_progress_is_retried_until_the_first_request_is_done() {
    let fail = || problem_retry_after(ErrorCode::RequestInProgress, 1);
    let server = TestServer::start(messages_route(2, fail)).await;
    server
        .client()
        .send_message("bob", &message(), "key-409")
        .await
        .expect("the stored answer, once the first request finished");
    assert_eq!(server.seen().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn stale_claim_is_final() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox/{event}/ack",
        post(|| async { problem(Problem::new(ErrorCode::StaleClaim, "lease expired")) }),
    );
    let server = TestServer::start(routes).await;
    let err = server
        .client()
        .ack("alice", EventId::new(), ClaimToken::new())
        .await
        .expect_err("409");
    assert_eq!(err.code(), Some(ErrorCode::StaleClaim));
    assert_eq!(
        server.seen().len(),
        1,
        "only request_in_progress 409s retry"
    );
}

#[tokio::test(start_paused = true)]
async fn an_ack_lost_to_a_502_is_retried_but_a_claim_is_not() {
    let routes = Router::new()
        .route(
            "/api/v1/agents/{agent}/inbox/claim",
            post(|| async { StatusCode::BAD_GATEWAY }),
        )
        .route(
            "/api/v1/agents/{agent}/inbox/{event}/ack",
            post(|| async { StatusCode::BAD_GATEWAY }),
        );
    let server = TestServer::start(routes).await;
    let client = server.client();
    let err = client
        .claim("alice", &ClaimRequest::default())
        .await
        .expect_err("502");
    assert_eq!(err.status(), Some(502));
    assert_eq!(
        server.seen().len(),
        1,
        "a claim whose answer was lost may have leased events: not repeated"
    );
    client
        .ack("alice", EventId::new(), ClaimToken::new())
        .await
        .expect_err("502");
    assert_eq!(
        server.seen().len(),
        1 + 5,
        "an ack carries its claim token: safe to repeat, up to the budget"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_turned_away_with_retry_after_is_retried() {
    let seen = Arc::new(AtomicUsize::new(0));
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox/claim",
        post(move || async move {
            if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                problem_retry_after(ErrorCode::RateLimited, 2)
            } else {
                Json(json!({"events": []})).into_response()
            }
        }),
    );
    let server = TestServer::start(routes).await;
    let started = Instant::now();
    let claimed = server
        .client()
        .claim("alice", &ClaimRequest::default())
        .await
        .expect("a 429 ran nothing: the claim comes back after Retry-After");
    assert!(claimed.events.is_empty());
    assert_eq!(server.seen().len(), 2);
    assert_eq!(started.elapsed(), 2 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_retried_then_reported_after_the_budget() {
    // A port that was free a moment ago: connecting to it is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    // base = cap = 1 s: every delay is exactly 1 s, so the elapsed time counts the
    // retries (nothing answers, so there is no server-side count).
    let policy = RetryPolicy::standard().base_delay(SECOND).max_delay(SECOND);
    let client = Client::builder()
        .retry(policy)
        .build(&url, TOKEN)
        .expect("client");
    let started = Instant::now();
    let err = client.poll("alice", 0, None).await.expect_err("refused");
    assert!(
        matches!(&err, Error::Transport(e) if e.is_connect()),
        "the last attempt's connect error: {err:?}"
    );
    assert_eq!(
        started.elapsed(),
        4 * SECOND,
        "5 attempts (the default), 1 s apart"
    );
}

#[tokio::test(start_paused = true)]
async fn policy_none_makes_one_attempt() {
    let fail = || problem_retry_after(ErrorCode::Unavailable, 1);
    let server = TestServer::start(messages_route(usize::MAX, fail)).await;
    let err = server
        .client_with(RetryPolicy::none())
        .send_message("bob", &message(), "key-none")
        .await
        .expect_err("503");
    assert_eq!(err.code(), Some(ErrorCode::Unavailable));
    assert_eq!(err.retry_after(), Some(SECOND), "left for the caller");
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn clones_and_other_tokens_share_the_retry_quota() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox",
        get(|| async { problem_retry_after(ErrorCode::Unavailable, 0) }),
    );
    let server = TestServer::start(routes).await;
    // Tokens for exactly one retry (a retry costs 5).
    let client = server.client_with(RetryPolicy::standard().quota_capacity(5));
    client.poll("alice", 0, None).await.expect_err("503");
    assert_eq!(server.seen().len(), 2, "one retry empties the bucket");

    client
        .clone()
        .poll("alice", 0, None)
        .await
        .expect_err("503");
    assert_eq!(server.seen().len(), 3, "a clone: same bucket, no retry");
    let other = client.with_token("sb_other_token").expect("client");
    other.poll("alice", 0, None).await.expect_err("503");
    assert_eq!(
        server.seen().len(),
        4,
        "another token: same bucket, no retry"
    );
}
