//! The lease transactions over the statements `leases.rs` checks: fencing tokens
//! above both fences, lock delays, renewals, releases, forced releases, idempotent
//! acquisition; and a database upgraded with live leases.

use super::leases::{key, lease, who};
use crate::engine::leases::LeaseDriver;
use crate::*;
use switchboard_proto::{LeaseId, MemoryId};

/// The transactions over those statements: fencing tokens above both fences, lock
/// delays, renewals, releases, forced releases, idempotent acquisition.
pub(super) async fn check<D: LeaseDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    let memory = d.register_memory(tenant, Some("m"), 0).await.unwrap();
    let m = memory.memory_instance_id;
    assert!(matches!(
        d.branch_memory(tenant, m, 1, None, 0).await,
        Err(StoreError::Invalid(_))
    ));
    let k = key(tenant, 3);
    assert_eq!(
        d.idem_begin(&k, 0, 60_000, 3_600_000).await.unwrap(),
        IdemBegin::Fresh
    );
    let first = d
        .acquire_lease(&lease(tenant, "l-tx", m, "agent:w1"), Some(&k), 0)
        .await
        .expect("acquire");
    assert_eq!(first.fencing_token, 1);
    assert!(matches!(
        d.idem_begin(&k, 1, 60_000, 3_600_000).await.unwrap(),
        IdemBegin::Replay(r) if r.status == 201
    ));
    // The name and the memory, each held by it.
    let m2 = d
        .register_memory(tenant, None, 0)
        .await
        .unwrap()
        .memory_instance_id;
    for other in [
        lease(tenant, "l-tx", m2, "agent:w2"),
        lease(tenant, "l-tx2", m, "agent:w2"),
    ] {
        assert!(matches!(
            d.acquire_lease(&other, None, 1).await,
            Err(StoreError::LeaseHeld { .. })
        ));
        assert!(matches!(
            d.lease_precheck(&other, &key(tenant, 4), 1).await,
            Err(StoreError::LeaseHeld { .. })
        ));
    }
    // A known key is left to the idempotency layer.
    d.lease_precheck(&lease(tenant, "l-tx", m2, "agent:w2"), &k, 1)
        .await
        .expect("a known key passes");
    let id = first.lease_id;
    assert!(matches!(
        d.renew_lease(tenant, id, 1, None, &who("agent:w2"), 1)
            .await,
        Err(StoreError::NotHolder(_))
    ));
    let renewed = d
        .renew_lease(tenant, id, 1, Some(5_000), &who("agent:w1"), 500)
        .await
        .expect("renew");
    assert_eq!(renewed.ttl_seconds, 5.0);
    d.release_lease(tenant, id, 1, &who("agent:w1"), 600)
        .await
        .unwrap();
    d.release_lease(tenant, id, 1, &who("agent:w1"), 600)
        .await
        .expect("releasing twice");
    // No lock delay after a clean release; the next token is above both fences.
    let second = d
        .acquire_lease(&lease(tenant, "l-tx", m2, "agent:w1"), None, 600)
        .await
        .expect("acquire again");
    assert_eq!(second.fencing_token, 2);
    let forced = d
        .force_release_lease(tenant, second.lease_id, &super::note(), 700)
        .await
        .expect("force release");
    assert!(!forced.expired);
    assert!(d.lease_on_memory(tenant, m2).await.unwrap().is_none());
    assert_eq!(
        d.memory(tenant, m2).await.unwrap().fencing_token,
        Some(3),
        "a forced release moves the fence past the lease's token"
    );
    // Its lock delay (50 ms) holds the name and the memory.
    let again = lease(tenant, "l-tx", m2, "agent:w1");
    assert!(matches!(
        d.acquire_lease(&again, None, 749).await,
        Err(StoreError::LeaseHeld { .. })
    ));
    let third = d
        .acquire_lease(&again, None, 750)
        .await
        .expect("after the delay");
    assert_eq!(third.fencing_token, 4);
    // An expired lease is taken over after its lock delay.
    let taken = lease(tenant, "l-tx", m2, "agent:w2");
    assert!(matches!(
        d.acquire_lease(&taken, None, 1_770).await,
        Err(StoreError::LeaseHeld { .. })
    ));
    let fourth = d
        .acquire_lease(&taken, None, 1_800)
        .await
        .expect("take over");
    assert_eq!(fourth.fencing_token, 5);
    let ops = d.leases(tenant, 1_800).await.unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0].holder, "agent:w2");
    let audit = d.lease_audit(tenant, 50).await.unwrap();
    let events: Vec<&str> = audit.iter().rev().map(|e| e.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "acquired",
            "renewed",
            "released",
            "acquired",
            "force_released",
            "acquired",
            "expired",
            "taken_over",
            "acquired"
        ]
    );
    let lineage = d.lineage(tenant, m).await.unwrap();
    assert!(lineage.ancestors.is_empty() && lineage.descendants.is_empty());
}

/// A database written before holders were kept by id (migration 17) keeps its live
/// leases through the upgrade to 18: their holder, found by name among the live
/// agents, renews and writes as before; an agent later given a deleted holder's
/// name does not.
#[tokio::test]
async fn an_upgraded_database_keeps_its_lease_holders() {
    use crate::sqlite::SqliteStore;
    let (tenant, agent, gone) = (TenantId::new(), AgentId::new(), AgentId::new());
    let (memory, old_memory, lease, old_lease) = (
        MemoryId::new(),
        MemoryId::new(),
        LeaseId::new(),
        LeaseId::new(),
    );
    let statements = [
        format!("INSERT INTO tenants (id, name, created_at) VALUES ('{tenant}', 'old', 0)"),
        format!(
            "INSERT INTO agents (id, tenant_id, name, created_at) VALUES \
             ('{agent}', '{tenant}', 'holder', 0), \
             ('{gone}', '{tenant}', 'deleted:{gone}', 0)"
        ),
        format!("UPDATE agents SET deleted_at = 5 WHERE id = '{gone}'"),
        format!(
            "INSERT INTO memories (id, tenant_id, fence, created_at) VALUES \
             ('{memory}', '{tenant}', 1, 0), ('{old_memory}', '{tenant}', 1, 0)"
        ),
        "INSERT INTO name_fences (skeleton, fence) VALUES ('writer', 1), ('zombie', 1)".to_owned(),
        format!(
            "INSERT INTO leases (id, tenant_id, name, skeleton, memory_id, fence, holder, \
             ttl_ms, lock_delay_ms, acquired_at, expires_at) VALUES \
             ('{lease}', '{tenant}', 'writer', 'writer', '{memory}', 1, 'agent:holder', \
              100000, 0, 0, 100000), \
             ('{old_lease}', '{tenant}', 'zombie', 'zombie', '{old_memory}', 1, \
              'agent:ghost', 100000, 0, 0, 100000)"
        ),
        format!(
            "INSERT INTO issued_tokens (memory_id, fence, lease_id, holder, issued_at) VALUES \
             ('{memory}', 1, '{lease}', 'agent:holder', 0), \
             ('{old_memory}', 1, '{old_lease}', 'agent:ghost', 0)"
        ),
    ];
    let (_dir, url) = super::old_sqlite_database(17, &statements).await;

    let d = SqliteStore::open(&url, "normal", crate::hooks::StoreHooks::default())
        .await
        .expect("open and upgrade");
    let holder = Actor::Agent {
        id: agent,
        name: "holder".into(),
    };
    d.renew_lease(tenant, lease, 1, None, &holder, 10)
        .await
        .expect("the holder renews after the upgrade");
    let put = RecordCall {
        tenant,
        memory,
        key: "plan",
        token: 1,
        who: &holder,
        op: RecordOp::Put {
            value: "1".into(),
            if_match: None,
            if_none_match: false,
        },
    };
    d.record(&put, 11).await.expect("and writes");
    // `agent:ghost` was deleted before the upgrade (no live agent of that name):
    // its lease has no key, and a new agent named ghost is not its holder.
    let ghost = d
        .create_agent(tenant, "ghost", &[0x77; 32], &[], None, 12)
        .await
        .expect("a new ghost");
    let namesake = ghost.actor();
    assert!(matches!(
        d.renew_lease(tenant, old_lease, 1, None, &namesake, 13)
            .await,
        Err(StoreError::NotHolder(_))
    ));
    let write = RecordCall {
        memory: old_memory,
        who: &namesake,
        ..put.clone()
    };
    assert!(
        matches!(d.record(&write, 14).await, Err(StoreError::NotHolder(_))),
        "nor does it write the old holder's memory"
    );
    d.close().await;
}
