//! I9 isolation and authentication over real HTTP.
//!
//! Only one tenant exists today (the one of the server's operator token), so these
//! tests check isolation *between agents* of that tenant, which uses the same rule as
//! between tenants: a token that may not use an inbox gets the very same 404 as for an
//! inbox that does not exist, so it cannot learn that the agent exists.

use serde_json::{Value, json};
use switchboard_tests::TestServer;
use switchboard_tests::sdk::proto::{ClaimRequest, ClaimToken, EventId, ExtendRequest};
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::sdk::{Client, SseEvent};

use crate::support::{Reply, call, inbox, next_event, send};

/// Every agent endpoint aimed at `agent`, with `event`/`token` for the event actions.
fn agent_endpoints(
    agent: &str,
    event: EventId,
    token: ClaimToken,
) -> Vec<(&'static str, Method, String, Option<Value>)> {
    let base = format!("agents/{agent}");
    let ev = format!("{base}/inbox/{event}");
    vec![
        ("subscribe", Method::GET, format!("{base}/subscribe"), None),
        ("inbox", Method::GET, format!("{base}/inbox"), None),
        ("snapshot", Method::GET, format!("{base}/snapshot"), None),
        (
            "client settings",
            Method::GET,
            format!("{base}/client-settings"),
            None,
        ),
        (
            "claim",
            Method::POST,
            format!("{base}/inbox/claim"),
            Some(json!({})),
        ),
        (
            "ack",
            Method::POST,
            format!("{ev}/ack"),
            Some(json!({"claim_token": token})),
        ),
        (
            "release",
            Method::POST,
            format!("{ev}/release"),
            Some(json!({"claim_token": token})),
        ),
        (
            "extend",
            Method::POST,
            format!("{ev}/extend"),
            Some(json!({"claim_token": token})),
        ),
    ]
}

async fn hit(client: &Client, method: Method, path: &str, body: Option<&Value>) -> Reply {
    let mut request = client.request(method, path);
    if let Some(body) = body {
        request = request.json(body);
    }
    call(request).await
}

/// The parts of a 404 that must not tell "foreign" from "unknown": everything but the
/// name echoed from the URL.
fn comparable(doc: &Value, name: &str) -> Value {
    let mut doc = doc.clone();
    let detail = doc["detail"]
        .as_str()
        .unwrap_or("")
        .replace(name, "<agent>");
    doc["detail"] = json!(detail);
    doc
}

#[tokio::test]
async fn foreign_inbox_answers_exactly_like_an_unknown_one() {
    let server = TestServer::start().await;
    let (alice_info, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send(&server.operator(), "alice", json!("alice's work")).await;
    let claimed = alice
        .claim("alice", &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    let (event, token) = (claimed.event.event_id, claimed.claim_token);

    let alice_id = alice_info.agent_id.to_string();
    for (foreign, unknown) in [
        ("alice", "nobody"),
        (alice_id.as_str(), "0190c0de-0000-7000-8000-000000000000"),
    ] {
        let targets = agent_endpoints(foreign, event, token)
            .into_iter()
            .zip(agent_endpoints(unknown, event, token));
        for ((what, method, path, body), (_, _, unknown_path, _)) in targets {
            let seen = hit(&bob, method.clone(), &path, body.as_ref()).await;
            let doc = seen.problem(404, "not_found");
            let none = hit(&bob, method, &unknown_path, body.as_ref()).await;
            let none_doc = none.problem(404, "not_found");
            assert_eq!(
                comparable(&doc, foreign),
                comparable(&none_doc, unknown),
                "{what}: a foreign inbox must look exactly like a missing one"
            );
        }
    }

    // Bob's attempts changed nothing: alice's claim is intact and hers to finish.
    let events = inbox(&alice, "alice").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].attempts, 1, "bob's claim must not have counted");
    let acked = alice
        .ack("alice", event, token)
        .await
        .expect("alice still holds it");
    assert_eq!(acked.status.as_str(), "completed");
}

#[tokio::test]
async fn a_claim_token_does_not_open_another_agents_event() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send(&server.operator(), "alice", json!("alice's work")).await;
    let claimed = alice
        .claim("alice", &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    let (event, token) = (claimed.event.event_id, claimed.claim_token);

    // Through bob's own inbox, with alice's event id and her valid token.
    for action in ["ack", "release", "extend"] {
        let path = format!("agents/bob/inbox/{event}/{action}");
        let body = json!({"claim_token": token});
        let stolen = hit(&bob, Method::POST, &path, Some(&body)).await;
        let doc = stolen.problem(404, "not_found");
        let path = format!("agents/bob/inbox/{}/{action}", EventId::new());
        let missing = hit(&bob, Method::POST, &path, Some(&body)).await;
        let missing_doc = missing.problem(404, "not_found");
        assert_eq!(doc["title"], missing_doc["title"], "{action}");
        assert_eq!(doc["type"], missing_doc["type"], "{action}");
    }
    let extend = ExtendRequest {
        claim_token: token,
        lease_seconds: Some(120),
    };
    alice
        .extend("alice", event, &extend)
        .await
        .expect("the owner's token still works");
    alice.ack("alice", event, token).await.expect("and acks");
}

#[tokio::test]
async fn agent_tokens_are_forbidden_on_the_operator_api() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    send(&server.operator(), "alice", json!("keep me")).await;

    let cases: [(Method, &str, Option<Value>); 10] = [
        (Method::GET, "ops/overview", None),
        (Method::GET, "ops/agents", None),
        (Method::POST, "ops/agents", Some(json!({"name": "mallory"}))),
        (Method::GET, "ops/events", None),
        (Method::GET, "ops/audit", None),
        (Method::GET, "ops/stream", None),
        (Method::POST, "ops/bulk/purge", Some(json!({"filter": {}}))),
        (Method::POST, "ops/bulk/replay", Some(json!({"filter": {}}))),
        (Method::POST, "rooms", Some(json!({"name": "mine"}))),
        (Method::PUT, "rooms/any/members/alice", None),
    ];
    for (method, path, body) in cases {
        let reply = hit(&alice, method.clone(), path, body.as_ref()).await;
        reply.problem(403, "forbidden");
        assert!(reply.status < 500, "{method} {path}");
    }
    let op = server.operator();
    let events = inbox(&op, "alice").await;
    assert_eq!(
        events[0].payload,
        Some(json!("keep me")),
        "the purge did not run"
    );
    assert!(
        op.agents()
            .await
            .unwrap()
            .iter()
            .all(|a| a.name != "mallory")
    );
}

#[tokio::test]
async fn missing_or_unknown_credentials_are_401() {
    let server = TestServer::start().await;
    server.agent("alice").await;
    let http = reqwest::Client::new();
    let paths = [
        (Method::GET, "/api/v1/agents/alice/inbox"),
        (Method::GET, "/api/v1/agents/alice/subscribe"),
        (Method::GET, "/api/v1/ops/overview"),
        (Method::POST, "/api/v1/agents/alice/messages"),
        (Method::POST, "/api/v1/agents/alice/inbox/claim"),
    ];
    let authorizations = [
        None,
        Some("Bearer sb_ag_not-a-real-token".to_owned()),
        Some(format!("Bearer {}x", server.operator_token)),
        Some(format!("Basic {}", server.operator_token)),
        Some("Bearer ".to_owned()),
    ];
    for (method, path) in &paths {
        for authorization in &authorizations {
            let mut request = http
                .request(method.clone(), format!("{}{path}", server.url))
                .header("idempotency-key", "k")
                .json(&json!({"payload": 1}));
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            let reply = call(request).await;
            let doc = reply.problem(401, "unauthorized");
            let shown = authorization.as_deref().unwrap_or("(none)");
            assert_eq!(
                reply.header("www-authenticate"),
                Some("Bearer"),
                "RFC 9110: a 401 names the scheme to use ({method} {path}, {shown})"
            );
            assert!(
                !reply.text().contains(&server.operator_token),
                "{method} {path} with {shown}: a credential echoed in {doc}"
            );
        }
    }
    let op = server.operator();
    assert!(
        inbox(&op, "alice").await.is_empty(),
        "no unauthenticated send landed"
    );
}

#[tokio::test]
async fn the_operator_may_work_any_inbox_of_its_tenant() {
    let server = TestServer::start().await;
    let (alice_info, _) = server.agent("alice").await;
    let op = server.operator();
    let mut stream = op.subscribe("alice").await.expect("operator subscribes");
    let first = next_event(&mut stream, SseEvent::INBOX_UPDATED).await;
    assert_eq!(first["cursor_hint"], 0);
    let receipt = send(&op, "alice", json!("for alice")).await;
    assert_eq!(
        next_event(&mut stream, SseEvent::INBOX_UPDATED).await["cursor_hint"],
        1
    );

    let page = op.poll("alice", 0, None).await.expect("operator polls");
    assert_eq!(page.events[0].event_id, receipt.event_id);
    // By id as well as by name.
    let by_id = alice_info.agent_id.to_string();
    let claimed = op
        .claim(&by_id, &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    let extend = ExtendRequest {
        claim_token: claimed.claim_token,
        lease_seconds: Some(30),
    };
    op.extend("alice", receipt.event_id, &extend).await.unwrap();
    op.ack("alice", receipt.event_id, claimed.claim_token)
        .await
        .unwrap();
    let snapshot = op.snapshot("alice").await.unwrap();
    assert_eq!((snapshot.head_cursor, snapshot.counts.completed), (1, 1));
}
