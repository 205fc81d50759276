//! I9 isolation and authentication over real HTTP.
//!
//! Between agents of one tenant and between tenants the rule is the same: a token
//! that may not use an inbox gets the very same 404 as for an inbox that does not
//! exist, so it cannot learn that the agent exists. Another tenant's operator, who
//! may work every inbox of its own tenant, is as blind to this one as an agent.

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

/// Every agent endpoint aimed at alice (by name and by id) answers `intruder`
/// exactly as for an agent that does not exist.
async fn looks_missing(intruder: &Client, alice_id: &str, event: EventId, token: ClaimToken) {
    for (foreign, unknown) in [
        ("alice", "nobody"),
        (alice_id, "0190c0de-0000-7000-8000-000000000000"),
    ] {
        let targets = agent_endpoints(foreign, event, token)
            .into_iter()
            .zip(agent_endpoints(unknown, event, token));
        for ((what, method, path, body), (_, _, unknown_path, _)) in targets {
            let seen = hit(intruder, method.clone(), &path, body.as_ref()).await;
            let doc = seen.problem(404, "not_found");
            let none = hit(intruder, method, &unknown_path, body.as_ref()).await;
            let none_doc = none.problem(404, "not_found");
            assert_eq!(
                comparable(&doc, foreign),
                comparable(&none_doc, unknown),
                "{what}: a foreign inbox must look exactly like a missing one"
            );
        }
    }
}

/// Alice of the default tenant with one event she has claimed: the event and
/// her claim token.
async fn alice_holding_work(server: &TestServer) -> (String, Client, EventId, ClaimToken) {
    let (alice_info, alice) = server.agent("alice").await;
    send(&server.operator(), "alice", json!("alice's work")).await;
    let claimed = alice
        .claim("alice", &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    (
        alice_info.agent_id.to_string(),
        alice,
        claimed.event.event_id,
        claimed.claim_token,
    )
}

/// I9 across tenants: another tenant's operator and its agent get, for this
/// tenant's agent and event, what they get for ones that do not exist, and their
/// operator API (lists, bulk actions) neither shows nor touches this tenant's work.
#[tokio::test]
async fn another_tenant_sees_and_touches_nothing_of_this_one() {
    let server = TestServer::start().await;
    let (alice_id, alice, event, token) = alice_holding_work(&server).await;
    let (_, op_b) = server.tenant("team-b").await;
    let carol = op_b
        .create_agent(&switchboard_tests::sdk::proto::CreateAgent {
            name: "carol".to_owned(),
        })
        .await
        .expect("tenant b's agent");
    let carol = Client::new(&server.url, carol.token.as_str()).unwrap();

    looks_missing(&op_b, &alice_id, event, token).await;
    looks_missing(&carol, &alice_id, event, token).await;

    let seen = hit(&op_b, Method::GET, &format!("ops/events/{event}"), None).await;
    let none = hit(
        &op_b,
        Method::GET,
        &format!("ops/events/{}", EventId::new()),
        None,
    )
    .await;
    assert_eq!(
        seen.problem(404, "not_found")["title"],
        none.problem(404, "not_found")["title"]
    );
    let listed = hit(&op_b, Method::GET, "ops/events", None).await.json();
    assert_eq!(listed["events"], json!([]), "{listed}");
    let agents: Vec<String> = op_b
        .agents()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(agents, ["carol"]);
    for action in ["purge", "release", "replay"] {
        for body in [json!({"filter": {}}), json!({"ids": [event]})] {
            let path = format!("ops/bulk/{action}");
            let reply = hit(&op_b, Method::POST, &path, Some(&body)).await;
            assert_eq!(reply.status, 200, "{action} {body}: {}", reply.text());
            assert_eq!(reply.json()["affected"], 0, "{action} {body}");
        }
    }

    // Nothing of tenant b's reached alice's claim.
    let events = inbox(&alice, "alice").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].attempts, 1);
    alice
        .ack("alice", event, token)
        .await
        .expect("alice still holds it");
}

#[tokio::test]
async fn foreign_inbox_answers_exactly_like_an_unknown_one() {
    let server = TestServer::start().await;
    let (alice_id, alice, event, token) = alice_holding_work(&server).await;
    let (_, bob) = server.agent("bob").await;

    looks_missing(&bob, &alice_id, event, token).await;

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
    let (_, alice, event, token) = alice_holding_work(&server).await;
    let (_, bob) = server.agent("bob").await;

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
