//! Small helpers shared by the protocol tests: building requests, sending, claiming,
//! reading error codes, Prometheus counters and SSE events with a deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use serde_json::{Value, json};
use switchboard_tests::key;
use switchboard_tests::sdk::proto::{
    ClaimRequest, ClaimedEvent, ErrorCode, InboxUpdated, SendMessage, SendReceipt,
};
use switchboard_tests::sdk::{Client, Error, SseEvent, SseStream};
use switchboard_tests::server::Hooks;
use tokio::sync::Notify;

/// A message with just a payload.
pub(crate) fn msg(payload: Value) -> SendMessage {
    SendMessage {
        payload,
        ..Default::default()
    }
}

/// Sends `payload` to `agent` with a fresh idempotency key.
pub(crate) async fn send(client: &Client, agent: &str, payload: Value) -> SendReceipt {
    send_msg(client, agent, &msg(payload)).await
}

/// Sends `message` to `agent` with a fresh idempotency key.
pub(crate) async fn send_msg(client: &Client, agent: &str, message: &SendMessage) -> SendReceipt {
    client
        .send_message(agent, message, &key())
        .await
        .unwrap_or_else(|e| panic!("send to {agent} should succeed: {e}"))
}

/// Sends `n` messages `{"n": 1..=n}` one after the other.
pub(crate) async fn send_n(client: &Client, agent: &str, n: u64) -> Vec<SendReceipt> {
    let mut receipts = Vec::new();
    for i in 1..=n {
        receipts.push(send(client, agent, json!({ "n": i })).await);
    }
    receipts
}

pub(crate) fn claim_req(limit: u32, lease_seconds: u32) -> ClaimRequest {
    ClaimRequest {
        limit: Some(limit),
        lease_seconds: Some(lease_seconds),
        attempt_id: None,
    }
}

/// Claims up to `limit` events under a lease of `lease_seconds`.
pub(crate) async fn claim(
    client: &Client,
    agent: &str,
    limit: u32,
    lease_seconds: u32,
) -> Vec<ClaimedEvent> {
    client
        .claim(agent, &claim_req(limit, lease_seconds))
        .await
        .unwrap_or_else(|e| panic!("claim on {agent} should succeed: {e}"))
        .events
}

/// Claims exactly one event, failing the test if nothing is claimable.
pub(crate) async fn claim_one(client: &Client, agent: &str, lease_seconds: u32) -> ClaimedEvent {
    let mut events = claim(client, agent, 1, lease_seconds).await;
    assert_eq!(events.len(), 1, "exactly one event should be claimable");
    events.remove(0)
}

/// Asserts that `result` is an API error with `status` and `code`; returns the error.
#[track_caller]
pub(crate) fn expect_api_error<T: std::fmt::Debug>(
    result: Result<T, Error>,
    status: u16,
    code: ErrorCode,
    why: &str,
) -> Error {
    let err = match result {
        Ok(v) => panic!("{why}: expected {status} {code}, got success {v:?}"),
        Err(e) => e,
    };
    assert_eq!(err.status(), Some(status), "{why}: status of {err}");
    assert_eq!(err.code(), Some(code), "{why}: code of {err}");
    err
}

/// The value of an unlabelled Prometheus sample `name` (0 when absent).
pub(crate) async fn metric(client: &Client, name: &str) -> f64 {
    let text = client.metrics_text().await.expect("GET /metrics");
    switchboard_tests::exposition::sum(&text, name).unwrap_or(0.0)
}

/// The next event of `stream` within `within`; `None` on timeout. Panics when the
/// stream ends or fails.
pub(crate) async fn next_event(stream: &mut SseStream, within: Duration) -> Option<SseEvent> {
    match tokio::time::timeout(within, stream.next()).await {
        Err(_) => None,
        Ok(Some(Ok(event))) => Some(event),
        Ok(Some(Err(e))) => panic!("SSE stream failed: {e}"),
        Ok(None) => panic!("SSE stream ended unexpectedly"),
    }
}

/// The next `inbox_updated` within `within`, skipping heartbeats; `None` on timeout.
pub(crate) async fn next_update(stream: &mut SseStream, within: Duration) -> Option<InboxUpdated> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = next_event(stream, left).await?;
        if event.is_heartbeat() {
            continue;
        }
        return Some(
            event
                .inbox_updated()
                .unwrap_or_else(|| panic!("unexpected SSE event {event:?}")),
        );
    }
}

/// Holds the next send's transaction open between its writes and its commit.
#[derive(Default)]
pub(crate) struct Gate {
    /// Set by the test; the next send through the hook takes it and waits.
    pub(crate) armed: AtomicBool,
    /// Notified when a send is parked inside its transaction.
    pub(crate) entered: Notify,
    /// Notified by the test to let the parked send commit.
    pub(crate) open: Notify,
}

pub(crate) fn gate_hooks(gate: &Arc<Gate>) -> Hooks {
    let gate = gate.clone();
    Hooks {
        before_send_commit: Some(Arc::new(move || {
            let gate = gate.clone();
            async move {
                if gate.armed.swap(false, Ordering::SeqCst) {
                    gate.entered.notify_one();
                    gate.open.notified().await;
                }
                Ok(())
            }
            .boxed()
        })),
        ..Default::default()
    }
}
