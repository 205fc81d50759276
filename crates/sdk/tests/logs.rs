//! Log minimization: what the SDK logs about a call is the method, the route
//! template, the status, the latency, the attempt and the sizes. Never the token,
//! the idempotency key, names, ids or payloads (invariant I11).

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use common::{TOKEN, TestServer};
use switchboard_sdk::proto::SendMessage;

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_call_is_logged_without_names_ids_keys_tokens_or_payloads() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let receipt = serde_json::json!({
        "event_id": uuid::Uuid::now_v7(),
        "agent_id": uuid::Uuid::now_v7(),
        "seq": 1,
    });
    let routes = Router::new()
        .route(
            "/api/v1/agents/{agent}/messages",
            post(move || {
                let receipt = receipt.clone();
                async move { (StatusCode::CREATED, axum::Json(receipt)) }
            }),
        )
        .route(
            "/api/v1/rooms/{room}/messages",
            post(|| async { StatusCode::NOT_FOUND }),
        );
    let server = TestServer::start(routes).await;
    let client = server.client();
    let message = SendMessage {
        payload: serde_json::json!({"note": "hunter2-payload"}),
        ..SendMessage::default()
    };
    let key = "key-5f0c7e-secret";
    client
        .send_message("agent-secret-name", &message, key)
        .await
        .unwrap();
    client
        .send_room_message("room-secret-name", &message, key)
        .await
        .unwrap_err();

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("route=\"/api/v1/agents/{}/messages\"")
            || logs.contains("route=/api/v1/agents/{}/messages"),
        "{logs}"
    );
    assert!(
        logs.contains("status=201") && logs.contains("status=404"),
        "{logs}"
    );
    assert!(
        logs.contains("attempt=1") && logs.contains("latency_ms="),
        "{logs}"
    );
    assert!(logs.contains("request_bytes="), "{logs}");
    for secret in [
        "agent-secret-name",
        "room-secret-name",
        "hunter2",
        key,
        TOKEN,
    ] {
        assert!(
            !logs.contains(secret),
            "{secret} leaked into the logs:\n{logs}"
        );
    }
}
