//! The BOLA matrix (issue 15), generated from the OpenAPI document: every operation
//! is looked up in [`request`], so a new route without a case here fails the test.
//!
//! - Every operation that names an object (in its path, or ids in its body), asked by
//!   another tenant's operator and by another tenant's agent with this tenant's real
//!   ids, answers exactly as with ids that exist nowhere: the same status and the same
//!   body once the ids themselves and the `*_id`/`*_at` values are blanked.
//! - Every operation asked with a token that lacks its scope answers 403: a
//!   `metrics:read` token everywhere, an agent's token on every operator route, a
//!   read-only console session on every mutation and every agent route.
//! - Afterwards this tenant's events, agents, tokens, callbacks, leases, memory and
//!   room are exactly as they were.

use serde_json::{Map, Value, json};
use switchboard_tests::receiver::Receiver;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{
    AcquireLease, ClaimRequest, CreateRoom, RegisterMemory, TokenCreated,
};
use switchboard_tests::sdk::reqwest::{self, Method, StatusCode};
use switchboard_tests::sdk::{Precondition, proto};
use switchboard_tests::{TestServer, key};

use crate::support::{Reply, call, send};
use crate::webhooks::{hooked, registered};

/// What an operation's path and body may name. Names are distinctive, so blanking
/// them in an answer touches nothing else.
#[derive(Debug, Clone)]
struct Ids {
    agent: String,
    event_id: String,
    claim_token: String,
    callback_id: String,
    memory_id: String,
    key: String,
    job_id: i64,
    lease_id: String,
    fencing_token: u64,
    token_id: String,
    room: String,
    /// A pending device login request's user code.
    user_code: String,
}

impl Ids {
    /// Ids of the right shapes that no tenant has.
    fn nowhere() -> Self {
        let uuid = || uuid::Uuid::now_v7().to_string();
        Self {
            agent: "nobody-at-all".into(),
            event_id: uuid(),
            claim_token: uuid(),
            callback_id: uuid(),
            memory_id: uuid(),
            key: "no-such-record-key".into(),
            job_id: 987_654_321_987,
            lease_id: uuid(),
            fencing_token: 1,
            token_id: "0123456789abcdef".into(),
            room: "no-such-room-at-all".into(),
            user_code: "BBBB-BBBB".into(),
        }
    }

    /// The ids by their names in the OpenAPI document (path parameters and body
    /// members).
    fn param(&self, name: &str) -> Option<String> {
        Some(match name {
            "agent" => self.agent.clone(),
            "event_id" => self.event_id.clone(),
            "claim_token" => self.claim_token.clone(),
            "callback_id" => self.callback_id.clone(),
            "memory_id" => self.memory_id.clone(),
            "key" => self.key.clone(),
            "job_id" => self.job_id.to_string(),
            "lease_id" => self.lease_id.clone(),
            "token_id" => self.token_id.clone(),
            "room" => self.room.clone(),
            "user_code" => self.user_code.clone(),
            // Not an id: the same in every request.
            "action" => "replay".into(),
            // A key of the caller's own credential (RFC 8037's example key).
            "jkt" => "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k".into(),
            _ => return None,
        })
    }

    /// Every id that is text, with its name, for blanking in answers (numbers are
    /// blanked where an answer names them: [`comparable`]).
    fn texts(&self) -> Vec<(&'static str, String)> {
        [
            "agent",
            "event_id",
            "claim_token",
            "callback_id",
            "memory_id",
            "key",
            "lease_id",
            "token_id",
            "room",
            "user_code",
        ]
        .into_iter()
        .filter_map(|name| Some((name, self.param(name)?)))
        .collect()
    }
}

/// One operation of the document, ready to send.
struct Request {
    method: Method,
    /// From the root: `/api/v1/…`, or a seed alias `/v1/…`.
    path: String,
    body: Option<Value>,
    headers: Vec<(&'static str, String)>,
}

/// How `template` (a document path) is asked with `ids`, or `None` for an operation
/// this test does not know yet. `names_object` says whether its ids (path or body)
/// name another object, which the cross-tenant half compares.
fn request(method: &Method, template: &str, ids: &Ids) -> Option<(Request, bool)> {
    let path = fill(template, ids)?;
    let msg = json!({"payload": "bola"});
    let claim = json!({"claim_token": ids.claim_token});
    let fencing = vec![("fencing-token", ids.fencing_token.to_string())];
    let settings = json!({"poll_ceiling_ms": 30_000});
    let report = json!({
        "sdk": "bola/1",
        "outbox": {"queued": 0, "sending": 0, "retryable": 0, "sent": 0, "poison": 0, "expired": 0, "expired_removed": 0},
        "inbox": {"mode": "sse", "handled": 0, "acked": 0, "deduplicated": 0, "poisoned": 0},
    });
    // The names-and-leases seed's `/v1` aliases are asked as their `/api/v1` twins.
    let twin = match template.strip_prefix("/v1/") {
        Some(rest) => format!("/api/v1/{rest}"),
        None => template.to_owned(),
    };
    let (body, headers, names_object): (Option<Value>, Vec<(&'static str, String)>, bool) = match (
        method.as_str(),
        twin.as_str(),
    ) {
        // Without ids: only the scope half asks them.
        ("GET", "/api/v1/capabilities")
        | ("GET", "/api/v1/admin/tenants")
        | ("GET", "/api/v1/ops/agents")
        | ("GET", "/api/v1/ops/overview")
        | ("GET", "/api/v1/ops/events")
        | ("GET", "/api/v1/ops/audit")
        | ("GET", "/api/v1/ops/stream")
        | ("GET", "/api/v1/ops/client-reports")
        | ("GET", "/api/v1/ops/client-settings")
        | ("DELETE", "/api/v1/ops/client-settings")
        | ("GET", "/api/v1/ops/fencing-rejections")
        | ("GET", "/api/v1/ops/tokens")
        | ("GET", "/api/v1/ops/device-requests")
        | ("GET", "/api/v1/ops/callbacks")
        | ("GET", "/api/v1/ops/history")
        | ("GET", "/api/v1/ops/jobs")
        | ("GET", "/api/v1/ops/leases")
        | ("GET", "/api/v1/ops/lease-audit")
        | ("GET", "/api/v1/session")
        | ("GET", "/api/v1/keys")
        | ("GET", "/api/v1/ops/signatures")
        | ("DELETE", "/api/v1/session") => (None, vec![], false),
        // A key names the caller's own credential, never another object.
        ("POST", "/api/v1/keys") => (
            Some(json!({"jwk": {"kty": "OKP", "crv": "Ed25519",
                "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}})),
            vec![],
            false,
        ),
        ("DELETE", "/api/v1/keys/{jkt}") => (None, vec![], false),
        ("PUT", "/api/v1/ops/signatures") => (Some(json!({"policy": "optional"})), vec![], false),
        ("POST", "/api/v1/admin/tenants") => (Some(json!({"name": "bola-new"})), vec![], false),
        ("POST", "/api/v1/ops/agents") => (Some(json!({"name": "bola-new"})), vec![], false),
        ("POST", "/api/v1/ops/tokens") => (
            Some(json!({"scopes": ["metrics:read"], "label": "bola-new"})),
            vec![],
            false,
        ),
        ("PUT", "/api/v1/ops/client-settings") => (Some(settings), vec![], false),
        ("POST", "/api/v1/ops/login-links") => (Some(json!({"read_only": true})), vec![], false),
        // A sign-in's consent, denied: no code is made.
        ("POST", "/api/v1/ops/authorizations") => (
            Some(json!({
                "request": "response_type=code&client_id=bola&redirect_uri=http%3A%2F%2F127.0.0.1%3A4%2Fcb\
                            &code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM\
                            &code_challenge_method=S256",
                "allow": false
            })),
            vec![],
            false,
        ),
        ("POST", "/api/v1/ops/names/import") => (
            Some(
                json!({"names": [{"name": "bola-import", "created_at": "2026-01-01T00:00:00Z"}], "dry_run": true}),
            ),
            vec![],
            false,
        ),
        ("POST", "/api/v1/session") => (Some(json!({"token": "x"})), vec![], false),
        ("POST", "/api/v1/rooms") => (Some(json!({"name": "bola-new-room"})), idem(), false),
        ("POST", "/api/v1/memories") => (Some(json!({"label": "bola"})), idem(), false),

        // Ids in the path.
        ("GET", "/api/v1/agents/{agent}/subscribe")
        | ("GET", "/api/v1/agents/{agent}/inbox")
        | ("GET", "/api/v1/agents/{agent}/snapshot")
        | ("GET", "/api/v1/agents/{agent}/client-settings")
        | ("GET", "/api/v1/agents/{agent}/callbacks")
        | ("DELETE", "/api/v1/agents/{agent}/callbacks/{callback_id}")
        | ("GET", "/api/v1/ops/agents/{agent}/client-settings")
        | ("DELETE", "/api/v1/ops/agents/{agent}/client-settings")
        | ("POST", "/api/v1/ops/agents/{agent}/revoke")
        | ("DELETE", "/api/v1/ops/agents/{agent}")
        | ("GET", "/api/v1/ops/events/{event_id}")
        | ("GET", "/api/v1/ops/jobs/{job_id}")
        | ("POST", "/api/v1/ops/jobs/{job_id}/cancel")
        | ("DELETE", "/api/v1/ops/callbacks/{callback_id}")
        | ("GET", "/api/v1/ops/callbacks/{callback_id}/attempts")
        | ("POST", "/api/v1/ops/callbacks/{callback_id}/disable")
        | ("POST", "/api/v1/ops/callbacks/{callback_id}/enable")
        | ("POST", "/api/v1/ops/callbacks/{callback_id}/verify")
        | ("POST", "/api/v1/ops/callbacks/{callback_id}/test")
        | ("POST", "/api/v1/ops/leases/{lease_id}/force-release")
        | ("POST", "/api/v1/ops/tokens/{token_id}/revoke")
        | ("POST", "/api/v1/ops/device-requests/{user_code}/approve")
        | ("POST", "/api/v1/ops/device-requests/{user_code}/deny")
        | ("GET", "/api/v1/memories/{memory_id}")
        | ("GET", "/api/v1/memories/{memory_id}/lineage")
        | ("GET", "/api/v1/memories/{memory_id}/records")
        | ("PUT", "/api/v1/memories/{memory_id}/subscribers/{agent}")
        | ("DELETE", "/api/v1/memories/{memory_id}/subscribers/{agent}")
        | ("GET", "/api/v1/rooms/{room}")
        | ("GET", "/api/v1/rooms/{room}/messages")
        | ("PUT", "/api/v1/rooms/{room}/members/{agent}")
        | ("DELETE", "/api/v1/rooms/{room}/members/{agent}") => (None, idem(), true),
        ("GET", "/api/v1/memories/{memory_id}/records/{key}")
        | ("DELETE", "/api/v1/memories/{memory_id}/records/{key}") => (None, fencing, true),
        ("PUT", "/api/v1/memories/{memory_id}/records/{key}") => {
            (Some(json!({"step": 1})), fencing, true)
        }
        ("POST", "/api/v1/agents/{agent}/messages") | ("POST", "/api/v1/rooms/{room}/messages") => {
            (Some(msg), idem(), true)
        }
        ("POST", "/api/v1/agents/{agent}/callbacks") => (
            Some(
                json!({"url": "https://127.0.0.1:9/hook", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
            ),
            idem(),
            true,
        ),
        ("PUT", "/api/v1/agents/{agent}/client-report") => (Some(report), vec![], true),
        ("PUT", "/api/v1/ops/agents/{agent}/client-settings") => (Some(settings), vec![], true),
        ("POST", "/api/v1/agents/{agent}/inbox/claim") => {
            (Some(json!(ClaimRequest::default())), idem(), true)
        }
        ("POST", "/api/v1/agents/{agent}/inbox/{event_id}/ack")
        | ("POST", "/api/v1/agents/{agent}/inbox/{event_id}/release")
        | ("POST", "/api/v1/agents/{agent}/inbox/{event_id}/extend") => (Some(claim), idem(), true),

        // Ids in the body.
        ("POST", "/api/v1/agents/{agent}/inbox/ack") => (
            Some(json!({"acks": [{"event_id": ids.event_id, "claim_token": ids.claim_token}]})),
            idem(),
            true,
        ),
        ("POST", "/api/v1/ops/bulk/{action}") => {
            (Some(json!({"ids": [ids.event_id]})), idem(), true)
        }
        ("POST", "/api/v1/ops/jobs") => (
            Some(json!({"action": "replay", "ids": [ids.event_id]})),
            idem(),
            true,
        ),
        ("POST", "/api/v1/leases") => (
            Some(
                json!({"name": "bola-lease", "memory_instance_id": ids.memory_id, "ttl_seconds": 30}),
            ),
            idem(),
            true,
        ),
        ("POST", "/api/v1/leases/renew") | ("POST", "/api/v1/leases/release") => (
            Some(json!({"lease_id": ids.lease_id, "fencing_token": ids.fencing_token})),
            idem(),
            true,
        ),
        ("POST", "/api/v1/memories/branch") => (
            Some(
                json!({"parent_memory_instance_id": ids.memory_id, "parent_fencing_token": ids.fencing_token}),
            ),
            idem(),
            true,
        ),
        _ => return None,
    };
    let request = Request {
        method: method.clone(),
        path,
        body,
        headers,
    };
    Some((request, names_object))
}

/// A fresh `Idempotency-Key`, which every mutation may carry.
fn idem() -> Vec<(&'static str, String)> {
    vec![("idempotency-key", key())]
}

/// `template` with its parameters filled from `ids`; `None` for a parameter this
/// test does not know.
fn fill(template: &str, ids: &Ids) -> Option<String> {
    let mut path = template.to_owned();
    while let Some(start) = path.find('{') {
        let end = start + path[start..].find('}')?;
        let value = ids.param(&path[start + 1..end])?;
        path.replace_range(start..=end, &value);
    }
    Some(path)
}

/// Who asks: a server and a bearer token.
struct Caller {
    url: String,
    token: String,
    /// A console session's cookie instead of the bearer token.
    session: Option<String>,
}

impl Caller {
    fn new(server: &TestServer, token: &str) -> Self {
        Self {
            url: server.url.clone(),
            token: token.to_owned(),
            session: None,
        }
    }

    /// A read-only console session `op` opens: a read-only login link, redeemed.
    async fn read_only_session(server: &TestServer, op: &Client) -> Self {
        let link = call(
            op.request(Method::POST, "ops/login-links")
                .json(&json!({"read_only": true})),
        )
        .await;
        assert_eq!(link.status, 201, "{}", link.text());
        let path = link.json()["path"].as_str().expect("path").to_owned();
        let redeemed = call(
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client")
                .get(format!("{}{path}", server.url)),
        )
        .await;
        assert_eq!(redeemed.status, 303, "{}", redeemed.text());
        let cookie = redeemed
            .header("set-cookie")
            .and_then(|c| c.split(';').next())
            .expect("the session cookie")
            .to_owned();
        Self {
            url: server.url.clone(),
            token: String::new(),
            session: Some(cookie),
        }
    }
}

async fn ask(caller: &Caller, request: &Request) -> Reply {
    let mut builder = reqwest::Client::new()
        .request(
            request.method.clone(),
            format!("{}{}", caller.url, request.path),
        )
        // A stream (subscribe) that opened would never end: the test fails then.
        .timeout(std::time::Duration::from_secs(20));
    builder = match &caller.session {
        // The console's requests: the cookie, and the Origin its mutations carry.
        Some(cookie) => builder
            .header("cookie", cookie)
            .header("origin", &caller.url),
        None => builder.bearer_auth(&caller.token),
    };
    for (name, value) in &request.headers {
        builder = builder.header(*name, value);
    }
    if let Some(body) = &request.body {
        builder = builder.json(body);
    }
    call(builder).await
}

/// An answer with the ids it echoes blanked: each of `ids` by its name, and every
/// `*_id`/`*_at` member's value.
fn comparable(reply: &Reply, ids: &Ids) -> (u16, Value) {
    let mut text = reply.text();
    for (name, value) in ids.texts() {
        text = text.replace(&value, &format!("<{name}>"));
    }
    // Numbers are blanked only where an answer names them, never as bare digits.
    for (before, n, name) in [
        ("job ", ids.job_id, "<job_id>"),
        ("/jobs/", ids.job_id, "<job_id>"),
        (
            "fencing token ",
            ids.fencing_token as i64,
            "<fencing_token>",
        ),
    ] {
        text = text.replace(&format!("{before}{n}"), &format!("{before}{name}"));
    }
    let mut body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    blank(&mut body);
    (reply.status, body)
}

fn blank(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, member) in map.iter_mut() {
                if name.ends_with("_id") || name.ends_with("_at") {
                    *member = json!("<blank>");
                } else {
                    blank(member);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank),
        _ => {}
    }
}

/// The operations of the document: (method, path template).
async fn operations(server: &TestServer) -> Vec<(Method, String)> {
    let doc = call(
        switchboard_tests::sdk::reqwest::Client::new()
            .get(format!("{}/api/v1/openapi.json", server.url)),
    )
    .await
    .json();
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            if let Ok(method) = method.to_uppercase().parse::<Method>() {
                ops.push((method, path.clone()));
            }
        }
    }
    assert!(ops.len() > 60, "{} operations in the document", ops.len());
    ops
}

/// Tenant A's objects, one of each kind the document names, with their ids. On the
/// manual clock (`hooked(_, true)`), so no background pass changes them meanwhile.
async fn world(server: &TestServer, receiver: &Receiver) -> Ids {
    let op = server.operator();
    let (callback_id, alice_token) = registered(server, receiver, "alice").await;
    let alice = Client::new(&server.url, alice_token.as_str()).expect("client");
    send(&op, "alice", json!("held")).await;
    send(&op, "alice", json!("waiting")).await;
    let claimed = alice
        .claim(
            "alice",
            &ClaimRequest {
                limit: Some(1),
                ..ClaimRequest::default()
            },
        )
        .await
        .expect("claim");
    let held = &claimed.events[0];

    let memory = alice
        .register_memory(&RegisterMemory {
            memory_instance_id: None,
            label: Some("bola".into()),
        })
        .await
        .expect("memory");
    let (lease, _) = alice
        .acquire_lease(
            &AcquireLease {
                name: "bola-lease".into(),
                display_name: None,
                memory_instance_id: memory.memory_instance_id,
                ttl_seconds: 300.0,
                owner_client: None,
                lock_delay_seconds: None,
            },
            &key(),
        )
        .await
        .expect("lease");
    let record_key = "bola-plan-record";
    alice
        .put_record(
            memory.memory_instance_id,
            record_key,
            &json!({"step": 0}),
            lease.fencing_token,
            Precondition::None,
        )
        .await
        .expect("record");

    let room = "bola-room-of-a";
    op.create_room(&CreateRoom { name: room.into() })
        .await
        .expect("room");
    op.add_member(room, "alice").await.expect("member");
    let job = op
        .start_job(&proto::StartJob {
            action: proto::BulkAction::Replay,
            ids: Some(vec![held.event.event_id]),
            filter: None,
            rate_per_second: None,
        })
        .await
        .expect("job");
    // Settled before anything is compared: the job has nothing left to do.
    for _ in 0..400 {
        let now = op.job(job.job_id).await.expect("job");
        if now.state != proto::JobState::Running {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A device asks to log in as alice, in this (the default) tenant.
    let device = call(
        reqwest::Client::new()
            .post(format!("{}/oauth/device_authorization", server.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("client_id=bola-cli&scope=agent%3Aalice"),
    )
    .await;
    assert_eq!(device.status, 200, "{}", device.text());
    let user_code = device.json()["user_code"]
        .as_str()
        .expect("user_code")
        .to_owned();
    let tokens = op.tokens().await.expect("tokens");
    let token_id = tokens
        .iter()
        .find(|c| c.agent_name.as_deref() == Some("alice"))
        .expect("alice's token")
        .token_id
        .clone();
    Ids {
        agent: "alice".into(),
        user_code,
        event_id: held.event.event_id.to_string(),
        claim_token: held.claim_token.to_string(),
        callback_id,
        memory_id: memory.memory_instance_id.to_string(),
        key: record_key.into(),
        job_id: job.job_id,
        lease_id: lease.lease_id.to_string(),
        fencing_token: lease.fencing_token,
        token_id,
        room: room.into(),
    }
}

/// What tenant A has, as its operator reads it.
async fn state_of(op: &Client, ids: &Ids) -> Map<String, Value> {
    let mut state = Map::new();
    for path in [
        "ops/agents".to_owned(),
        "ops/events".to_owned(),
        "ops/tokens".to_owned(),
        "ops/callbacks".to_owned(),
        "ops/leases".to_owned(),
        "ops/client-settings".to_owned(),
        "ops/device-requests".to_owned(),
        format!("ops/agents/{}/client-settings", ids.agent),
        format!("memories/{}", ids.memory_id),
        format!("rooms/{}", ids.room),
        format!("rooms/{}/messages", ids.room),
    ] {
        let reply = call(op.request(Method::GET, &path)).await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.text());
        state.insert(path, reply.json());
    }
    let record = call(
        op.request(
            Method::GET,
            &format!("memories/{}/records/{}", ids.memory_id, ids.key),
        )
        .header("fencing-token", ids.fencing_token.to_string()),
    )
    .await;
    state.insert("record".into(), json!([record.status, record.json()]));
    state
}

/// A token `op` mints with `scopes`, as a caller.
async fn minted(server: &TestServer, op: &Client, scopes: &[&str], label: &str) -> Caller {
    let reply = call(
        op.request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": scopes, "label": label})),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let token: TokenCreated = serde_json::from_slice(&reply.body).expect("token");
    Caller::new(server, &token.token)
}

#[tokio::test]
async fn another_tenant_gets_what_an_id_of_nowhere_gets_on_every_operation() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(hooked(&receiver, true)).await;
    let op = server.operator();
    let ids = world(&server, &receiver).await;
    let nowhere = Ids::nowhere();
    let before = state_of(&op, &ids).await;

    let (b, b_client) = server.tenant("bola-b").await;
    let b_op = Caller::new(&server, &b.operator_token);
    let b_agent = call(
        b_client
            .request(Method::POST, "ops/agents")
            .json(&json!({"name": "bola-b-agent"})),
    )
    .await;
    assert_eq!(b_agent.status, 201, "{}", b_agent.text());
    let b_agent = Caller::new(&server, b_agent.json()["token"].as_str().expect("token"));

    let ops = operations(&server).await;
    let unknown: Vec<String> = ops
        .iter()
        .filter(|(m, p)| request(m, p, &ids).is_none())
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(
        unknown.is_empty(),
        "operations this matrix does not know (add each to `request`): {unknown:?}"
    );

    let mut compared = 0;
    let mut differences = Vec::new();
    for (method, template) in &ops {
        let Some((real, true)) = request(method, template, &ids) else {
            continue;
        };
        let (fake, _) = request(method, template, &nowhere).expect("known");
        for (who, client) in [("B's operator", &b_op), ("B's agent", &b_agent)] {
            let a = comparable(&ask(client, &real).await, &ids);
            let n = comparable(&ask(client, &fake).await, &nowhere);
            assert!(
                a.0 < 500 && n.0 < 500,
                "{who}: {method} {template}: {a:?} / {n:?}"
            );
            if a != n {
                differences.push(format!(
                    "{who}: {method} {template}: A's ids {a:?}, ids of nowhere {n:?}"
                ));
            }
            compared += 1;
        }
    }
    assert!(compared > 80, "{compared} comparisons");
    settle(
        &differences,
        "another tenant can tell this tenant's ids from ids of nowhere",
        state_of(&op, &ids).await == before,
    );

    // The numbers: B's operator sees in its counters, history and scrape exactly
    // what the operator of a tenant where nothing ever happened sees (I9), while
    // A's own show A's activity.
    let forged = op
        .ack(
            "alice",
            ids.event_id.parse().expect("event id"),
            proto::ClaimToken::new(),
        )
        .await
        .expect_err("a forged claim token");
    assert_eq!(forged.status(), Some(409), "a stale claim rejection in A");
    server.tick().await;
    let (_, c_client) = server.tenant("bola-c").await;
    let b_numbers = numbers(&b_client).await;
    let c_numbers = numbers(&c_client).await;
    let counters = &c_numbers["counters"];
    for name in [
        "delivered_total",
        "fencing_rejections_total",
        "lease_expirations_total",
        "quarantined_total",
        "stale_claim_rejections_total",
    ] {
        assert_eq!(
            counters[name], 0,
            "{name}: a tenant where nothing happened counts nothing: {c_numbers}"
        );
    }
    assert_eq!(
        b_numbers, c_numbers,
        "another tenant's operator sees numbers of its own only"
    );
    let a_numbers = numbers(&op).await;
    assert_ne!(
        a_numbers["counters"], c_numbers["counters"],
        "A's numbers show A's activity: {a_numbers}"
    );
}

/// Every number an operator sees of its tenant's activity, without the tenant's
/// own id: the overview's counters, the history's samples (counters only) and the
/// latency distribution, and every sample of its scrape but the depth of agents and
/// `idempotent_requests_total`: that counts the keyed requests the tenant's own
/// callers sent (here B's, as many with A's ids as with ids of nowhere), which a
/// tenant where nothing happened has not sent.
async fn numbers(op: &Client) -> Value {
    let overview = call(op.request(Method::GET, "ops/overview")).await;
    assert_eq!(overview.status, 200, "{}", overview.text());
    let history = call(op.request(Method::GET, "ops/history")).await;
    assert_eq!(history.status, 200, "{}", history.text());
    let history = history.json();
    let samples: Vec<Value> = history["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|s| {
            json!([
                s["lease_expirations_total"],
                s["stale_claim_rejections_total"],
                s["fencing_rejections_total"],
                s["delivered_total"]
            ])
        })
        .collect();
    let text = op.metrics_text().await.expect("scrape");
    let scrape: Vec<String> = text
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && !l.starts_with("inbox_depth")
                && !l.starts_with("idempotent_requests_total")
        })
        .map(|l| {
            let mut l = l.to_owned();
            // The tenant label's value is the tenant's own id.
            while let Some(start) = l.find("tenant=\"") {
                let end = start + 8 + l[start + 8..].find('"').expect("closing quote");
                l.replace_range(start..=end, "tenant");
            }
            l
        })
        .collect();
    json!({
        "counters": overview.json()["counters"],
        "samples": samples,
        "latency": history["latency"],
        "scrape": scrape,
    })
}

#[tokio::test]
async fn a_token_without_the_scope_gets_403_on_every_operation() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(hooked(&receiver, true)).await;
    let op = server.operator();
    let ids = world(&server, &receiver).await;
    let metrics = minted(&server, &op, &["metrics:read"], "bola-metrics").await;
    // An agent's token: its inbox and sends, no operator scope.
    let (bob, _) = server.agent("bob").await;
    let agent = Caller::new(&server, bob.token.as_str());
    let read_only = Caller::read_only_session(&server, &op).await;
    let before = state_of(&op, &ids).await;

    // Needing no scope: what the server offers any caller, and the session
    // endpoints, which take a token in the body or a cookie (their own tests).
    let open = [
        (Method::GET, "/api/v1/capabilities"),
        (Method::GET, "/v1/capabilities"),
        (Method::POST, "/api/v1/session"),
        (Method::GET, "/api/v1/session"),
        (Method::DELETE, "/api/v1/session"),
    ];
    let mut wrong = Vec::new();
    let mut asked = 0;
    for (method, template) in operations(&server).await {
        if open.iter().any(|(m, p)| *m == method && *p == template) {
            continue;
        }
        let (request, _) = request(&method, &template, &ids)
            .unwrap_or_else(|| panic!("{method} {template} is not in the matrix"));
        let operator =
            template.starts_with("/api/v1/ops/") || template.starts_with("/api/v1/admin/");
        let mut tokens = vec![("a metrics:read", &metrics)];
        if operator {
            tokens.push(("an agent's", &agent));
        }
        // A read-only session reads what operators read; it changes nothing and works
        // no inbox.
        // (It may mint a read-only login link: nobody gets more than they have.)
        let read_only_link = template == "/api/v1/ops/login-links";
        if (method != Method::GET
            || template.starts_with("/api/v1/agents/")
            || template.starts_with("/api/v1/admin/"))
            && !read_only_link
        {
            tokens.push(("a read-only session's", &read_only));
        }
        for (scope, client) in tokens {
            let reply = ask(client, &request).await;
            asked += 1;
            let code =
                serde_json::from_slice::<Value>(&reply.body).unwrap_or_default()["code"].clone();
            if reply.status != StatusCode::FORBIDDEN.as_u16() || code != "forbidden" {
                wrong.push(format!(
                    "{scope} token: {method} {template}: {} {}",
                    reply.status,
                    reply.text()
                ));
            }
        }
    }
    assert!(asked > 70, "{asked} asked");
    settle(
        &wrong,
        "operations a token without their scope did not get 403 on",
        state_of(&op, &ids).await == before,
    );
}

/// Fails with every finding at once, then if this tenant's objects changed.
#[track_caller]
fn settle(findings: &[String], what: &str, unchanged: bool) {
    assert!(findings.is_empty(), "{what}:\n{}", findings.join("\n"));
    assert!(
        unchanged,
        "this tenant's objects changed while others asked"
    );
}

/// Operations that change no state an audit row would name: a callback's verify
/// and test (they only call its endpoint), and a job's cancel (the job's own row
/// records it).
const NO_AUDIT_ROW: &[&str] = &[
    "POST /api/v1/ops/callbacks/{callback_id}/verify",
    "POST /api/v1/ops/callbacks/{callback_id}/test",
    "POST /api/v1/ops/jobs/{job_id}/cancel",
];

/// The operator actions the issue names, which must each be seen to succeed and
/// write their row.
const MUST_AUDIT: &[&str] = &[
    "POST /api/v1/ops/tokens/{token_id}/revoke",
    "POST /api/v1/ops/agents/{agent}/revoke",
    "DELETE /api/v1/ops/agents/{agent}",
    "POST /api/v1/ops/device-requests/{user_code}/approve",
    "POST /api/v1/ops/device-requests/{user_code}/deny",
    "POST /api/v1/admin/tenants",
    "POST /api/v1/ops/callbacks/{callback_id}/disable",
    "POST /api/v1/ops/callbacks/{callback_id}/enable",
    "DELETE /api/v1/ops/callbacks/{callback_id}",
    "POST /api/v1/ops/tokens",
    "POST /api/v1/ops/agents",
    "POST /api/v1/ops/leases/{lease_id}/force-release",
    "PUT /api/v1/ops/client-settings",
    "POST /api/v1/ops/authorizations",
    "POST /api/v1/ops/login-links",
    "PUT /api/v1/ops/signatures",
];

/// The ids of the tenant's audit rows.
async fn audit_ids(op: &Client) -> Vec<i64> {
    let reply = call(op.request(Method::GET, "ops/audit?limit=500")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["id"].as_i64().expect("id"))
        .collect()
}

/// A device's new login request in the default tenant: its user code.
async fn device_code(server: &TestServer) -> String {
    let device = call(
        reqwest::Client::new()
            .post(format!("{}/oauth/device_authorization", server.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("client_id=bola-cli&scope=agent%3Abola-device"),
    )
    .await;
    assert_eq!(device.status, 200, "{}", device.text());
    device.json()["user_code"]
        .as_str()
        .expect("user_code")
        .to_owned()
}

/// Every state-changing operator (and admin) operation of the document, asked with
/// real ids, writes exactly one audit row when it succeeds, in its transaction;
/// the list of actions each succeeds and is audited. The registration of a
/// callback (on the agent's route) too.
#[tokio::test]
async fn every_state_changing_operator_action_writes_one_audit_row() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(hooked(&receiver, true)).await;
    let op = server.operator();
    let mut ids = world(&server, &receiver).await;
    let caller = Caller::new(&server, &server.operator_token);

    let before = audit_ids(&op).await.len();
    let _ = registered(&server, &receiver, "bob").await;
    let reply = call(op.request(Method::GET, "ops/audit?limit=2")).await;
    let newest: Vec<String> = reply.json()["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["action"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        (audit_ids(&op).await.len(), newest),
        (
            before + 2,
            vec!["callback_registered".to_owned(), "agent_created".to_owned()]
        ),
        "making bob and registering his callback write a row each"
    );

    let mut mutations: Vec<(Method, String)> = operations(&server)
        .await
        .into_iter()
        .filter(|(m, p)| {
            *m != Method::GET && (p.starts_with("/api/v1/ops/") || p.starts_with("/api/v1/admin/"))
        })
        .collect();
    // What ends alice's credentials or alice herself goes last.
    let last = |p: &str| p.ends_with("/revoke") || *p == *"/api/v1/ops/agents/{agent}";
    // Settings are set before they are cleared, so the clearing changes something.
    mutations.sort_by_key(|(m, p)| (last(p), p.contains("{agent}"), *m == Method::DELETE));
    let mut audited = Vec::new();
    for (method, template) in &mutations {
        let name = format!("{method} {template}");
        if template.ends_with("/deny") || template.ends_with("/approve") {
            ids.user_code = device_code(&server).await;
        }
        let Some((mut request, _)) = request(method, template, &ids) else {
            panic!("{name} is not known to the matrix");
        };
        // The matrix asks some harmlessly (a denied consent, a dry run): here
        // they are asked to change something.
        match template.as_str() {
            "/api/v1/ops/authorizations" => {
                if let Some(Value::Object(body)) = &mut request.body {
                    body.insert("allow".into(), json!(true));
                }
            }
            "/api/v1/ops/names/import" => {
                if let Some(Value::Object(body)) = &mut request.body {
                    body.insert("dry_run".into(), json!(false));
                }
            }
            _ => {}
        }
        let before = audit_ids(&op).await;
        let reply = ask(&caller, &request).await;
        let after = audit_ids(&op).await;
        if !(200..300).contains(&reply.status) {
            continue;
        }
        // A revocation that found nothing live changed nothing: no row.
        let changed_nothing = template.ends_with("/revoke")
            && serde_json::from_slice::<Value>(&reply.body)
                .ok()
                .is_some_and(|body| body.get("revoked") == Some(&json!(0)));
        let expected = usize::from(!NO_AUDIT_ROW.contains(&name.as_str()) && !changed_nothing);
        assert_eq!(
            after.len() - before.len(),
            expected,
            "{name} answered {} and wrote {} audit rows",
            reply.status,
            after.len() - before.len()
        );
        audited.push(name);
    }
    for must in MUST_AUDIT {
        assert!(
            audited.iter().any(|a| a == must),
            "{must} was not seen to succeed and be audited; audited: {audited:?}"
        );
    }
}
