//! Remote client settings (issue 18) over real HTTP, on every backend: operators set
//! them for the tenant and per agent, each response to an agent carries what is in
//! effect for it in `Switchboard-Client-Settings`, and bad input gets a problem.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::sdk::proto::{
    CLIENT_SETTINGS_HEADER, ClientSettings, EffectiveClientSettings,
};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::{Options, TestServer};

use crate::support::call;

fn settings(ceiling_ms: Option<u64>, paused: Option<bool>) -> ClientSettings {
    ClientSettings {
        poll_ceiling_ms: ceiling_ms,
        reports_paused: paused,
    }
}

/// The header of a plain agent request (its inbox), parsed.
async fn header_of(
    agent: &switchboard_tests::sdk::Client,
    name: &str,
) -> Option<EffectiveClientSettings> {
    let reply = call(agent.request(Method::GET, &format!("agents/{name}/inbox"))).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply
        .header(CLIENT_SETTINGS_HEADER)
        .map(|v| EffectiveClientSettings::parse_header(v).unwrap_or_else(|e| panic!("{v}: {e}")))
}

#[tokio::test]
async fn agents_obey_their_own_settings_over_the_tenants() {
    let server = TestServer::start().await;
    let operator = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;

    // Nothing set: the header still says so (reports not paused, no ceiling).
    assert_eq!(
        header_of(&alice, "alice").await,
        Some(EffectiveClientSettings::default())
    );
    let list = operator.client_settings_list().await.unwrap();
    assert!(list.tenant.is_none() && list.agents.is_empty());

    // The tenant's row reaches every agent, from the very next response.
    let stored = operator
        .put_client_settings(None, &settings(Some(30_000), Some(true)))
        .await
        .unwrap();
    assert_eq!(
        (stored.agent_id, stored.updated_by.as_str()),
        (None, "operator")
    );
    let tenant_wide = EffectiveClientSettings {
        poll_ceiling_ms: Some(30_000),
        reports_paused: true,
    };
    assert_eq!(header_of(&alice, "alice").await, Some(tenant_wide));
    assert_eq!(header_of(&bob, "bob").await, Some(tenant_wide));
    let raw = call(alice.request(Method::GET, "agents/alice/inbox")).await;
    assert_eq!(
        raw.header(CLIENT_SETTINGS_HEADER),
        Some("poll-ceiling=30000, reports-paused"),
        "an RFC 8941 dictionary"
    );

    // Alice's own row overrides field by field: reports resume, the ceiling stays.
    operator
        .put_client_settings(Some("alice"), &settings(None, Some(false)))
        .await
        .unwrap();
    let alices = EffectiveClientSettings {
        poll_ceiling_ms: Some(30_000),
        reports_paused: false,
    };
    assert_eq!(header_of(&alice, "alice").await, Some(alices));
    assert_eq!(header_of(&bob, "bob").await, Some(tenant_wide));
    // The SDK takes it from the response of any of its calls (the raw requests
    // above bypass it).
    assert_eq!(alice.client_settings(), EffectiveClientSettings::default());
    alice.poll("alice", 0, Some(1)).await.unwrap();
    assert_eq!(alice.client_settings(), alices);
    assert_eq!(alice.own_client_settings("alice").await.unwrap(), alices);

    // Every response to the agent carries it, errors too (a 404 of an event).
    let missing = call(
        alice
            .request(
                Method::POST,
                "agents/alice/inbox/00000000-0000-7000-8000-000000000000/ack",
            )
            .json(&json!({"claim_token": "00000000-0000-7000-8000-000000000000"})),
    )
    .await;
    assert!(missing.status >= 400, "{}", missing.text());
    assert_eq!(
        missing.header(CLIENT_SETTINGS_HEADER),
        Some("poll-ceiling=30000, reports-paused=?0")
    );
    // Operators' responses carry none: no SDK of theirs obeys them.
    let ops = call(operator.request(Method::GET, "ops/agents")).await;
    assert_eq!(ops.header(CLIENT_SETTINGS_HEADER), None);

    // The operator's views.
    let list = operator.client_settings_list().await.unwrap();
    assert_eq!(
        list.tenant.as_ref().map(|t| t.settings),
        Some(settings(Some(30_000), Some(true)))
    );
    assert_eq!(list.agents.len(), 1);
    assert_eq!(list.agents[0].name.as_deref(), Some("alice"));
    let one = operator.agent_client_settings("alice").await.unwrap();
    assert_eq!(one.effective, alices);
    assert_eq!(
        one.own.map(|o| o.settings),
        Some(settings(None, Some(false)))
    );
    let bobs = operator.agent_client_settings("bob").await.unwrap();
    assert_eq!((bobs.own, bobs.effective), (None, tenant_wide));

    // Clearing alice's row: she inherits again; clearing the tenant's: defaults.
    operator
        .delete_client_settings(Some("alice"))
        .await
        .unwrap();
    assert_eq!(header_of(&alice, "alice").await, Some(tenant_wide));
    operator.delete_client_settings(None).await.unwrap();
    operator.delete_client_settings(None).await.unwrap();
    assert_eq!(
        header_of(&alice, "alice").await,
        Some(EffectiveClientSettings::default())
    );
    assert!(
        alice.own_client_settings("alice").await.unwrap() == EffectiveClientSettings::default()
    );
}

#[tokio::test]
async fn bad_settings_and_strangers_get_problems() {
    let server = TestServer::start().await;
    let operator = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, _bob) = server.agent("bob").await;

    for (body, what) in [
        (json!({"poll_ceiling_ms": 999}), "between 1000"),
        (json!({"poll_ceiling_ms": 3_600_001}), "between 1000"),
        (json!({"poll_ceiling_ms": -1}), "poll_ceiling_ms"),
        (json!({"poll_ceiling_ms": "fast"}), "poll_ceiling_ms"),
        (json!({"poll_ceiling": 5000}), "poll_ceiling"),
        (json!({"reports_paused": "yes"}), "reports_paused"),
    ] {
        for path in ["ops/client-settings", "ops/agents/alice/client-settings"] {
            let reply = call(operator.request(Method::PUT, path).json(&body)).await;
            let doc = reply.problem(422, "validation_failed");
            let detail = doc["detail"].as_str().unwrap_or_default();
            assert!(detail.contains(what), "{body} on {path}: {detail}");
        }
    }
    assert!(
        operator
            .client_settings_list()
            .await
            .unwrap()
            .tenant
            .is_none(),
        "nothing stored"
    );

    // An unknown agent, for the operator: 404 naming it.
    let reply = call(
        operator
            .request(Method::PUT, "ops/agents/nobody/client-settings")
            .json(&json!({"reports_paused": true})),
    )
    .await;
    reply.problem(404, "not_found");
    call(operator.request(Method::GET, "ops/agents/nobody/client-settings"))
        .await
        .problem(404, "not_found");

    // An agent may not set anything (no ops:write), nor read the operator's views.
    for (method, path) in [
        (Method::PUT, "ops/client-settings"),
        (Method::PUT, "ops/agents/alice/client-settings"),
        (Method::DELETE, "ops/client-settings"),
    ] {
        let reply = call(
            alice
                .request(method.clone(), path)
                .json(&json!({"reports_paused": false})),
        )
        .await;
        reply.problem(403, "forbidden");
    }
    call(alice.request(Method::GET, "ops/client-settings"))
        .await
        .problem(403, "forbidden");
    // Another agent's settings look exactly like an agent that does not exist (I9).
    let foreign = call(alice.request(Method::GET, "agents/bob/client-settings")).await;
    let unknown = call(alice.request(Method::GET, "agents/nobody/client-settings")).await;
    foreign.problem(404, "not_found");
    unknown.problem(404, "not_found");
    assert_eq!(
        foreign.json()["title"],
        unknown.json()["title"],
        "the same answer for foreign and unknown"
    );
}

/// On PostgreSQL and MariaDB: a change made through one instance reaches an agent
/// served by another within the token cache's TTL (2 s), not after a restart.
#[tokio::test]
async fn a_change_reaches_every_instance() {
    let server = TestServer::start().await;
    if !server.backend().shared() {
        return; // one process owns a SQLite file
    }
    let other = server.another_instance(Options::default()).await;
    let (created, _) = server.agent("alice").await;
    let alice = switchboard_tests::sdk::Client::new(&other.url, created.token.as_str()).unwrap();
    // Warm the other instance's cache with the old settings.
    assert_eq!(
        header_of(&alice, "alice").await,
        Some(EffectiveClientSettings::default())
    );
    server
        .operator()
        .put_client_settings(Some("alice"), &settings(Some(5_000), None))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = header_of(&alice, "alice").await;
        if seen.and_then(|s| s.poll_ceiling_ms) == Some(5_000) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the other instance still says {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
