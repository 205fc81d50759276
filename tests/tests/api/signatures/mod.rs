//! Signed agent requests (issue 39), over real HTTP on every backend: RFC 9421
//! signatures with Ed25519 keys bound to the credential they were presented with.
//!
//! Attacks are made by hand (headers signed for one request sent with another, a
//! body changed after signing, a nonce sent twice, a time outside the window, a
//! stolen token without its key); the happy paths go through the SDK, which signs
//! by itself when it holds a key.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{ClaimRequest, ReleaseRequest, SendMessage};
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::sdk::signing::SigningKey;
use switchboard_tests::{Options, TestServer};
use switchboard_webhook::agent;

use crate::oauth::{exchange, part};
use crate::support::{Reply, call, send};

mod interop;
mod logins;

/// Now on the wall clock, in Unix seconds (the servers here run on it).
pub(super) fn now_s() -> i64 {
    switchboard_tests::wall_ms() / 1000
}

/// A request made and signed by hand: `created` and `nonce` are the test's.
struct Signed<'a> {
    server: &'a TestServer,
    bearer: &'a str,
    key: &'a SigningKey,
    method: Method,
    /// Under `/api/v1/`.
    path: String,
    body: Option<Value>,
    created: i64,
    nonce: String,
    /// `Idempotency-Key`, sent but not covered (nothing requires it to be).
    idempotency_key: Option<String>,
    /// The `@authority` signed, when not the server's address.
    authority: Option<String>,
}

impl<'a> Signed<'a> {
    fn new(server: &'a TestServer, bearer: &'a str, key: &'a SigningKey, path: &str) -> Self {
        Self {
            server,
            bearer,
            key,
            method: Method::POST,
            path: format!("/api/v1/{path}"),
            body: None,
            created: now_s(),
            nonce: agent::new_nonce(),
            idempotency_key: None,
            authority: None,
        }
    }

    fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// The headers a signature of this request puts on it (with Authorization and
    /// Content-Type, which it covers or sends).
    fn headers(&self) -> reqwest::header::HeaderMap {
        let url = reqwest::Url::parse(&self.server.url).expect("server URL");
        let authority = self
            .authority
            .clone()
            .unwrap_or_else(|| format!("{}:{}", url.host_str().unwrap(), url.port().unwrap()));
        let body = self.body_bytes();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            "authorization",
            format!("Bearer {}", self.bearer).parse().unwrap(),
        );
        if !body.is_empty() {
            headers.insert("content-type", "application/json".parse().unwrap());
        }
        if let Some(key) = &self.idempotency_key {
            headers.insert("idempotency-key", key.parse().unwrap());
        }
        let view = agent::Request {
            method: self.method.as_str(),
            authority: &authority,
            path_and_query: &self.path,
            headers: &headers,
            body: &body,
        };
        let jkt = self.key.public_key().thumbprint();
        for (name, value) in agent::sign(self.key, &jkt, &view, self.created, &self.nonce) {
            headers.insert(name, value.parse().unwrap());
        }
        headers
    }

    fn body_bytes(&self) -> Vec<u8> {
        self.body
            .as_ref()
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default()
    }

    /// Sends `headers` (made by [`headers`](Self::headers), perhaps of another
    /// request) with this request's method, path and `body`.
    async fn send_with(
        &self,
        to: &TestServer,
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    ) -> Reply {
        call(
            reqwest::Client::new()
                .request(self.method.clone(), format!("{}{}", to.url, self.path))
                .headers(headers)
                .body(body),
        )
        .await
    }

    async fn send(&self) -> Reply {
        self.send_with(self.server, self.headers(), self.body_bytes())
            .await
    }
}

/// An agent whose static token is bound to a new key, and a client that signs.
async fn bound_agent(server: &TestServer, name: &str) -> (String, SigningKey, Client) {
    let (created, unsigned) = server.agent(name).await;
    let key = SigningKey::generate();
    let view = unsigned
        .register_key(&key.public_key())
        .await
        .expect("the first key is registered without a signature");
    assert_eq!(view.jkt, key.public_key().thumbprint());
    assert!(view.binds_credential);
    let client = Client::builder()
        .signing_key(Some(key.clone()))
        .build(&server.url, created.token.as_str())
        .unwrap();
    (created.token.to_string(), key, client)
}

/// One event sent to `agent` and claimed by it: its id and claim token.
async fn claimed(server: &TestServer, client: &Client, agent: &str) -> (String, String) {
    send(&server.operator(), agent, json!({"n": 1})).await;
    let claim = client
        .claim(
            agent,
            &ClaimRequest {
                limit: Some(1),
                ..Default::default()
            },
        )
        .await
        .expect("a signed claim");
    let event = &claim.events[0];
    (
        event.event.event_id.to_string(),
        event.claim_token.to_string(),
    )
}

#[tokio::test]
async fn a_key_binds_its_credential_and_the_sdk_signs_every_request() {
    let server = TestServer::start().await;
    let (token, key, client) = bound_agent(&server, "signer").await;

    // The same token without a signature is refused, reads included, whatever the
    // policy (the tenant's is the default, optional): the request says what to sign.
    let unsigned = Client::new(&server.url, token.as_str()).unwrap();
    let reply = call(unsigned.request(Method::GET, "agents/signer/inbox")).await;
    reply.problem(401, "signature_required");
    let accept = reply.header("accept-signature").expect("Accept-Signature");
    assert!(
        accept.contains("\"@method\"") && accept.contains("alg=\"ed25519\""),
        "{accept}"
    );

    // The SDK signs each attempt: sends, claims, acks, the SSE stream.
    let (event, claim_token) = claimed(&server, &client, "signer").await;
    client
        .ack(
            "signer",
            event.parse().unwrap(),
            claim_token.parse().unwrap(),
        )
        .await
        .expect("a signed ack");
    client
        .send_message(
            "signer",
            &SendMessage {
                payload: json!({"to": "self"}),
                ..Default::default()
            },
            &switchboard_tests::key(),
        )
        .await
        .expect("a signed send");
    let mut stream = client.subscribe("signer").await.expect("a signed stream");
    crate::support::next_event(&mut stream, "inbox_updated").await;

    // The server lists the key, and an operator sees it.
    let keys = client.keys().await.expect("its keys");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].jkt, key.public_key().thumbprint());
    let overview = server.operator().signatures().await.expect("overview");
    assert_eq!(overview.policy, "optional");
    let mine = overview.agents.iter().find(|a| a.name == "signer").unwrap();
    assert_eq!(mine.keys[0].key.jkt, keys[0].jkt);

    // The seeds' `/v1/...` spelling is verified as received, before the alias is
    // rewritten: a signature of `/v1/...` passes there; one of the `/api/v1/...`
    // twin does not.
    let mut seed = Signed::new(&server, &token, &key, "agents/signer/inbox");
    seed.method = Method::GET;
    seed.path = "/v1/agents/signer/inbox".to_owned();
    let reply = seed.send().await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let mut twin = Signed::new(&server, &token, &key, "agents/signer/inbox");
    twin.method = Method::GET;
    let headers = twin.headers();
    seed.send_with(&server, headers, Vec::new())
        .await
        .problem(401, "signature_invalid");

    // Another agent with no key still works unsigned under `optional`.
    let (_, plain) = server.agent("plain").await;
    send(&plain, "plain", json!({"unsigned": true})).await;
}

#[tokio::test]
async fn a_signature_is_good_for_its_own_request_once() {
    let server = TestServer::start().await;
    let (token, key, client) = bound_agent(&server, "worker").await;
    let (event, claim_token) = claimed(&server, &client, "worker").await;
    let release = Signed::new(
        &server,
        &token,
        &key,
        &format!("agents/worker/inbox/{event}/release"),
    )
    .body(json!({"claim_token": claim_token}));

    // Captured on /release, replayed on /ack: the path is signed.
    let ack = Signed::new(
        &server,
        &token,
        &key,
        &format!("agents/worker/inbox/{event}/ack"),
    )
    .body(json!({"claim_token": claim_token}));
    ack.send_with(&server, release.headers(), release.body_bytes())
        .await
        .problem(401, "signature_invalid");

    // A body changed after signing: its signed digest no longer matches.
    let tampered =
        serde_json::to_vec(&json!({"claim_token": claim_token, "delay_seconds": 3600})).unwrap();
    release
        .send_with(&server, release.headers(), tampered)
        .await
        .problem(400, "digest_mismatch");

    // Outside the window: created too far ahead, or expired (30 s of skew allowed).
    let mut future = Signed::new(
        &server,
        &token,
        &key,
        &format!("agents/worker/inbox/{event}/release"),
    )
    .body(json!({"claim_token": claim_token}));
    future.created = now_s() + 120;
    future.send().await.problem(401, "signature_expired");
    let mut old = Signed::new(
        &server,
        &token,
        &key,
        &format!("agents/worker/inbox/{event}/release"),
    )
    .body(json!({"claim_token": claim_token}));
    old.created = now_s() - 400;
    old.send().await.problem(401, "signature_expired");

    // Another key than the credential's.
    let stranger = SigningKey::generate();
    Signed::new(
        &server,
        &token,
        &stranger,
        &format!("agents/worker/inbox/{event}/release"),
    )
    .body(json!({"claim_token": claim_token}))
    .send()
    .await
    .problem(401, "signature_invalid");

    // None of that did anything: the event is still claimed with its token, and
    // the genuine request does its work, once; the same signature again is a replay.
    let headers = release.headers();
    let first = release
        .send_with(&server, headers.clone(), release.body_bytes())
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.json()["status"], "pending");
    release
        .send_with(&server, headers, release.body_bytes())
        .await
        .problem(401, "signature_replayed");
}

#[tokio::test]
async fn a_nonce_is_used_once_across_instances() {
    // Both instances behind one address (`--public-url`), as a team deploys them.
    let behind = || Options {
        public_authority: Some("switchboard.example:443".to_owned()),
        ..Options::default()
    };
    let server = TestServer::with(behind()).await;
    let other = if server.backend().shared() {
        Some(server.another_instance(behind()).await)
    } else {
        // One process owns a SQLite database: the replay is sent to it again.
        None
    };
    let second = other.as_ref().unwrap_or(&server);
    let (token, key, _) = bound_agent(&server, "once").await;
    let mut send = Signed::new(&server, &token, &key, "agents/once/messages")
        .body(json!({"payload": {"n": 1}}));
    send.authority = Some("switchboard.example:443".to_owned());
    // The replay is refused before its Idempotency-Key is looked at: the key's
    // stored answer goes only to a request signed anew.
    send.idempotency_key = Some(switchboard_tests::key());
    let headers = send.headers();
    let first = send
        .send_with(&server, headers.clone(), send.body_bytes())
        .await;
    assert_eq!(first.status, 201, "{}", first.text());
    send.send_with(second, headers, send.body_bytes())
        .await
        .problem(401, "signature_replayed");
    // The replay did nothing: one event.
    let events = crate::support::inbox(&server.operator(), "once").await;
    assert_eq!(events.len(), 1);
    // The authority is signed: the address the instance listens on is not the one
    // it is known by, so a request signed for it is refused.
    let mut direct = Signed::new(second, &token, &key, "agents/once/messages")
        .body(json!({"payload": {"n": 2}}));
    direct.idempotency_key = Some(switchboard_tests::key());
    direct.send().await.problem(401, "signature_invalid");
}

#[tokio::test]
async fn an_access_token_bound_to_a_key_is_useless_without_it() {
    let server = TestServer::start().await;
    let (created, _) = server.agent("bound").await;
    let key = SigningKey::generate();
    let jwk = serde_json::to_string(&key.public_key().to_jwk()).unwrap();
    let reply =
        crate::oauth::exchange_with(&server, created.token.as_str(), &[("signing_key", &jwk)])
            .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let jwt = reply.json()["access_token"].as_str().unwrap().to_owned();
    assert_eq!(part(&jwt, 1)["cnf"]["jkt"], key.public_key().thumbprint());

    // Stolen, the token alone is refused, under the default policy too.
    crate::oauth::get_with(&server, &jwt, "agents/bound/inbox")
        .await
        .problem(401, "signature_required");
    // Signed by another key: refused.
    let stranger = SigningKey::generate();
    let mut wrong = Signed::new(&server, &jwt, &stranger, "agents/bound/inbox");
    wrong.method = Method::GET;
    wrong.send().await.problem(401, "signature_invalid");
    // Signed by its key: it works.
    let mut right = Signed::new(&server, &jwt, &key, "agents/bound/inbox");
    right.method = Method::GET;
    let ok = right.send().await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    // The key bound only that token: the static token it was exchanged for still
    // works unsigned, and a token exchanged without a key carries no `cnf`.
    send(
        &Client::new(&server.url, created.token.as_str()).unwrap(),
        "bound",
        json!({"static": true}),
    )
    .await;
    let plain = exchange(&server, created.token.as_str(), None).await;
    let plain = plain.json()["access_token"].as_str().unwrap().to_owned();
    assert!(part(&plain, 1).get("cnf").is_none());

    // A private key is refused with an OAuth error, not bound.
    let mut value = serde_json::to_value(key.public_key().to_jwk()).unwrap();
    value["d"] = json!("AAAA");
    let refused = crate::oauth::exchange_with(
        &server,
        created.token.as_str(),
        &[("signing_key", &value.to_string())],
    )
    .await;
    crate::oauth::oauth_error(&refused, 400, "invalid_request");
}

#[tokio::test]
async fn the_required_policy_refuses_unsigned_agent_calls_only() {
    let server = TestServer::start().await;
    let operator = server.operator();
    let (_, plain) = server.agent("plain").await;
    let (_, _, signing) = bound_agent(&server, "signing").await;

    let overview = operator.set_signature_policy("required").await.unwrap();
    assert_eq!(overview.policy, "required");
    // An unsigned state-changing agent call: refused, with what to sign.
    let reply = crate::support::send_raw(
        &plain,
        "plain",
        &json!({"payload": {}}),
        &switchboard_tests::key(),
    )
    .await;
    reply.problem(401, "signature_required");
    assert!(reply.header("accept-signature").is_some());
    // Reads of an unbound credential, and operators, are not asked to sign.
    plain
        .poll("plain", 0, None)
        .await
        .expect("an unsigned read");
    send(&operator, "plain", json!({"from": "operator"})).await;
    // A signing agent goes on.
    send(&signing, "signing", json!({"signed": true})).await;
    // A policy that is none of the three is refused, and nothing changed.
    let bad = call(
        operator
            .request(Method::PUT, "ops/signatures")
            .json(&json!({"policy": "sometimes"})),
    )
    .await;
    bad.problem(422, "validation_failed");
    assert_eq!(operator.signatures().await.unwrap().policy, "required");
    // Off: signatures of unbound credentials are not even looked at.
    operator.set_signature_policy("off").await.unwrap();
    send(&plain, "plain", json!({"again": true})).await;
}

#[tokio::test]
async fn rotating_the_key_while_consuming_loses_no_event() {
    const EVENTS: usize = 40;
    let server = TestServer::start().await;
    let (_, _, client) = bound_agent(&server, "rotor").await;
    let operator = server.operator();
    for n in 0..EVENTS {
        send(&operator, "rotor", json!({ "n": n })).await;
    }
    let consumer = client.clone();
    let work = tokio::spawn(async move {
        let mut acked = std::collections::HashSet::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while acked.len() < EVENTS && tokio::time::Instant::now() < deadline {
            let claim = consumer
                .claim(
                    "rotor",
                    &ClaimRequest {
                        limit: Some(4),
                        lease_seconds: Some(2),
                        ..Default::default()
                    },
                )
                .await;
            let Ok(claim) = claim else { continue };
            if claim.events.is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            for event in claim.events {
                if consumer
                    .ack("rotor", event.event.event_id, event.claim_token)
                    .await
                    .is_ok()
                {
                    acked.insert(event.event.event_id);
                }
            }
        }
        acked.len()
    });
    // Three rotations while it works: each registers the next key with a request
    // signed by the current one, then revokes the current one.
    let mut seen = vec![client.signing_key_id().unwrap()];
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        client.rotate_key().await.expect("a rotation");
        seen.push(client.signing_key_id().unwrap());
    }
    assert_eq!(work.await.unwrap(), EVENTS, "every event acked once");
    seen.dedup();
    assert_eq!(seen.len(), 4, "four keys in turn");
    // Only the last key is live.
    let keys = client.keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(&keys[0].jkt, seen.last().unwrap());
    // A release with the SDK still works after the rotations.
    let (event, claim_token) = claimed(&server, &client, "rotor").await;
    client
        .release(
            "rotor",
            event.parse().unwrap(),
            &ReleaseRequest {
                claim_token: claim_token.parse().unwrap(),
                delay_seconds: None,
                error: None,
                terminal: false,
            },
        )
        .await
        .expect("a signed release");
}

#[tokio::test]
async fn a_nonce_stays_used_across_a_restart() {
    // SQLite checks nonces in memory and saves them behind (every worker pass and
    // at shutdown), loading the live ones at start; the database servers keep them
    // in the table at once.
    let mut server = TestServer::start().await;
    let (token, key, _) = bound_agent(&server, "restart").await;
    let (path, headers, body) = {
        let mut send = Signed::new(&server, &token, &key, "agents/restart/messages")
            .body(json!({"payload": {"n": 1}}));
        send.idempotency_key = Some(switchboard_tests::key());
        (send.path.clone(), send.headers(), send.body_bytes())
    };
    let post = |server: &TestServer| {
        reqwest::Client::new()
            .post(format!("{}{path}", server.url))
            .headers(headers.clone())
            .body(body.clone())
    };
    let first = call(post(&server)).await;
    assert_eq!(first.status, 201, "{}", first.text());
    server.outage(Duration::from_millis(10)).await;
    call(post(&server)).await.problem(401, "signature_replayed");
    let events = crate::support::inbox(&server.operator(), "restart").await;
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn the_sdk_signs_on_the_servers_clock_when_its_own_is_off() {
    // The server's clock is 16 minutes ahead of this machine's: a signature made on
    // this machine's time is out of the window, and the answer says the server's
    // time; the SDK signs again with the difference, and from then on.
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (token, key, client) = bound_agent(&server, "drifted").await;
    server.advance(Duration::from_secs(16 * 60));
    let mut raw = Signed::new(&server, &token, &key, "agents/drifted/inbox");
    raw.method = Method::GET;
    let doc = raw.send().await.problem(401, "signature_expired");
    let server_time = server.now().unix_timestamp();
    assert_eq!(doc["server_time"], server_time, "{doc}");
    client
        .poll("drifted", 0, None)
        .await
        .expect("signed again on the server's time");
    send(&client, "drifted", json!({"after": "drift"})).await;
}
