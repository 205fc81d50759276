//! Error answers: every refusal is an RFC 9457 problem with a stable code, and no bad
//! input makes the server answer 5xx.
//!
//! A *case* is one bad request with the status and code it must get, and for range
//! errors the `field` member naming the offending field.

use serde_json::{Value, json};
use switchboard_tests::sdk::proto::{ClaimToken, EventId};
use switchboard_tests::sdk::reqwest::{Method, RequestBuilder};
use switchboard_tests::{TestServer, key};

use crate::support::{Reply, call, inbox, send};

/// Well-formed JSON of the wrong shape (unknown field, wrong type, missing field) or
/// with unacceptable values.
const SHAPE: (u16, &str) = (422, "validation_failed");
/// Not JSON at all.
const SYNTAX: (u16, &str) = (400, "malformed_json");
/// A bad query parameter, path segment or semantic check.
const INVALID: (u16, &str) = (400, "validation_failed");
const NOT_FOUND: (u16, &str) = (404, "not_found");
const METHOD: (u16, &str) = (405, "method_not_allowed");
const MEDIA: (u16, &str) = (415, "unsupported_media_type");
const NAME: (u16, &str) = (422, "name_invalid");

struct Case {
    what: &'static str,
    want: (u16, &'static str),
    field: Option<&'static str>,
    request: RequestBuilder,
}

fn case(what: &'static str, want: (u16, &'static str), request: RequestBuilder) -> Case {
    Case {
        what,
        want,
        field: None,
        request,
    }
}

/// An out-of-range number: 422 `validation_failed` naming `field`.
fn range(what: &'static str, field: &'static str, request: RequestBuilder) -> Case {
    Case {
        field: Some(field),
        ..case(what, SHAPE, request)
    }
}

/// Sends every case; fails listing each case that got a wrong answer, and at once on
/// any 5xx.
async fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in cases {
        let reply = call(case.request).await;
        assert!(
            reply.status < 500,
            "{}: HTTP {} {}",
            case.what,
            reply.status,
            reply.text()
        );
        if let Err(e) = check(&reply, case.want, case.field) {
            failures.push(format!("{}: {e}", case.what));
        }
    }
    assert!(
        failures.is_empty(),
        "cases failed:\n{}",
        failures.join("\n")
    );
}

/// One case's verdict: status, media type, the RFC 9457 members with `status` equal
/// to the HTTP status, the code, and the field of range errors.
fn check(reply: &Reply, (status, code): (u16, &str), field: Option<&str>) -> Result<(), String> {
    if reply.status != status {
        let got = reply.status;
        return Err(format!("HTTP {got} (want {status}): {}", reply.text()));
    }
    let content_type = reply.header("content-type").unwrap_or("");
    if !content_type.starts_with("application/problem+json") {
        return Err(format!("content type {content_type:?}: {}", reply.text()));
    }
    let doc: Value = serde_json::from_slice(&reply.body).map_err(|e| format!("not JSON: {e}"))?;
    for member in ["type", "title", "detail", "code"] {
        if doc[member].as_str().is_none_or(str::is_empty) {
            return Err(format!("member {member:?} missing or not a string: {doc}"));
        }
    }
    if doc["status"].as_u64() != Some(u64::from(reply.status)) {
        return Err(format!("`status` differs from the HTTP status: {doc}"));
    }
    if doc["code"] != code {
        return Err(format!("code {} (want {code}): {doc}", doc["code"]));
    }
    if let Some(field) = field
        && doc["field"] != field
    {
        return Err(format!("range errors name the field {field:?}: {doc}"));
    }
    Ok(())
}

#[tokio::test]
async fn bad_bodies_get_problem_documents_never_a_500() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    server.agent("bob").await;
    let post = |path: &str| alice.request(Method::POST, path);
    let send_req = || post("agents/bob/messages").header("idempotency-key", key());
    let send_to = |body: Value| send_req().json(&body);
    let text = |request: RequestBuilder, content_type: &str, body: &'static str| {
        request.header("content-type", content_type).body(body)
    };
    let send_text = |body: &'static str| text(send_req(), "application/json", body);
    let claim = |body: Value| post("agents/alice/inbox/claim").json(&body);
    let (event, token) = (EventId::new(), ClaimToken::new());
    let on_event = |action: &str, mut body: Value| {
        body["claim_token"] = json!(token);
        post(&format!("agents/alice/inbox/{event}/{action}")).json(&body)
    };
    let ack = format!("agents/alice/inbox/{event}/ack");
    let past = "2001-01-01T00:00:00Z";
    let long_corr = "c".repeat(257);

    let cases = vec![
        case("send: truncated", SYNTAX, send_text("{\"payload\":")),
        case("send: not JSON", SYNTAX, send_text("payload=1")),
        case(
            "send: unknown field",
            SHAPE,
            send_to(json!({"payload": 1, "x": 2})),
        ),
        case(
            "send: wrong type",
            SHAPE,
            send_to(json!({"payload": 1, "priority": "1"})),
        ),
        case("send: no payload", SHAPE, send_to(json!({}))),
        case("send: a string", SHAPE, send_to(json!("payload"))),
        range(
            "send: priority 1001",
            "priority",
            send_to(json!({"payload": 1, "priority": 1001})),
        ),
        range(
            "send: priority -1001",
            "priority",
            send_to(json!({"payload": 1, "priority": -1001})),
        ),
        range(
            "send: attempts 0",
            "max_attempts",
            send_to(json!({"payload": 1, "max_attempts": 0})),
        ),
        range(
            "send: attempts 101",
            "max_attempts",
            send_to(json!({"payload": 1, "max_attempts": 101})),
        ),
        case(
            "send: correlation 257 B",
            SHAPE,
            send_to(json!({"payload": 1, "correlation_id": long_corr})),
        ),
        case(
            "send: expired",
            SHAPE,
            send_to(json!({"payload": 1, "expires_at": past})),
        ),
        case(
            "send: text/plain",
            MEDIA,
            text(send_req(), "text/plain", "{\"payload\":1}"),
        ),
        case(
            "claim: truncated",
            SYNTAX,
            text(post("agents/alice/inbox/claim"), "application/json", "{"),
        ),
        case(
            "claim: unknown field",
            SHAPE,
            claim(json!({"limit": 1, "lease": 5})),
        ),
        case("claim: wrong type", SHAPE, claim(json!({"limit": "one"}))),
        case("claim: negative", SHAPE, claim(json!({"limit": -1}))),
        range("claim: limit 0", "limit", claim(json!({"limit": 0}))),
        range("claim: limit 101", "limit", claim(json!({"limit": 101}))),
        range(
            "claim: lease 0",
            "lease_seconds",
            claim(json!({"lease_seconds": 0})),
        ),
        range(
            "claim: lease 43201",
            "lease_seconds",
            claim(json!({"lease_seconds": 43201})),
        ),
        case(
            "claim: form body",
            MEDIA,
            text(
                post("agents/alice/inbox/claim"),
                "application/x-www-form-urlencoded",
                "limit=1",
            ),
        ),
        range(
            "release: delay 43201",
            "delay_seconds",
            on_event("release", json!({"delay_seconds": 43201})),
        ),
        case(
            "release: delay -1",
            SHAPE,
            on_event("release", json!({"delay_seconds": -1})),
        ),
        case(
            "release: error 4097 B",
            SHAPE,
            on_event("release", json!({"error": "e".repeat(4097)})),
        ),
        range(
            "extend: lease 0",
            "lease_seconds",
            on_event("extend", json!({"lease_seconds": 0})),
        ),
        case("ack: no token", SHAPE, post(&ack).json(&json!({}))),
        case(
            "ack: token not a uuid",
            SHAPE,
            post(&ack).json(&json!({"claim_token": "abc"})),
        ),
        case(
            "ack: event not a uuid",
            INVALID,
            post("agents/alice/inbox/nope/ack").json(&json!({"claim_token": token})),
        ),
        case("ack: unknown event", NOT_FOUND, on_event("ack", json!({}))),
    ];
    run(cases).await;
    assert!(
        inbox(&server.operator(), "bob").await.is_empty(),
        "no refused send was written"
    );
}

#[tokio::test]
async fn bad_queries_routes_methods_and_names_get_problem_documents() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    server.agent("bob").await;
    let op = server.operator();
    send(&op, "bob", json!("bob's head is 1")).await;
    let get = |path: &str| alice.request(Method::GET, path);
    let op_get = |path: &str| op.request(Method::GET, path);
    let create = |name: &str| {
        op.request(Method::POST, "ops/agents")
            .json(&json!({"name": name}))
    };
    let bulk = |action: &str, body: Value| {
        op.request(Method::POST, &format!("ops/bulk/{action}"))
            .json(&body)
    };
    let unknown_event = format!("ops/events/{}", EventId::new());
    let uuid = "0190c0de-0000-7000-8000-000000000000";

    let cases = vec![
        range("poll: limit 0", "limit", get("agents/alice/inbox?limit=0")),
        range(
            "poll: limit 1001",
            "limit",
            get("agents/alice/inbox?limit=1001"),
        ),
        case(
            "poll: after_cursor=abc",
            INVALID,
            get("agents/alice/inbox?after_cursor=abc"),
        ),
        case(
            "poll: after_cursor=-1",
            INVALID,
            get("agents/alice/inbox?after_cursor=-1"),
        ),
        case(
            "poll: past the head",
            INVALID,
            op_get("agents/bob/inbox?after_cursor=2"),
        ),
        case(
            "poll: unknown parameter",
            INVALID,
            get("agents/alice/inbox?cursor=1"),
        ),
        range("events: limit 0", "limit", op_get("ops/events?limit=0")),
        case(
            "events: unknown status",
            INVALID,
            op_get("ops/events?status=lost"),
        ),
        case(
            "events: after not an id",
            INVALID,
            op_get("ops/events?after=nope"),
        ),
        case("event: not an id", INVALID, op_get("ops/events/nope")),
        case("event: unknown", NOT_FOUND, op_get(&unknown_event)),
        range("audit: limit 0", "limit", op_get("ops/audit?limit=0")),
        case(
            "bulk: unknown action",
            INVALID,
            bulk("delete", json!({"ids": []})),
        ),
        case("bulk: no ids, no filter", SHAPE, bulk("purge", json!({}))),
        case(
            "bulk: unknown status",
            SHAPE,
            bulk("purge", json!({"filter": {"status": "x"}})),
        ),
        case("name: empty", NAME, create("")),
        case("name: 65 chars", NAME, create(&"a".repeat(65))),
        case("name: space", NAME, create("has space")),
        case("name: non-ASCII", NAME, create("zoë")),
        case("name: UUID", NAME, create(uuid)),
        case("name: taken", (409, "conflict"), create("alice")),
        case(
            "room name: slash",
            NAME,
            op.request(Method::POST, "rooms")
                .json(&json!({"name": "a/b"})),
        ),
        case("route: unknown", NOT_FOUND, get("nope")),
        case(
            "route: below an agent",
            NOT_FOUND,
            get("agents/alice/inbox/claim/more"),
        ),
        case("method: GET messages", METHOD, get("agents/bob/messages")),
        case("method: GET claim", METHOD, get("agents/alice/inbox/claim")),
        case(
            "method: DELETE overview",
            METHOD,
            op.request(Method::DELETE, "ops/overview"),
        ),
        case(
            "method: POST capabilities",
            METHOD,
            op.request(Method::POST, "capabilities").json(&json!({})),
        ),
    ];
    run(cases).await;
    // RFC 9110 §15.5.6: a 405 lists the allowed methods.
    let wrong = call(get("agents/bob/messages")).await;
    assert_eq!(wrong.header("allow"), Some("POST"), "405 carries Allow");
    let names: Vec<String> = op
        .agents()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["alice", "bob"], "no refused agent was created");
}
