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
        display_name: None,
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

    // Tokens that are not the current one: refused, recorded, counted. A token never
    // issued to this agent is not its own (403); its own old one is stale (409).
    code(a.get_record(m, "plan", t + 1).await, 403, "forbidden");
    code(
        a.put_record(m, "plan", &json!({}), 0, Precondition::IfMatch(2))
            .await,
        403,
        "forbidden",
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
    code(a.get_record(m, "plan", t + 1).await, 403, "forbidden");

    // A new holder (after force-release: token past the bumped fence) reads on; its
    // lease then expires, and its own token is refused with 410.
    let (_, b) = server.agent("b").await;
    let ask = AcquireLease {
        name: "writer".into(),
        display_name: None,
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
    assert_eq!(
        switchboard_tests::exposition::sum(&metrics, "fencing_rejections_total"),
        Some(5.0),
        "{metrics}"
    );
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
    assert!(
        events
            .iter()
            .all(|e| e.payload.as_ref().unwrap().get("fencing_token").is_none()),
        "a subscriber is not told the holder's token (I7)"
    );
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

/// The refusal another principal gets, as (status, code, detail).
async fn refusal_to(
    client: &Client,
    m: MemoryId,
    token: u64,
    write: bool,
) -> (u16, Option<String>, Option<String>) {
    let result = if write {
        client
            .put_record(
                m,
                "plan",
                &json!({"mallory": true}),
                token,
                Precondition::None,
            )
            .await
            .map(drop)
    } else {
        client.get_record(m, "plan", token).await.map(drop)
    };
    let e = result.expect_err("a non-holder is refused");
    let p = e.problem().unwrap_or_else(|| panic!("a problem: {e}"));
    (p.status, p.code.clone(), p.detail.clone())
}

/// I7 binds the data plane to the lease holder, not to whoever knows the token. Agent
/// b of the same tenant learns a's token (here: it is simply told it) and must still
/// be refused, with one answer whether the memory is leased or not and whatever the
/// token, so the answer says nothing about the lease. Nothing b does may change a
/// record, and no answer or event shows b the current token.
#[tokio::test]
async fn a_token_learnt_by_another_agent_writes_nothing() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (_, a) = server.agent("a").await;
    let (_, b) = server.agent("b").await;
    let op = server.operator();
    let (m, lease) = leased(&a, "writer", 30.0).await;
    let t = lease.fencing_token;
    a.put_record(m, "plan", &json!({"step": 1}), t, Precondition::None)
        .await
        .unwrap();
    b.subscribe_memory(m, "b", true).await.unwrap();

    let while_leased = refusal_to(&b, m, t, true).await;
    assert_eq!(
        (while_leased.0, while_leased.1.as_deref()),
        (403, Some("forbidden")),
        "{while_leased:?}"
    );
    let detail = while_leased.2.clone().unwrap_or_default();
    assert!(detail.contains("POST /api/v1/leases"), "{detail}");
    // The same answer for a read, for a stale and a never-issued token, and once the
    // lease is gone (only the presented token in the text differs).
    let same = |got: (u16, Option<String>, Option<String>), token: u64| {
        let expected = while_leased
            .2
            .as_deref()
            .map(|d| d.replace(&format!("token {t};"), &format!("token {token};")));
        assert_eq!(
            (got.0, got.1.as_deref(), got.2.as_deref()),
            (403, Some("forbidden"), expected.as_deref()),
            "token {token}"
        );
    };
    same(refusal_to(&b, m, t, false).await, t);
    same(refusal_to(&b, m, t + 7, true).await, t + 7);
    // Nor may b renew or release a's lease with what it learnt.
    use switchboard_tests::sdk::proto::{ReleaseLease, RenewLease};
    code(
        b.renew_lease(&RenewLease::of(&lease)).await,
        403,
        "forbidden",
    );
    code(
        b.release_lease(&ReleaseLease::of(&lease)).await,
        403,
        "forbidden",
    );
    a.renew_lease(&RenewLease::of(&lease))
        .await
        .expect("a still holds its lease");
    a.release_lease(&ReleaseLease::of(&lease)).await.unwrap();
    same(refusal_to(&b, m, t, true).await, t);
    server.advance(Duration::from_secs(60));
    same(refusal_to(&b, m, t, false).await, t);

    // Nothing b sent landed; a, leasing again, reads its own write.
    let again = a
        .acquire_lease(
            &AcquireLease {
                name: "writer".to_owned(),
                display_name: None,
                memory_instance_id: m,
                ttl_seconds: 30.0,
                owner_client: Some("host-a".into()),
                lock_delay_seconds: Some(0.0),
            },
            &key(),
        )
        .await
        .unwrap()
        .0;
    let read = a.get_record(m, "plan", again.fencing_token).await.unwrap();
    assert_eq!((read.value, read.version), (json!({"step": 1}), 1));
    // A stale holder is told its token is stale, never what the current one is.
    let stale = a
        .put_record(m, "plan", &json!({}), t, Precondition::IfMatch(1))
        .await
        .expect_err("a's old token is stale");
    let p = stale.problem().expect("a problem");
    assert_eq!((p.status, p.code.as_deref()), (409, Some("stale_fence")));
    let d = p.detail.clone().unwrap_or_default();
    assert!(
        !d.contains(&format!("token {}", again.fencing_token)),
        "the refusal names no current token: {d}"
    );

    // b sees no token: not in the memory, not in the memory_updated events.
    assert_eq!(b.memory(m).await.unwrap().fencing_token, None);
    let lineage = b.lineage(m).await.unwrap();
    assert_eq!(lineage.memory.fencing_token, None);
    for e in inbox(&op, "b").await {
        let payload = e.payload.expect("a memory_updated payload");
        assert!(payload.get("fencing_token").is_none(), "{payload}");
    }
    // Every refusal was recorded for the operators, who see the current token.
    let rejections = op.fencing_rejections().await.unwrap().rejections;
    assert_eq!(
        rejections.iter().filter(|r| r.actor == "agent:b").count(),
        5
    );
    assert_eq!(
        op.memory(m).await.unwrap().fencing_token,
        Some(again.fencing_token)
    );
}

/// A record's value is any JSON (issue 17: schemathesis found an array refused with
/// "the body must be a JSON object", the guard for request objects).
#[tokio::test]
async fn a_record_value_may_be_an_array_or_a_scalar() {
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let (m, lease) = leased(&a, "lists", 30.0).await;
    let t = lease.fencing_token;
    for (key, value) in [
        ("list", json!([1, "two", null, {"three": 3}])),
        ("empty", json!([])),
        ("number", json!(42)),
        ("text", json!("plain")),
    ] {
        let put = a
            .put_record(m, key, &value, t, Precondition::Absent)
            .await
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(put.value, value, "{key}");
        let got = a.get_record(m, key, t).await.expect("read back");
        assert_eq!(got.value, value, "{key}");
    }
}
