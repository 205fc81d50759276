//! The fenced data plane over real HTTP (issue 5): records are read and written only
//! with the memory's current fencing token, every refusal is recorded and counted,
//! versions (ETag / If-Match) keep two writers under one token from losing an
//! update, and a change reaches subscribed agents as a `memory_updated` event.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::sdk::proto::{AcquireLease, Lease, MemoryId, MemoryUpdated, RegisterMemory};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::sdk::{Client, Error, Precondition};
use switchboard_tests::{Options, TestServer, key};

use crate::support::{Reply, inbox};

async fn leased(client: &Client, name: &str, ttl: f64) -> (MemoryId, Lease) {
    let m = client
        .register_memory(&RegisterMemory::default())
        .await
        .unwrap()
        .memory_instance_id;
    let ask = AcquireLease {
        name: name.to_owned(),
        memory_instance_id: m,
        ttl_seconds: ttl,
        owner_client: Some("host-a".into()),
        lock_delay_seconds: Some(0.0),
    };
    (m, client.acquire_lease(&ask, &key()).await.unwrap().0)
}

#[track_caller]
fn code(result: Result<impl std::fmt::Debug, Error>, status: u16, code: &str) {
    let e = result.expect_err("refused");
    let p = e.problem().unwrap_or_else(|| panic!("a problem: {e}"));
    assert_eq!((p.status, p.code.as_deref()), (status, Some(code)), "{p:?}");
}

#[tokio::test]
async fn records_need_the_current_token_and_versions_keep_updates() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (_, a) = server.agent("a").await;
    let op = server.operator();
    let (m, lease) = leased(&a, "writer", 30.0).await;
    let t = lease.fencing_token;

    let v1 = a
        .put_record(m, "plan", &json!({"step": 1}), t, Precondition::None)
        .await
        .unwrap();
    assert_eq!((v1.version, v1.fencing_token), (1, t));
    // Overwriting needs the version read, so a concurrent update is not lost.
    code(
        a.put_record(m, "plan", &json!({"step": 2}), t, Precondition::None)
            .await,
        428,
        "precondition_required",
    );
    let v2 = a
        .put_record(m, "plan", &json!({"step": 2}), t, Precondition::IfMatch(1))
        .await
        .unwrap();
    assert_eq!(v2.version, 2);
    code(
        a.put_record(m, "plan", &json!({"step": 3}), t, Precondition::IfMatch(1))
            .await,
        412,
        "precondition_failed",
    );
    code(
        a.put_record(m, "plan", &json!({}), t, Precondition::Absent)
            .await,
        412,
        "precondition_failed",
    );
    assert_eq!(
        a.get_record(m, "plan", t).await.unwrap().value,
        json!({"step": 2})
    );

    // The ETag travels as a header too; a missing token is a bad request.
    let raw = Reply::read(
        a.request(Method::GET, &format!("memories/{m}/records/plan"))
            .header("fencing-token", t.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(raw.header("etag"), Some("\"v2\""));
    Reply::read(
        a.request(Method::GET, &format!("memories/{m}/records/plan"))
            .send()
            .await
            .unwrap(),
    )
    .await
    .problem(400, "validation_failed");

    // Tokens that are not the current one: refused, recorded, counted.
    code(a.get_record(m, "plan", t + 1).await, 409, "stale_fence");
    code(
        a.put_record(m, "plan", &json!({}), 0, Precondition::IfMatch(2))
            .await,
        409,
        "stale_fence",
    );
    op.force_release_lease(lease.lease_id).await.unwrap();
    code(
        a.put_record(
            m,
            "plan",
            &json!({"zombie": true}),
            t,
            Precondition::IfMatch(2),
        )
        .await,
        409,
        "stale_fence",
    );
    assert_eq!(
        a.get_record(m, "plan", t + 1).await.map(|r| r.value).ok(),
        None
    );

    // A new holder (after force-release: token past the bumped fence) reads on; its
    // lease then expires, and its own token is refused with 410.
    let (_, b) = server.agent("b").await;
    let ask = AcquireLease {
        name: "writer".into(),
        memory_instance_id: m,
        ttl_seconds: 5.0,
        owner_client: Some("host-b".into()),
        lock_delay_seconds: Some(0.0),
    };
    server.advance(Duration::from_secs(6));
    let next = b.acquire_lease(&ask, &key()).await.unwrap().0;
    assert_eq!(
        next.fencing_token,
        t + 2,
        "past the fence the force-release bumped"
    );
    let read = b.get_record(m, "plan", next.fencing_token).await.unwrap();
    assert_eq!(
        read.value,
        json!({"step": 2}),
        "the zombie's write never landed"
    );
    b.delete_record(m, "plan", next.fencing_token, Some(2))
        .await
        .unwrap();
    code(
        b.get_record(m, "plan", next.fencing_token).await,
        404,
        "not_found",
    );
    server.advance(Duration::from_secs(6));
    code(
        b.get_record(m, "plan", next.fencing_token).await,
        410,
        "lease_expired",
    );

    let rejections = op.fencing_rejections().await.unwrap().rejections;
    assert_eq!(rejections.len(), 5, "{rejections:?}");
    let zombie = &rejections[2];
    assert_eq!((zombie.presented_token, zombie.current_token), (t, t + 1));
    assert_eq!(
        zombie.owner_client.as_deref(),
        Some("host-a"),
        "named by its lease"
    );
    assert_eq!(zombie.actor, "agent:a");
    assert_eq!(zombie.operation, "put plan");
    assert_eq!(rejections[0].owner_client.as_deref(), Some("host-b"));
    let metrics = op.metrics_text().await.unwrap();
    assert!(metrics.contains("fencing_rejections_total 5"), "{metrics}");
}

#[tokio::test]
async fn changes_reach_subscribed_agents_in_their_inbox() {
    let server = TestServer::start().await;
    let (_, a) = server.agent("holder").await;
    let (_, watcher) = server.agent("watcher").await;
    let (_, other) = server.agent("other").await;
    let (m, lease) = leased(&a, "shared-mind", 30.0).await;
    watcher.subscribe_memory(m, "watcher", true).await.unwrap();
    code(
        other.subscribe_memory(m, "watcher", true).await,
        403,
        "forbidden",
    );

    let t = lease.fencing_token;
    a.put_record(m, "goal", &json!("ship"), t, Precondition::None)
        .await
        .unwrap();
    a.delete_record(m, "goal", t, None).await.unwrap();
    let op = server.operator();
    let events = inbox(&op, "watcher").await;
    let changes: Vec<MemoryUpdated> = events
        .iter()
        .map(|e| serde_json::from_value(e.payload.clone().unwrap()).unwrap())
        .collect();
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(
        (changes[0].kind.as_str(), changes[0].key.as_str()),
        ("memory_updated", "goal")
    );
    assert_eq!((changes[0].version, changes[0].deleted), (1, false));
    assert_eq!((changes[1].version, changes[1].deleted), (1, true));
    assert_eq!(changes[0].fencing_token, t);
    assert_eq!(
        events[0].correlation_id.as_deref(),
        Some(m.to_string().as_str())
    );
    assert!(
        inbox(&op, "other").await.is_empty(),
        "only subscribers hear of it"
    );

    watcher.subscribe_memory(m, "watcher", false).await.unwrap();
    a.put_record(m, "goal", &json!("again"), t, Precondition::None)
        .await
        .unwrap();
    assert_eq!(inbox(&op, "watcher").await.len(), 2, "unsubscribed");
}
