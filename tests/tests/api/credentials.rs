//! Static credentials (issue 15): the tenant's tokens are listed without the token,
//! revoked one by one or every one of an agent; a revoked token is refused at once
//! on the instance that revoked it and within the token cache's TTL on every other;
//! the console sessions made from it end with it. Another tenant can neither see
//! nor revoke them.

use serde_json::json;
use std::time::Duration;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{Credential, TokenCreated};
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::{Options, TestServer};

use crate::support::{call, send};

fn id_of<'a>(list: &'a [Credential], label: &str) -> &'a Credential {
    list.iter()
        .find(|c| c.label == label)
        .unwrap_or_else(|| panic!("{label} in {list:?}"))
}

#[tokio::test]
async fn a_new_agents_token_is_kept_by_no_cache() {
    let server = TestServer::start().await;
    let created = call(
        server
            .operator()
            .request(Method::POST, "ops/agents")
            .json(&json!({"name": "carol"})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.header("cache-control"), Some("no-store"));
}

#[tokio::test]
async fn tokens_are_listed_without_the_secret_and_revoked() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (alice_info, alice) = server.agent("alice").await;
    let minted = call(
        op.request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": ["metrics:read"], "label": "prometheus"})),
    )
    .await;
    assert_eq!(minted.status, 201, "{}", minted.text());
    // An answer that shows a token once is kept by no cache.
    assert_eq!(minted.header("cache-control"), Some("no-store"));
    let minted: TokenCreated = serde_json::from_slice(&minted.body).unwrap();

    let reply = call(op.request(Method::GET, "ops/tokens")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    for secret in [&server.operator_token, &alice_info.token, &minted.token] {
        assert!(
            !reply.text().contains(secret.as_str()),
            "a token in the list"
        );
    }
    let list: Vec<Credential> = serde_json::from_slice(&reply.body).unwrap();
    let kinds: Vec<(&str, &str)> = list
        .iter()
        .map(|c| (c.label.as_str(), c.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("operator", "admin"),
            ("agent:alice", "agent"),
            ("prometheus", "read-only")
        ]
    );
    assert_eq!(
        id_of(&list, "agent:alice").agent_name.as_deref(),
        Some("alice")
    );
    assert!(
        list.iter()
            .all(|c| c.token_id.len() == 16 && c.revoked_at.is_none())
    );

    // Every token of alice: her next request is refused, at once, on this instance.
    send(&op, "alice", json!("before")).await;
    assert!(alice.poll("alice", 0, None).await.is_ok());
    assert_eq!(op.revoke_agent("alice").await.unwrap().revoked, 1);
    let refused = call(alice.request(Method::GET, "agents/alice/inbox")).await;
    refused.problem(401, "unauthorized");
    assert_eq!(
        op.revoke_agent("alice").await.unwrap().revoked,
        0,
        "nothing left"
    );
    // Her inbox and work stay for the operator.
    assert_eq!(op.agents().await.unwrap()[0].counts.pending, 1);

    // One token by its id.
    let scrape = || {
        call(
            reqwest::Client::new()
                .get(format!("{}/metrics", server.url))
                .bearer_auth(&minted.token),
        )
    };
    assert_eq!(scrape().await.status, 200);
    let prometheus = id_of(&list, "prometheus").token_id.clone();
    assert_eq!(op.revoke_token(&prometheus).await.unwrap().revoked, 1);
    scrape().await.problem(401, "unauthorized");
    assert_eq!(op.revoke_token(&prometheus).await.unwrap().revoked, 0);

    let after = op.tokens().await.unwrap();
    assert!(id_of(&after, "prometheus").revoked_at.is_some());
    assert!(id_of(&after, "agent:alice").revoked_at.is_some());
    assert!(id_of(&after, "operator").revoked_at.is_none());

    // Ids that are not one, or not this tenant's.
    for (bad, status, code) in [
        ("xyz", 400, "validation_failed"),
        ("00000000000000000000", 400, "validation_failed"),
        ("0123456789abcdef", 404, "not_found"),
    ] {
        let reply = call(op.request(Method::POST, &format!("ops/tokens/{bad}/revoke"))).await;
        reply.problem(status, code);
    }
    call(op.request(Method::POST, "ops/agents/nobody/revoke"))
        .await
        .problem(404, "not_found");
    // An agent token may not revoke (not even itself).
    let (_, bob) = server.agent("bob").await;
    call(bob.request(Method::POST, "ops/agents/bob/revoke"))
        .await
        .problem(403, "forbidden");
    call(bob.request(Method::GET, "ops/tokens"))
        .await
        .problem(403, "forbidden");
}

/// I9: another tenant's operator gets for this tenant's tokens and agents what it
/// gets for ones that do not exist, and sees none of them.
#[tokio::test]
async fn another_tenant_can_neither_see_nor_revoke_them() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, op_b) = server.tenant("team-b").await;
    let a_ids: Vec<String> = op
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.token_id)
        .collect();

    let b_list = op_b.tokens().await.unwrap();
    assert_eq!(b_list.len(), 1, "only its own operator: {b_list:?}");
    assert!(b_list.iter().all(|c| !a_ids.contains(&c.token_id)));
    for id in &a_ids {
        let foreign = call(op_b.request(Method::POST, &format!("ops/tokens/{id}/revoke"))).await;
        let missing = call(op_b.request(Method::POST, "ops/tokens/0123456789abcdef/revoke")).await;
        assert_eq!(
            foreign.problem(404, "not_found"),
            missing.problem(404, "not_found"),
            "a foreign token looks exactly like a missing one"
        );
    }
    call(op_b.request(Method::POST, "ops/agents/alice/revoke"))
        .await
        .problem(404, "not_found");
    assert!(
        alice.poll("alice", 0, None).await.is_ok(),
        "alice still works"
    );
    assert!(op.agents().await.is_ok(), "and so does the admin");
}

/// A console session stands for the token it was made from: revoking the token ends
/// it.
#[tokio::test]
async fn revoking_a_token_ends_its_console_sessions() {
    let server = TestServer::start().await;
    let (created, op_b) = server.tenant("team-b").await;
    let http = reqwest::Client::new();
    let login = http
        .post(format!("{}/api/v1/session", server.url))
        .json(&json!({"token": created.operator_token}))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 201);
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let who = || {
        call(
            http.get(format!("{}/api/v1/session", server.url))
                .header("cookie", &cookie),
        )
    };
    assert_eq!(who().await.status, 200);
    let own = op_b.tokens().await.unwrap().remove(0).token_id;
    assert_eq!(op_b.revoke_token(&own).await.unwrap().revoked, 1);
    who().await.problem(401, "unauthorized");
    call(op_b.request(Method::GET, "ops/agents"))
        .await
        .problem(401, "unauthorized");
}

/// On PostgreSQL and MariaDB: a revocation made through one instance reaches
/// another within the token cache's TTL on that instance's clock: its cached token
/// works until then and is refused from then on.
#[tokio::test]
async fn a_revocation_reaches_every_instance_within_the_ttl() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    if !server.backend().shared() {
        return; // one process owns a SQLite file
    }
    let other = server
        .another_instance(Options {
            manual_clock: true,
            ..Options::default()
        })
        .await;
    let (created, _) = server.agent("alice").await;
    let alice = Client::new(&other.url, created.token.as_str()).unwrap();
    assert!(
        alice.poll("alice", 0, None).await.is_ok(),
        "warms the cache"
    );
    assert_eq!(
        server
            .operator()
            .revoke_agent("alice")
            .await
            .unwrap()
            .revoked,
        1
    );

    other.advance(Duration::from_millis(1_900));
    assert!(
        alice.poll("alice", 0, None).await.is_ok(),
        "within the TTL the other instance still has it cached"
    );
    other.advance(Duration::from_millis(100));
    call(alice.request(Method::GET, "agents/alice/inbox"))
        .await
        .problem(401, "unauthorized");
}
