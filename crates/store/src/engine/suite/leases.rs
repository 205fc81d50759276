//! The statements of memories, names and leases, the lease driver's methods, and
//! the lease transactions written over them.

use crate::Planned;
use crate::engine::leases::LeaseDriver;
use crate::engine::memories::NewMemory;
use crate::*;
use std::time::Duration;
use switchboard_proto::{LeaseId, MemoryId};

pub(super) fn lease(tenant: TenantId, name: &str, memory: MemoryId, holder: &str) -> NewLease {
    let who = who(holder);
    NewLease {
        tenant,
        name: name.into(),
        skeleton: name.into(),
        display_name: None,
        memory,
        ttl_ms: 1_000,
        lock_delay_ms: 50,
        owner_client: Some("host".into()),
        holder: who.to_string(),
        holder_key: who.key(),
    }
}

/// The actor `agent:<name>` (with an id of its own per name) or `operator`.
pub(super) fn who(holder: &str) -> Actor {
    match holder.strip_prefix("agent:") {
        Some(name) => {
            let n = name.bytes().fold(0u64, |h, b| h * 31 + u64::from(b)) % 1_000_000;
            Actor::Agent {
                id: format!("0192f0c4-0000-7000-8000-{n:012}").parse().unwrap(),
                name: name.to_owned(),
            }
        }
        None => Actor::Operator,
    }
}

pub(super) fn key(tenant: TenantId, n: u8) -> IdemKey {
    IdemKey {
        tenant_id: tenant,
        principal: "agent:w1".into(),
        key_hash: vec![n; 32],
        fingerprint: vec![7; 32],
        owner: vec![1; 16],
    }
}

fn unique_violation(e: &StoreError) -> bool {
    matches!(e, StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation())
}

/// Every `MemoryStatements`, `LeaseStatements` and [`LeaseDriver`] method, then
/// the transactions, against a fresh database of `d`'s backend.
pub(super) async fn check<D: LeaseDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("leases", 0).await.expect("tenant");
    let other = d.ensure_tenant("leases-other", 0).await.expect("tenant");
    memories(d, tenant, other).await;
    names(d, tenant).await;
    rows(d, tenant, other).await;
    name_lock(d).await;
    super::lease_transactions::check(d, tenant).await;
}

async fn memories<D: LeaseDriver>(d: &Engine<D>, tenant: TenantId, other: TenantId)
where
    Engine<D>: Store,
{
    let (root, child) = (MemoryId::new(), MemoryId::new());
    let mut tx = d.begin_write().await.expect("begin");
    for (id, label, parent, now) in [
        (root, Some("root"), None, 1),
        (child, None, Some((root, 0)), 2),
    ] {
        let m = NewMemory {
            id,
            tenant,
            label,
            parent,
            now,
        };
        d.insert_memory(&mut tx, &m).await.unwrap();
    }
    let m = d
        .load_memory(&mut tx, tenant, root, false)
        .await
        .unwrap()
        .expect("root");
    assert_eq!(
        (
            m.label.as_deref(),
            m.fencing_token,
            m.parent_memory_instance_id
        ),
        (Some("root"), Some(0), None)
    );
    let c = d
        .load_memory(&mut tx, tenant, child, true)
        .await
        .unwrap()
        .expect("child");
    assert_eq!(
        (c.parent_memory_instance_id, c.branched_at_token, c.label),
        (Some(root), Some(0), None)
    );
    // Within the tenant only.
    assert!(
        d.load_memory(&mut tx, other, root, false)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.load_memory(&mut tx, other, root, true)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.load_memory(&mut tx, tenant, MemoryId::new(), false)
            .await
            .unwrap()
            .is_none()
    );
    let children = d.child_memories(&mut tx, tenant, root).await.unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].memory_instance_id, child);
    assert!(
        d.child_memories(&mut tx, other, root)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        d.child_memories(&mut tx, tenant, child)
            .await
            .unwrap()
            .is_empty()
    );
    // Fences and lock delays only grow.
    assert_eq!(d.memory_quiet(&mut tx, root).await.unwrap(), 0);
    d.raise_memory_fence(&mut tx, root, 5, 100).await.unwrap();
    d.raise_memory_fence(&mut tx, root, 3, 50).await.unwrap();
    let m = d
        .load_memory(&mut tx, tenant, root, false)
        .await
        .unwrap()
        .expect("root");
    assert_eq!(m.fencing_token, Some(5), "the higher fence stays");
    assert_eq!(d.memory_quiet(&mut tx, root).await.unwrap(), 100);
    d.raise_memory_fence(&mut tx, root, 6, 120).await.unwrap();
    assert_eq!(d.memory_quiet(&mut tx, root).await.unwrap(), 120);
    assert!(matches!(
        d.memory_quiet(&mut tx, MemoryId::new()).await,
        Err(StoreError::NotFound)
    ));
    d.commit(tx, &[]).await.expect("commit");

    let read = d
        .read_memory(tenant, root)
        .await
        .unwrap()
        .expect("committed");
    assert_eq!(read.fencing_token, Some(6));
    assert!(d.read_memory(other, root).await.unwrap().is_none());
    // A read snapshot sees what was committed.
    let mut tx = d.begin_read().await.expect("begin read");
    assert!(
        d.load_memory(&mut tx, tenant, child, false)
            .await
            .unwrap()
            .is_some()
    );
    d.commit(tx, &[]).await.expect("end read");
}

async fn names<D: LeaseDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    let planned = Planned {
        name: "registered".into(),
        skeleton: "reg1stered".into(),
        original: "Registered!".into(),
        created_at: 1,
    };
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        d.name_registration(&mut tx, "reg1stered")
            .await
            .unwrap()
            .is_none()
    );
    assert!(d.register_name(&mut tx, tenant, &planned).await.unwrap());
    assert!(
        !d.register_name(&mut tx, tenant, &planned).await.unwrap(),
        "a skeleton registers once"
    );
    assert_eq!(
        d.name_registration(&mut tx, "reg1stered").await.unwrap(),
        Some(("registered".into(), tenant.to_string()))
    );
    // A name's fence row: none, made at 0 (once), raised, never lowered.
    assert_eq!(d.name_fence(&mut tx, "l-n", false).await.unwrap(), None);
    assert_eq!(d.name_fence(&mut tx, "l-n", true).await.unwrap(), None);
    d.make_name_fence(&mut tx, "l-n").await.unwrap();
    assert_eq!(
        d.name_fence(&mut tx, "l-n", false).await.unwrap(),
        Some((0, 0))
    );
    d.raise_name_fence(&mut tx, "l-n", 4, 10).await.unwrap();
    d.make_name_fence(&mut tx, "l-n").await.unwrap();
    assert_eq!(
        d.name_fence(&mut tx, "l-n", false).await.unwrap(),
        Some((4, 10))
    );
    d.raise_name_fence(&mut tx, "l-n", 2, 20).await.unwrap();
    assert_eq!(
        d.name_fence(&mut tx, "l-n", true).await.unwrap(),
        Some((4, 20))
    );
    d.raise_name_fence(&mut tx, "l-fresh", 3, 0).await.unwrap();
    assert_eq!(
        d.name_fence(&mut tx, "l-fresh", false).await.unwrap(),
        Some((3, 0))
    );
    // The driver's lock: a name that never had a lease reads as fence 0 (a row made
    // for the lock, or none).
    assert_eq!(d.lock_name(&mut tx, "l-n").await.unwrap(), Some((4, 20)));
    let new = d.lock_name(&mut tx, "l-new").await.unwrap();
    assert!(matches!(new, None | Some((0, 0))), "{new:?}");
    d.commit(tx, &[]).await.expect("commit");

    let taken = d
        .read_registered_names(&["reg1stered".into(), "nobody".into()])
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(
        taken["reg1stered"],
        ("registered".to_owned(), "Registered!".to_owned())
    );
    assert!(d.read_registered_names(&[]).await.unwrap().is_empty());
}

/// Lease rows, issued tokens and the idempotency statements beside them.
async fn rows<D: LeaseDriver>(d: &Engine<D>, tenant: TenantId, other: TenantId)
where
    Engine<D>: Store,
{
    let memory = d
        .register_memory(tenant, None, 0)
        .await
        .unwrap()
        .memory_instance_id;
    let elsewhere = d
        .register_memory(tenant, None, 0)
        .await
        .unwrap()
        .memory_instance_id;
    let new = lease(tenant, "l-writer", memory, "agent:w1");
    let (k, unknown) = (key(tenant, 1), key(tenant, 2));
    assert_eq!(
        d.idem_begin(&k, 5, 60_000, 3_600_000).await.unwrap(),
        IdemBegin::Fresh
    );
    let id = LeaseId::new();

    let mut tx = d.begin_write().await.expect("begin");
    assert!(d.key_known(&mut tx, &k, 5).await.unwrap());
    assert!(
        !d.key_known(&mut tx, &k, 3_600_005).await.unwrap(),
        "expired"
    );
    assert!(!d.key_known(&mut tx, &unknown, 5).await.unwrap());
    d.insert_lease(&mut tx, id, &new, 6, 10).await.unwrap();
    d.insert_issued(&mut tx, &new, id, 6, 10).await.unwrap();
    let held = d
        .load_lease(&mut tx, tenant, id, false)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(
        (
            held.lease.fencing_token,
            held.lease.name.as_str(),
            held.lease.owner_client.as_deref(),
            held.lease.memory_instance_id,
        ),
        (6, "l-writer", Some("host"), memory)
    );
    assert_eq!(
        (
            held.skeleton.as_str(),
            held.holder.as_str(),
            held.lock_delay_ms,
            held.expires_at
        ),
        ("l-writer", "agent:w1", 50, 1_010)
    );
    assert!(
        d.load_lease(&mut tx, other, id, false)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.load_lease(&mut tx, tenant, id, true)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        d.load_lease(&mut tx, other, id, true)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.load_lease(&mut tx, tenant, LeaseId::new(), true)
            .await
            .unwrap()
            .is_none()
    );
    // Found by the name or by the memory.
    for (skeleton, on, found) in [
        ("l-writer", elsewhere, 1),
        ("l-someone", memory, 1),
        ("l-someone", elsewhere, 0),
    ] {
        let plain = d
            .leases_holding(&mut tx, skeleton, on, false)
            .await
            .unwrap();
        let locked = d.leases_holding(&mut tx, skeleton, on, true).await.unwrap();
        assert_eq!(
            (plain.len(), locked.len()),
            (found, found),
            "{skeleton} {on}"
        );
        assert!(plain.iter().chain(&locked).all(|l| l.lease.lease_id == id));
    }
    d.set_lease_expiry(&mut tx, id, 2_000, 3_000).await.unwrap();
    let renewed = d
        .load_lease(&mut tx, tenant, id, false)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(
        (renewed.expires_at, renewed.lease.ttl_seconds),
        (3_000, 2.0)
    );
    // The response is stored under the key with the change.
    crate::engine::idempotency::finish(&d.0, &mut tx, Some(&k), 201, &renewed.lease)
        .await
        .unwrap();
    crate::engine::idempotency::finish(&d.0, &mut tx, None, 201, &renewed.lease)
        .await
        .unwrap();
    d.commit(tx, &[]).await.expect("commit");

    match d.idem_begin(&k, 6, 60_000, 3_600_000).await.unwrap() {
        IdemBegin::Replay(r) => {
            assert_eq!(r.status, 201);
            let body: switchboard_proto::Lease = serde_json::from_str(&r.body).unwrap();
            assert_eq!(body.lease_id, id);
        }
        other => panic!("expected the stored response, got {other:?}"),
    }
    let on = d
        .read_lease_on_memory(tenant, memory)
        .await
        .unwrap()
        .expect("held");
    assert_eq!(on.lease.lease_id, id);
    assert!(
        d.read_lease_on_memory(other, memory)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.read_lease_on_memory(tenant, elsewhere)
            .await
            .unwrap()
            .is_none()
    );
    let all = d.read_leases(tenant).await.unwrap();
    assert_eq!(all.len(), 1);
    assert!(d.read_leases(other).await.unwrap().is_empty());

    // The unique keys are the backstop: one lease per name, one per memory, one
    // holder per token.
    for (name, on) in [("l-writer", elsewhere), ("l-someone", memory)] {
        let mut tx = d.begin_write().await.expect("begin");
        let clash = lease(tenant, name, on, "agent:w2");
        let e = d
            .insert_lease(&mut tx, LeaseId::new(), &clash, 7, 20)
            .await
            .expect_err("a second lease on the name or the memory");
        assert!(unique_violation(&e), "{e:?}");
    }
    let mut tx = d.begin_write().await.expect("begin");
    let e = d
        .insert_issued(&mut tx, &new, LeaseId::new(), 6, 20)
        .await
        .expect_err("a token issued twice");
    assert!(unique_violation(&e), "{e:?}");
    drop(tx);

    let mut tx = d.begin_write().await.expect("begin");
    d.delete_lease(&mut tx, id).await.unwrap();
    assert!(
        d.load_lease(&mut tx, tenant, id, false)
            .await
            .unwrap()
            .is_none()
    );
    d.commit(tx, &[]).await.expect("commit");
    assert!(d.read_leases(tenant).await.unwrap().is_empty());
}

/// Two transactions locking one name that never had a lease: the second waits for
/// the first one's commit, then reads what it committed.
async fn name_lock<D: LeaseDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let mut first = d.begin_write().await.expect("begin");
    let seen = d.lock_name(&mut first, "l-race").await.unwrap();
    assert_eq!(seen.map_or(0, |f| f.0), 0);
    d.raise_name_fence(&mut first, "l-race", 9, 0)
        .await
        .unwrap();
    let second = async {
        let mut tx = d.begin_write().await.expect("begin");
        let seen = d.lock_name(&mut tx, "l-race").await.unwrap();
        d.commit(tx, &[]).await.expect("commit");
        seen
    };
    tokio::pin!(second);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut second)
            .await
            .is_err(),
        "the second locker waits for the first"
    );
    // Both polled together: the second is queued for the writer, and on SQLite the
    // first's commit may wait for it to join its group commit.
    let (committed, seen) = tokio::join!(d.commit(first, &[]), second);
    committed.expect("commit");
    assert_eq!(seen, Some((9, 0)));
}
