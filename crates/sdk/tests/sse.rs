//! `subscribe` and `ops_stream` over real TCP against a stand-in SSE endpoint.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::{TOKEN, TestServer, header, problem};
use futures::{Stream, StreamExt};
use switchboard_sdk::proto::{AgentId, ErrorCode, InboxUpdated, OpsChange, Problem};
use switchboard_sdk::{Client, Error, SseEvent};

/// `events`, each sent after `gap`, then the stream ends.
fn slow(events: Vec<Event>, gap: Duration) -> impl Stream<Item = Result<Event, Infallible>> {
    futures::stream::iter(events).then(move |event| async move {
        tokio::time::sleep(gap).await;
        Ok(event)
    })
}

async fn subscribe(Path(agent): Path<String>) -> Response {
    if agent != "alice" {
        return problem(Problem::new(
            ErrorCode::NotFound,
            format!("no agent {agent}"),
        ));
    }
    let events = vec![
        Event::default().event("heartbeat").data("{}"),
        Event::default()
            .event("inbox_updated")
            .data(r#"{"cursor_hint":3}"#),
    ];
    Sse::new(slow(events, Duration::from_millis(150))).into_response()
}

#[tokio::test]
async fn subscribe_yields_typed_events_and_outlives_the_request_timeout() {
    let routes = Router::new().route("/api/v1/agents/{agent}/subscribe", get(subscribe));
    let server = TestServer::start(routes).await;
    let client = Client::builder()
        .request_timeout(Duration::from_millis(100))
        .build(&server.url(), TOKEN)
        .expect("client");

    let stream = client.subscribe("alice").await.expect("subscribed");
    let events: Vec<SseEvent> = stream.map(|e| e.expect("event")).collect().await;

    assert_eq!(
        events.len(),
        2,
        "both events arrive although 300 ms > the 100 ms request timeout"
    );
    assert!(events[0].is_heartbeat());
    assert_eq!(
        events[1].inbox_updated(),
        Some(InboxUpdated { cursor_hint: 3 })
    );
    let seen = server.one();
    assert_eq!(seen.uri.path(), "/api/v1/agents/alice/subscribe");
    assert_eq!(header(&seen, "accept"), Some("text/event-stream"));
    assert_eq!(header(&seen, "cache-control"), Some("no-store"));
    assert_eq!(
        header(&seen, "authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
}

#[tokio::test]
async fn subscribe_errors_come_back_before_the_stream() {
    let routes = Router::new()
        .route("/api/v1/agents/{agent}/subscribe", get(subscribe))
        .route(
            "/api/v1/ops/stream",
            get(|| async { axum::Json(serde_json::json!({})) }),
        );
    let server = TestServer::start(routes).await;
    let client = server.client();

    let err = client.subscribe("mallory").await.expect_err("404");
    assert_eq!(err.code(), Some(ErrorCode::NotFound));

    let err = client.ops_stream().await.expect_err("not an event stream");
    let Error::Decode(message) = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("application/json"), "{message}");
}

#[tokio::test]
async fn ops_stream_yields_changes() {
    let agent_id = AgentId::new();
    let change = OpsChange {
        agent_id,
        cursor_hint: 12,
    };
    let routes = Router::new().route(
        "/api/v1/ops/stream",
        get(move || async move {
            let events = vec![
                Event::default().comment("hello"),
                Event::default()
                    .event("changed")
                    .json_data(change)
                    .expect("json"),
            ];
            Sse::new(slow(events, Duration::ZERO))
        }),
    );
    let server = TestServer::start(routes).await;
    let mut stream = server.client().ops_stream().await.expect("stream");
    let event = stream.next().await.expect("an event").expect("ok");
    assert_eq!(event.ops_change(), Some(change));
    assert!(
        stream.next().await.is_none(),
        "the comment dispatches nothing; the stream ends"
    );
}

#[tokio::test]
async fn a_stream_whose_head_never_comes_times_out() {
    // Accepts connections and never answers: a half-open server.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let client = Client::builder()
        .request_timeout(Duration::from_millis(300))
        .retry(switchboard_sdk::RetryPolicy::none())
        .build(&url, TOKEN)
        .expect("client");

    let err = tokio::time::timeout(Duration::from_secs(10), client.subscribe("alice"))
        .await
        .expect("subscribe gives up on its own")
        .expect_err("no head");
    assert!(
        matches!(err, Error::Timeout(t) if t == Duration::from_millis(300)),
        "{err:?}"
    );
    assert_eq!(err.kind(), "timeout");
    held.abort();
}
