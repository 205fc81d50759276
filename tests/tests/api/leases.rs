//! Memory instances and name + memory leases over real HTTP (issue 5): the lease's
//! life (acquire, replay, renew, expiry, lock delay, takeover, release,
//! force-release), fencing tokens that only grow, all-or-nothing claims, canonical
//! and confusable names, the idempotency cases, and the branch lineage.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::sdk::proto::{
    AcquireLease, BranchMemory, Lease, Memory, MemoryId, RegisterMemory, ReleaseLease, RenewLease,
};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::sdk::{Client, Error};
use switchboard_tests::{Options, TestServer, key};

use crate::support::{Gate, Reply};

async fn memory(client: &Client) -> Memory {
    client
        .register_memory(&RegisterMemory::default())
        .await
        .expect("register memory")
}

fn ask(name: &str, memory: MemoryId, ttl: f64) -> AcquireLease {
    AcquireLease {
        name: name.to_owned(),
        display_name: None,
        memory_instance_id: memory,
        ttl_seconds: ttl,
        owner_client: Some("host-a pid 42".into()),
        lock_delay_seconds: None,
    }
}

async fn acquire(client: &Client, name: &str, memory: MemoryId, ttl: f64) -> Result<Lease, Error> {
    client
        .acquire_lease(&ask(name, memory, ttl), &key())
        .await
        .map(|(lease, _)| lease)
}

#[track_caller]
fn refused(result: Result<impl std::fmt::Debug, Error>, status: u16, code: &str) -> String {
    let e = result.expect_err("refused");
    let p = e
        .problem()
        .unwrap_or_else(|| panic!("a problem document: {e}"));
    assert_eq!((p.status, p.code.as_deref()), (status, Some(code)), "{p:?}");
    p.detail.clone().unwrap_or_default()
}

fn renew(lease: &Lease) -> RenewLease {
    RenewLease::of(lease)
}

#[tokio::test]
async fn a_lease_lives_renews_expires_into_its_lock_delay_and_is_taken_over_with_a_higher_token() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (_, a) = server.agent("agent-a").await;
    let (_, b) = server.agent("agent-b").await;
    let m = memory(&a).await;
    assert_eq!(
        m.fencing_token, None,
        "an agent is never shown a memory's token"
    );
    let seen = server
        .operator()
        .memory(m.memory_instance_id)
        .await
        .unwrap();
    assert_eq!(seen.fencing_token, Some(0), "never leased");

    // A new claim answers 201, its replay 200 with the same lease.
    let k = key();
    let (first, sent) = a
        .acquire_lease(&ask("Build-Bot", m.memory_instance_id, 10.0), &k)
        .await
        .unwrap();
    assert_eq!((sent.status, sent.replayed), (201, false));
    assert_eq!(first.name, "build-bot", "the canonical name");
    assert_eq!(first.fencing_token, 1);
    assert_eq!(first.lock_delay_seconds, 5.0, "the default lock delay");
    let (again, sent) = a
        .acquire_lease(&ask("Build-Bot", m.memory_instance_id, 10.0), &k)
        .await
        .unwrap();
    assert_eq!((sent.status, sent.replayed), (200, true));
    assert_eq!(again, first);
    let metrics = server.operator().metrics_text().await.unwrap();
    assert_eq!(
        switchboard_tests::exposition::sum(&metrics, "idempotency_cache_hits_total"),
        Some(1.0),
        "{metrics}"
    );

    // Held: the same name elsewhere, or the same memory under another name.
    let other = memory(&b).await;
    refused(
        acquire(&b, "build-bot", other.memory_instance_id, 10.0).await,
        423,
        "lease_held",
    );
    refused(
        acquire(&b, "BUILD-BOT", other.memory_instance_id, 10.0).await,
        423,
        "lease_held",
    );
    let d = refused(
        acquire(&b, "deploy-bot", m.memory_instance_id, 10.0).await,
        423,
        "lease_held",
    );
    assert!(d.contains("nothing was claimed"), "{d}");
    // ...and nothing of the refused claim stuck: its free name is still free.
    let deploy = acquire(&b, "deploy-bot", other.memory_instance_id, 10.0)
        .await
        .unwrap();
    assert_eq!(deploy.fencing_token, 1);

    // Renew moves the expiry; a wrong token is stale.
    server.advance(Duration::from_secs(6));
    let renewed = a.renew_lease(&renew(&first)).await.unwrap();
    assert!(renewed.expires_at > first.expires_at);
    let mut wrong = renew(&first);
    wrong.fencing_token = 7;
    refused(a.renew_lease(&wrong).await, 409, "stale_fence");

    // Past its expiry: 410 to the holder, and the lock delay holds others off.
    server.advance(Duration::from_secs(11));
    let d = refused(a.renew_lease(&renew(&first)).await, 410, "lease_expired");
    assert!(d.contains("expired"), "{d}");
    let third = memory(&b).await;
    let d = refused(
        acquire(&b, "build-bot", third.memory_instance_id, 10.0).await,
        423,
        "lease_held",
    );
    assert!(d.contains("lock delay"), "{d}");
    server.advance(Duration::from_secs(5));
    let taken = acquire(&b, "build-bot", third.memory_instance_id, 10.0)
        .await
        .unwrap();
    assert_eq!(taken.fencing_token, 2, "the takeover's token is higher");
    refused(a.renew_lease(&renew(&first)).await, 409, "stale_fence");

    // A clean release frees both at once (no lock delay) and the memory's token keeps
    // growing with the next holder.
    b.release_lease(&ReleaseLease::of(&taken)).await.unwrap();
    b.release_lease(&ReleaseLease::of(&taken))
        .await
        .expect("releasing twice is fine");
    let next = acquire(&a, "build-bot", m.memory_instance_id, 10.0)
        .await
        .unwrap();
    assert_eq!(
        next.fencing_token, 3,
        "above both the name's 2 and the memory's 1"
    );

    // Force-release: the operator ends it, the fences move past it, the lock delay
    // starts, and the holder's token is refused from then on.
    let op = server.operator();
    let listed = op.ops_leases().await.unwrap().leases;
    assert_eq!(listed.len(), 2);
    let row = listed
        .iter()
        .find(|l| l.lease.lease_id == next.lease_id)
        .unwrap();
    assert_eq!(row.holder, "agent:agent-a");
    assert_eq!(row.lease.owner_client.as_deref(), Some("host-a pid 42"));
    op.force_release_lease(next.lease_id).await.unwrap();
    refused(a.renew_lease(&renew(&next)).await, 409, "stale_fence");
    assert_eq!(
        op.memory(m.memory_instance_id).await.unwrap().fencing_token,
        Some(4)
    );
    assert_eq!(
        a.memory(m.memory_instance_id).await.unwrap().fencing_token,
        None,
        "not to agents"
    );
    refused(
        acquire(&a, "build-bot", m.memory_instance_id, 10.0).await,
        423,
        "lease_held",
    );
    server.advance(Duration::from_secs(5));
    let after = acquire(&a, "build-bot", m.memory_instance_id, 10.0)
        .await
        .unwrap();
    assert_eq!(after.fencing_token, 5);
    let forced = op.force_release_lease(after.lease_id).await;
    assert!(forced.is_ok());
    refused(
        op.force_release_lease(after.lease_id).await,
        404,
        "not_found",
    );
}

#[tokio::test]
async fn names_are_canonical_and_confusable_names_collide() {
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let m1 = memory(&a).await;
    let m2 = memory(&a).await;
    acquire(&a, "cop", m1.memory_instance_id, 30.0)
        .await
        .unwrap();
    // Cyrillic с, о, р: all one script, so a valid name, with the skeleton of "cop".
    let d = refused(
        acquire(&a, "\u{441}\u{43e}\u{440}", m2.memory_instance_id, 30.0).await,
        422,
        "name_confusable",
    );
    assert!(
        d.contains("looks like a name that is already in use"),
        "{d}"
    );
    // Mixed scripts and spaces are not names at all.
    refused(
        acquire(&a, "p\u{430}ypal", m2.memory_instance_id, 30.0).await,
        422,
        "name_invalid",
    );
    refused(
        acquire(&a, "two words", m2.memory_instance_id, 30.0).await,
        422,
        "name_invalid",
    );
    // Fullwidth and case fold to the same canonical name: held, not confusable.
    refused(
        acquire(&a, "\u{ff23}OP", m2.memory_instance_id, 30.0).await,
        423,
        "lease_held",
    );
}

#[tokio::test]
async fn acquiring_covers_every_idempotency_case_and_bounds() {
    let (gate, hooks) = Gate::armed();
    let server = TestServer::with(Options {
        hooks,
        ..Options::default()
    })
    .await;
    let (_, a) = server.agent("a").await;
    let m = memory(&a).await;
    let body =
        json!({"name": "idem-bot", "memory_instance_id": m.memory_instance_id, "ttl_seconds": 30});
    let post = |body: serde_json::Value, k: Option<String>| {
        let a = a.clone();
        async move {
            let mut req = a.request(Method::POST, "leases").json(&body);
            if let Some(k) = k {
                req = req.header("idempotency-key", format!("\"{k}\""));
            }
            Reply::read(req.send().await.unwrap()).await
        }
    };
    post(body.clone(), None)
        .await
        .problem(400, "idempotency_key_required");

    // In flight: a duplicate gets 409; then the first completes and replays as 200.
    let k = key();
    let first = tokio::spawn(post(body.clone(), Some(k.clone())));
    tokio::time::timeout(Duration::from_secs(5), gate.entered.notified())
        .await
        .expect("the first request reaches the hook");
    post(body.clone(), Some(k.clone()))
        .await
        .problem(409, "request_in_progress");
    gate.release.notify_one();
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text());
    let replay = post(body.clone(), Some(k.clone())).await;
    assert_eq!((replay.status, replay.replayed()), (200, true));
    assert_eq!(replay.json(), first.json());
    // Same key, different body: 422.
    let mut other = body.clone();
    other["ttl_seconds"] = json!(60);
    post(other, Some(k.clone()))
        .await
        .problem(422, "idempotency_key_reused");

    // A held lease is an answer of the moment: the same key asks again later.
    let (_, b) = server.agent("b").await;
    let held_key = key();
    let theirs = json!({"name": "idem-bot", "memory_instance_id": memory(&b).await.memory_instance_id, "ttl_seconds": 30});
    let ask_b = |k: String| {
        let (b, theirs) = (b.clone(), theirs.clone());
        async move {
            Reply::read(
                b.request(Method::POST, "leases")
                    .header("idempotency-key", k)
                    .json(&theirs)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    ask_b(held_key.clone()).await.problem(423, "lease_held");
    let lease: Lease = serde_json::from_value(first.json()).unwrap();
    a.release_lease(&ReleaseLease::of(&lease)).await.unwrap();
    let won = ask_b(held_key).await;
    assert_eq!(won.status, 201, "the same key now claims: {}", won.text());

    // Bounds.
    for (field, value) in [
        ("ttl_seconds", json!(301)),
        ("ttl_seconds", json!(0.05)),
        ("lock_delay_seconds", json!(61)),
    ] {
        let mut bad = body.clone();
        bad[field] = value;
        let p = post(bad, Some(key()))
            .await
            .problem(422, "validation_failed");
        assert!(p["detail"].as_str().unwrap().contains(field), "{p}");
    }
    let unknown = json!({"name": "x", "memory_instance_id": MemoryId::new(), "ttl_seconds": 30});
    post(unknown, Some(key())).await.problem(404, "not_found");
}

#[tokio::test]
async fn branches_record_their_parent_and_the_lineage_walks_both_ways() {
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let root = memory(&a).await;
    let lease = acquire(&a, "lineage-bot", root.memory_instance_id, 30.0)
        .await
        .unwrap();
    let branch = |parent: MemoryId, token: u64| BranchMemory {
        parent_memory_instance_id: parent,
        parent_fencing_token: token,
        label: Some("experiment".into()),
    };
    let d = refused(
        a.branch_memory(&branch(root.memory_instance_id, 2)).await,
        422,
        "validation_failed",
    );
    assert!(d.contains("above the parent's current token;"), "{d}");
    let child = a
        .branch_memory(&branch(root.memory_instance_id, lease.fencing_token))
        .await
        .unwrap();
    assert_eq!(
        child.parent_memory_instance_id,
        Some(root.memory_instance_id)
    );
    assert_eq!(child.branched_at_token, Some(1));
    let seen = server
        .operator()
        .memory(child.memory_instance_id)
        .await
        .unwrap();
    assert_eq!(seen.fencing_token, Some(0), "a branch starts unleased");
    assert_ne!(
        child.memory_instance_id, root.memory_instance_id,
        "a new id"
    );
    let sibling = a
        .branch_memory(&branch(root.memory_instance_id, 0))
        .await
        .unwrap();
    let grandchild = a
        .branch_memory(&branch(child.memory_instance_id, 0))
        .await
        .unwrap();

    let of_child = a.lineage(child.memory_instance_id).await.unwrap();
    assert_eq!(
        of_child
            .ancestors
            .iter()
            .map(|m| m.memory_instance_id)
            .collect::<Vec<_>>(),
        [root.memory_instance_id]
    );
    assert_eq!(
        of_child
            .descendants
            .iter()
            .map(|m| m.memory_instance_id)
            .collect::<Vec<_>>(),
        [grandchild.memory_instance_id]
    );
    let of_root = a.lineage(root.memory_instance_id).await.unwrap();
    assert!(of_root.ancestors.is_empty());
    let mut below: Vec<_> = of_root
        .descendants
        .iter()
        .map(|m| m.memory_instance_id)
        .collect();
    below.sort();
    let mut expected = vec![
        child.memory_instance_id,
        sibling.memory_instance_id,
        grandchild.memory_instance_id,
    ];
    expected.sort();
    assert_eq!(below, expected);
    refused(a.lineage(MemoryId::new()).await, 404, "not_found");
}

#[tokio::test]
async fn the_lease_audit_keeps_only_salted_hashes_of_names_and_memories() {
    use sha2::{Digest, Sha256};
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let m = memory(&a).await;
    let lease = acquire(&a, "audit-bot", m.memory_instance_id, 30.0)
        .await
        .unwrap();
    a.renew_lease(&renew(&lease)).await.unwrap();
    let op = server.operator();
    op.force_release_lease(lease.lease_id).await.unwrap();
    let refused = a
        .put_record(
            m.memory_instance_id,
            "k",
            &json!(1),
            lease.fencing_token,
            switchboard_tests::sdk::Precondition::None,
        )
        .await;
    assert!(refused.is_err());

    let entries = op.lease_audit().await.unwrap().entries;
    let events: Vec<&str> = entries.iter().rev().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        ["acquired", "renewed", "force_released", "fence_rejected"]
    );
    let name_hash = entries[3]
        .name_hash
        .clone()
        .expect("acquired names the name");
    assert!(
        entries[..3]
            .iter()
            .all(|e| e.memory_hash == entries[3].memory_hash)
    );
    assert_eq!(
        entries[2].name_hash.as_ref(),
        Some(&name_hash),
        "one name, one hash"
    );
    assert_eq!(entries[0].name_hash, None, "a refusal has only the memory");
    assert_eq!(entries[3].actor, "agent:a");
    assert_eq!(entries[1].actor, "operator");
    // Salted: not the plain SHA-256 of the name.
    let plain: String = Sha256::digest(b"audit-bot")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_ne!(name_hash, plain);
    assert_eq!(name_hash.len(), 64);

    // Nothing in the table spells the name or the memory.
    let rows = server
        .stored_rows("SELECT event, name_hash, memory_hash, actor FROM lease_audit")
        .await;
    assert!(rows.len() >= 4, "the audit rows were read: {rows:?}");
    let text = format!("{rows:?}");
    assert!(!text.contains("audit-bot"));
    assert!(!text.contains(&m.memory_instance_id.to_string()));

    let metrics = op.metrics_text().await.unwrap();
    use switchboard_tests::exposition::sum;
    assert_eq!(
        sum(&metrics, "lease_renewal_latency_seconds_count"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sum(&metrics, "fencing_rejections_total"),
        Some(1.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn expired_idempotency_records_are_purged_and_the_key_claims_anew() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (_, a) = server.agent("a").await;
    let m = memory(&a).await;
    let k = key();
    let ask = ask("purge-bot", m.memory_instance_id, 30.0);
    let (first, sent) = a.acquire_lease(&ask, &k).await.unwrap();
    assert_eq!(sent.status, 201);
    let (_, sent) = a.acquire_lease(&ask, &k).await.unwrap();
    assert!(sent.replayed, "within the TTL: a replay");

    // A day later the record is gone: the same key is a new request.
    server.advance(Duration::from_secs(24 * 3600 + 1));
    let report = server.tick().await;
    assert!(report.retention.idempotency_removed >= 1, "{report:?}");
    let (second, sent) = a.acquire_lease(&ask, &k).await.unwrap();
    assert_eq!((sent.status, sent.replayed), (201, false));
    assert!(second.fencing_token > first.fencing_token);
}

#[tokio::test]
async fn registered_names_are_reserved_for_their_exact_form() {
    use switchboard_tests::sdk::proto::{ImportNames, LegacyName};
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let op = server.operator();
    let report = op
        .import_names(&ImportNames {
            names: vec![LegacyName {
                name: "COP".into(),
                created_at: time::OffsetDateTime::UNIX_EPOCH,
            }],
            dry_run: false,
        })
        .await
        .unwrap();
    assert_eq!(report.registered[0].name, "cop");
    let m = memory(&a).await;
    // The Cyrillic "сор" has the registered name's skeleton: confusable, even with
    // no lease on "cop" anywhere.
    let d = refused(
        acquire(&a, "\u{441}\u{43e}\u{440}", m.memory_instance_id, 30.0).await,
        422,
        "name_confusable",
    );
    assert!(
        d.contains("looks like a name that is already in use"),
        "{d}"
    );
    // The registered form itself is the tenant's to lease.
    acquire(&a, "Cop", m.memory_instance_id, 30.0)
        .await
        .unwrap();
}

/// I7 is service-wide, I9 is not broken by it: when tenant B takes over a name whose
/// lease of tenant A expired, A's audit says its lease expired, and B's says only
/// that B acquired it. Neither learns the other's fencing token, holder or lease.
#[tokio::test]
async fn a_takeover_across_tenants_writes_each_tenants_audit_only_of_its_own_lease() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op_a = server.operator();
    let (_, a) = server.agent("holder-a").await;
    let (_, op_b) = server.tenant("taker-b").await;
    let b_agent = op_b
        .create_agent(&switchboard_tests::sdk::proto::CreateAgent {
            name: "taker".into(),
        })
        .await
        .expect("B's agent");
    let b = Client::new(&server.url, b_agent.token.as_str()).expect("client");
    let m_a = memory(&a).await;
    let m_b = memory(&b).await;
    let held = acquire(&a, "shared-name", m_a.memory_instance_id, 1.0)
        .await
        .expect("A holds the name");
    server.advance(Duration::from_secs(30));
    let taken = acquire(&b, "shared-name", m_b.memory_instance_id, 10.0)
        .await
        .expect("B takes the name after A's lease expired");
    assert!(
        taken.fencing_token > held.fencing_token,
        "I7: tokens only grow"
    );

    let b_audit = op_b.lease_audit().await.expect("B's audit").entries;
    let b_events: Vec<(&str, u64)> = b_audit
        .iter()
        .rev()
        .map(|e| (e.event.as_str(), e.fencing_token))
        .collect();
    assert_eq!(
        b_events,
        [("acquired", taken.fencing_token)],
        "B's audit has B's lease only: {b_audit:?}"
    );
    assert!(
        b_audit.iter().all(|e| !e.actor.contains("holder-a")),
        "{b_audit:?}"
    );
    let a_audit = op_a.lease_audit().await.expect("A's audit").entries;
    let a_events: Vec<(&str, &str, u64)> = a_audit
        .iter()
        .rev()
        .map(|e| (e.event.as_str(), e.actor.as_str(), e.fencing_token))
        .collect();
    assert_eq!(
        a_events,
        [
            ("acquired", "agent:holder-a", held.fencing_token),
            ("expired", "system:leases", held.fencing_token)
        ],
        "A's audit tells its lease's end, not who took the name: {a_audit:?}"
    );
}

/// A deleted agent's leases end with it (audited), and an agent created later with
/// its name inherits nothing: not the lease, not its fencing token, not the memory's
/// records. Holders are identified by the agent's id, not its name.
#[tokio::test]
async fn a_deleted_agents_leases_end_and_its_namesake_inherits_none() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, dave) = server.agent("dave").await;
    let m = memory(&dave).await;
    let memory_id = m.memory_instance_id;
    let lease = acquire(&dave, "dave-writer", memory_id, 300.0)
        .await
        .expect("lease");
    dave.put_record(
        memory_id,
        "plan",
        &json!({"step": 1}),
        lease.fencing_token,
        switchboard_tests::sdk::Precondition::None,
    )
    .await
    .expect("dave writes");
    op.delete_agent("dave").await.expect("delete dave");

    let leases = op.ops_leases().await.expect("leases").leases;
    assert!(
        leases.iter().all(|l| l.lease.lease_id != lease.lease_id),
        "the deleted agent's lease ended with it: {leases:?}"
    );
    let audit = op.lease_audit().await.expect("audit").entries;
    assert_eq!(
        audit.first().map(|e| (e.event.as_str(), e.actor.as_str())),
        Some(("agent_deleted", "operator")),
        "the end is audited: {audit:?}"
    );

    // A new agent of the same name: none of the old lease is its own.
    let (_, namesake) = server.agent("dave").await;
    refused(
        namesake.renew_lease(&renew(&lease)).await,
        409,
        "stale_fence",
    );
    refused(
        namesake
            .put_record(
                memory_id,
                "plan",
                &json!({"step": 666}),
                lease.fencing_token,
                switchboard_tests::sdk::Precondition::None,
            )
            .await,
        403,
        "forbidden",
    );
    refused(
        namesake
            .get_record(memory_id, "plan", lease.fencing_token)
            .await,
        403,
        "forbidden",
    );
    // It starts afresh, after the lock delay an ended lease leaves: a new lease on
    // the name, with a higher token.
    server.advance(Duration::from_secs(10));
    let fresh = acquire(&namesake, "dave-writer", memory_id, 300.0)
        .await
        .expect("the namesake acquires anew");
    assert!(fresh.fencing_token > lease.fencing_token);
}

/// A release (or renewal) naming a live lease by its id, with fields that name no
/// lease, is a mismatch (409 `stale_fence`): never 204 with the lease left held.
#[tokio::test]
async fn a_release_whose_fields_match_nothing_is_refused_and_the_lease_stays() {
    let server = TestServer::start().await;
    let (_, agent) = server.agent("holder").await;
    let m = memory(&agent).await;
    let other = memory(&agent).await;
    let lease = acquire(&agent, "mismatched", m.memory_instance_id, 300.0)
        .await
        .expect("lease");
    let mismatched = ReleaseLease {
        lease_id: Some(lease.lease_id),
        canonical_name: Some("mismatched".into()),
        // Another memory: the fields name no lease.
        memory_instance_id: Some(other.memory_instance_id),
        owner_client_id: lease.owner_client.clone(),
        fencing_token: lease.fencing_token,
    };
    refused(agent.release_lease(&mismatched).await, 409, "stale_fence");
    let leases = server.operator().ops_leases().await.unwrap().leases;
    assert!(
        leases.iter().any(|l| l.lease.lease_id == lease.lease_id),
        "the lease is still held: {leases:?}"
    );
    // Its own fields release it; a second release of it is 204 too.
    agent
        .release_lease(&ReleaseLease::of(&lease))
        .await
        .expect("release");
    agent
        .release_lease(&mismatched)
        .await
        .expect("already over: 204");
}
