//! The typed client over real TCP against a stand-in server: what goes on the wire
//! (paths, auth, idempotency keys, query strings) and how answers become results.

mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use common::{TOKEN, TestServer, header, problem};
use serde_json::{Value, json};
use switchboard_sdk::proto::{
    AgentId, ErrorCode, EventId, EventListQuery, EventStatus, InboxPage, Problem, SendMessage,
    SendReceipt, Snapshot, StatusCounts,
};
use switchboard_sdk::{Client, Error, RetryPolicy, Token};

fn snapshot() -> Snapshot {
    Snapshot {
        agent_id: AgentId::new(),
        name: "alice".into(),
        head_cursor: 9,
        oldest_cursor: 3,
        resume_cursor: 4,
        counts: StatusCounts::default(),
        server_time: time::OffsetDateTime::now_utc(),
    }
}

#[tokio::test]
async fn poll_410_becomes_cursor_gone_with_oldest_cursor() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox",
        get(|Path(agent): Path<String>| async move {
            assert_eq!(agent, "alice");
            problem(
                Problem::new(
                    ErrorCode::CursorGone,
                    "cursor 17 is older than the retention window; oldest valid cursor is 240",
                )
                .with("oldest_cursor", 240),
            )
        }),
    );
    let server = TestServer::start(routes).await;
    let err = server
        .client()
        .poll("alice", 17, Some(5))
        .await
        .expect_err("410");

    assert!(matches!(err, Error::Api { status: 410, .. }), "{err:?}");
    assert_eq!(err.code(), Some(ErrorCode::CursorGone));
    assert_eq!(err.oldest_cursor(), Some(240));
    let seen = server.one();
    assert_eq!(seen.uri.path(), "/api/v1/agents/alice/inbox");
    assert_eq!(seen.uri.query(), Some("after_cursor=17&limit=5"));
}

#[tokio::test]
async fn token_is_sent_as_bearer_and_never_printed() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/snapshot",
        get(|| async { Json(snapshot()) }),
    );
    let server = TestServer::start(routes).await;
    let client = server.client();
    let got = client.snapshot("alice").await.expect("snapshot");

    assert_eq!((got.head_cursor, got.resume_cursor), (9, 4));
    let seen = server.one();
    assert_eq!(
        header(&seen, "authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(header(&seen, "accept").is_some_and(|a| a.contains("application/problem+json")));
    assert!(
        !format!("{client:?}").contains(TOKEN),
        "Debug of the client redacts the token"
    );
    assert!(!format!("{:?} {}", Token::from(TOKEN), Token::from(TOKEN)).contains(TOKEN));

    let other = client.with_token("sb_other").expect("client");
    other.snapshot("alice").await.expect("snapshot");
    assert_eq!(
        header(&server.seen()[1], "authorization"),
        Some("Bearer sb_other")
    );
}

#[tokio::test]
async fn send_message_sends_the_idempotency_key_and_reports_replays() {
    let receipt = SendReceipt {
        event_id: EventId::new(),
        agent_id: AgentId::new(),
        seq: 1,
    };
    let answer = receipt.clone();
    // Like the real server: a key seen before gets the stored answer, marked replayed.
    let keys = Arc::new(Mutex::new(HashSet::<String>::new()));
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/messages",
        post(
            move |headers: HeaderMap, Json(body): Json<Value>| async move {
                assert_eq!(body, json!({"payload": {"task": "index"}, "priority": 5}));
                let key = headers["idempotency-key"]
                    .to_str()
                    .expect("ascii")
                    .to_owned();
                let replayed = !keys.lock().expect("keys").insert(key);
                let mut response = (StatusCode::CREATED, Json(answer)).into_response();
                if replayed {
                    let value = header::HeaderValue::from_static("true");
                    response.headers_mut().insert("idempotent-replayed", value);
                }
                response
            },
        ),
    );
    let server = TestServer::start(routes).await;
    let client = server.client();
    let message = SendMessage {
        payload: json!({"task": "index"}),
        priority: Some(5),
        ..Default::default()
    };

    let (first, sent) = client
        .send_message_detailed("bob", &message, "key-1")
        .await
        .expect("send");
    assert_eq!((&first, sent.status, sent.replayed), (&receipt, 201, false));
    let (again, sent) = client
        .send_message_detailed("bob", &message, "key-1")
        .await
        .expect("retry");
    assert_eq!((&again, sent.status, sent.replayed), (&receipt, 201, true));
    let plain = client
        .send_message("bob", &message, "key-2")
        .await
        .expect("send");
    assert_eq!(plain, receipt);

    let keys: Vec<_> = server
        .seen()
        .iter()
        .map(|s| header(s, "idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        [
            Some("key-1".into()),
            Some("key-1".into()),
            Some("key-2".into())
        ]
    );
    assert_eq!(
        header(&server.seen()[0], "content-type"),
        Some("application/json")
    );

    let err = client
        .send_message("bob", &message, "bad\nkey")
        .await
        .expect_err("invalid key");
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let err = client
        .send_message("bob", &message, "")
        .await
        .expect_err("empty key");
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert_eq!(
        server.seen().len(),
        3,
        "an invalid key never reaches the network"
    );
}

#[tokio::test]
async fn non_problem_502_html_still_gives_a_typed_error() {
    let html = "<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>";
    let routes = Router::new().route(
        "/api/v1/capabilities",
        get(move || async move {
            (
                StatusCode::BAD_GATEWAY,
                [(header::CONTENT_TYPE, "text/html")],
                html,
            )
        }),
    );
    let server = TestServer::start(routes).await;
    // One attempt: the subject is the error, not the retries (tests/retry.rs).
    let err = server
        .client_with(RetryPolicy::none())
        .capabilities()
        .await
        .expect_err("502");

    assert_eq!(err.status(), Some(502));
    assert_eq!(
        err.code(),
        None,
        "a proxy's page carries no Switchboard code"
    );
    let problem = err.problem().expect("a synthesized problem");
    assert_eq!(
        (problem.title.as_str(), problem.status),
        ("Bad Gateway", 502)
    );
    assert_eq!(problem.detail.as_deref(), Some(html));
    assert!(
        err.to_string().starts_with("HTTP 502 Bad Gateway: <html>"),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limited_carries_retry_after() {
    let routes = Router::new().route(
        "/api/v1/ops/overview",
        get(|| async {
            let mut response = problem(Problem::new(ErrorCode::RateLimited, "slow down"));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, "7".parse().expect("hv"));
            response
        }),
    );
    let server = TestServer::start(routes).await;
    // One attempt: the subject is the error, not the retries (tests/retry.rs).
    let err = server
        .client_with(RetryPolicy::none())
        .overview()
        .await
        .expect_err("429");
    assert_eq!(err.code(), Some(ErrorCode::RateLimited));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
}

#[tokio::test]
async fn a_2xx_body_of_the_wrong_shape_is_a_decode_error() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox",
        get(|| async { Json(json!({"events": "nope"})) }),
    );
    let server = TestServer::start(routes).await;
    let err = server
        .client()
        .poll("alice", 0, None)
        .await
        .expect_err("decode");
    let Error::Decode(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.starts_with("GET /api/v1/agents/{}/inbox: "),
        "{message}"
    );
    assert_eq!(
        server.one().uri.query(),
        Some("after_cursor=0"),
        "no limit when None"
    );
}

#[tokio::test]
async fn path_segments_are_percent_encoded_and_dot_segments_refused() {
    let routes = Router::new().route(
        "/api/v1/agents/{agent}/inbox",
        get(|Path(agent): Path<String>| async move {
            Json(json!({"events": [], "next_cursor": agent.len(), "has_more": false}))
        }),
    );
    let server = TestServer::start(routes).await;
    let client = server.client();
    let page: InboxPage = client.poll("a b/c?d%", 0, None).await.expect("poll");
    assert_eq!(
        page.next_cursor, 8,
        "the server decoded the whole name as one segment"
    );
    assert_eq!(
        server.one().uri.path(),
        "/api/v1/agents/a%20b%2Fc%3Fd%25/inbox"
    );

    for bad in ["", ".", ".."] {
        let err = client.poll(bad, 0, None).await.expect_err("refused");
        assert!(matches!(err, Error::InvalidInput(_)), "{bad:?}: {err:?}");
    }
    assert_eq!(server.seen().len(), 1, "refused before any request");
}

#[tokio::test]
async fn base_url_prefix_is_kept_and_root_endpoints_skip_api_v1() {
    let routes = Router::new()
        .route("/metrics", get(|| async { "# HELP up 1\nup 1\n" }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/api/v1/ops/events",
            get(|Query(q): Query<Value>| async move {
                assert_eq!(
                    q,
                    json!({"agent": "alice", "status": "quarantined", "limit": "10"})
                );
                Json(json!({"events": []}))
            }),
        );
    let server = TestServer::start_at("/sb", routes).await;
    let client = Client::new(&format!("{}/sb/", server.url()), TOKEN).expect("client");
    assert_eq!(client.base_url().as_str(), format!("{}/sb", server.url()));

    assert_eq!(
        client.metrics_text().await.expect("metrics"),
        "# HELP up 1\nup 1\n"
    );
    client.healthz().await.expect("healthz");
    let query = EventListQuery {
        agent: Some("alice".into()),
        status: Some(EventStatus::Quarantined),
        limit: Some(10),
        ..Default::default()
    };
    let page = client.events(&query).await.expect("events");
    assert!(page.events.is_empty() && page.next_cursor.is_none());
    let paths: Vec<String> = server
        .seen()
        .iter()
        .map(|s| s.uri.path().to_owned())
        .collect();
    assert_eq!(
        paths,
        ["/sb/metrics", "/sb/healthz", "/sb/api/v1/ops/events"]
    );
}

#[tokio::test]
async fn unusable_base_urls_are_refused() {
    for bad in [
        "not a url",
        "ftp://example.com",
        "http://example.com/?a=1",
        "mailto:x@example.com",
    ] {
        let err = Client::new(bad, TOKEN).expect_err(bad);
        assert!(matches!(err, Error::InvalidUrl(_)), "{bad}: {err:?}");
    }
    let err = Client::new("http://127.0.0.1:1", "line\nbreak").expect_err("bad token");
    assert!(matches!(err, Error::InvalidInput(_)));
    assert!(
        !err.to_string().contains("line"),
        "the message never echoes the token"
    );
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    // One attempt: retries of refused connections are in tests/retry.rs.
    let client = Client::builder()
        .retry(RetryPolicy::none())
        .build(&format!("http://{addr}"), TOKEN)
        .expect("client");
    let err = client.healthz().await.expect_err("nothing listens");
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert_eq!((err.status(), err.code()), (None, None));
}
