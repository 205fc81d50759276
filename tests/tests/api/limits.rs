//! Request limits: body size (413, with the published `max_body_bytes`) and the
//! Origin check on state-changing requests.

use serde_json::{Value, json};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::{Options, TestServer, key};

use crate::support::{call, inbox, message, send_raw};

#[tokio::test]
async fn bodies_over_the_configured_limit_are_413() {
    let server = TestServer::with(Options {
        max_body_bytes: Some(64 * 1024),
        ..Options::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    server.agent("bob").await;

    let big = message(json!("x".repeat(65 * 1024)));
    send_raw(&alice, "bob", &big, &key())
        .await
        .problem(413, "payload_too_large");
    let big_claim = json!({"limit": 1, "padding": "x".repeat(65 * 1024)});
    let claim = alice.request(Method::POST, "agents/alice/inbox/claim");
    call(claim.json(&big_claim))
        .await
        .problem(413, "payload_too_large");

    let fits = message(json!("x".repeat(60 * 1024)));
    let reply = send_raw(&alice, "bob", &fits, &key()).await;
    assert_eq!(reply.status, 201, "60 KiB fits in 64 KiB: {}", reply.text());
    let events = inbox(&server.operator(), "bob").await;
    assert_eq!(events.len(), 1, "the refused body wrote nothing");
}

#[tokio::test]
async fn the_default_limit_is_5_mib() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    server.agent("bob").await;
    let limits = alice.capabilities().await.unwrap().limits;
    assert_eq!(limits.max_body_bytes, 5 * 1024 * 1024);

    let over = message(json!("x".repeat(5 * 1024 * 1024 + 1024)));
    let reply = send_raw(&alice, "bob", &over, &key()).await;
    reply.problem(413, "payload_too_large");
    let under = message(json!("x".repeat(4 * 1024 * 1024)));
    let reply = send_raw(&alice, "bob", &under, &key()).await;
    assert_eq!(
        reply.status,
        201,
        "4 MiB is under the limit: {}",
        reply.text()
    );
    let events = inbox(&server.operator(), "bob").await;
    assert_eq!(events.len(), 1, "only the 4 MiB message was written");
    let stored = events[0]
        .payload
        .as_ref()
        .and_then(Value::as_str)
        .map(str::len);
    assert_eq!(stored, Some(4 * 1024 * 1024), "the payload is stored whole");
}

#[tokio::test]
async fn cross_origin_writes_are_refused_same_origin_passes() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    let create = |name: &str, origin: &str| {
        op.request(Method::POST, "ops/agents")
            .header("origin", origin)
            .json(&json!({"name": name}))
    };
    for origin in [
        "http://evil.example",
        "null",
        "http://127.0.0.1:1",
        "file://",
    ] {
        call(create("evil", origin)).await.problem(403, "forbidden");
    }
    // An agent's send from a web page is refused the same way.
    let send = alice
        .request(Method::POST, "agents/alice/messages")
        .header("idempotency-key", key())
        .header("origin", "http://evil.example")
        .json(&message(json!("csrf")));
    call(send).await.problem(403, "forbidden");

    let same = server.url.clone();
    let reply = call(create("friend", &same)).await;
    assert_eq!(
        reply.status,
        201,
        "same origin {same} passes: {}",
        reply.text()
    );
    // Reads change nothing: a foreign Origin does not block them.
    let read = op
        .request(Method::GET, "ops/agents")
        .header("origin", "http://evil.example");
    assert_eq!(call(read).await.status, 200);
    let mut names: Vec<String> = op
        .agents()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["alice", "friend"],
        "the refused requests created nothing"
    );
    assert!(
        inbox(&op, "alice").await.is_empty(),
        "the refused send wrote nothing"
    );
}
