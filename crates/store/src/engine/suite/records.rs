//! The data plane's statements, with the event and lease-audit statements.

use super::{message, operator};
use crate::engine::events::deliver;
use crate::engine::lease_audit::{self, LeaseAuditStatements};
use crate::engine::records::{RecordStatements, RecordWrite, Rejection};
use crate::lease_rules::Line;
use crate::*;
use switchboard_proto::{AgentId, MemoryId, TenantId};

/// What [`check_seeded`] needs in the database: two tenants, two agents of the
/// first (`w1`, `w2`), and a memory of it with a live lease of `w1`: fencing token
/// `token`, issued to `agent:w1` with owner client `host`, expiring at 10,000.
#[derive(Clone, Copy)]
struct Seeded {
    pub(crate) tenant: TenantId,
    pub(crate) other: TenantId,
    pub(crate) a1: AgentId,
    pub(crate) a2: AgentId,
    pub(crate) memory: MemoryId,
    pub(crate) token: u64,
}

/// Every [`RecordStatements`] method (and the event and audit statements they
/// lean on) against a fresh database of `d`'s backend.
pub(super) async fn check<D: RecordStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let seeded = seed(d).await;
    check_seeded(d, &seeded).await;
}

/// Seeds through the store's public methods.
async fn seed<D>(d: &Engine<D>) -> Seeded
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("suite", 0).await.expect("tenant");
    let other = d.ensure_tenant("other", 0).await.expect("tenant");
    let a1 = d
        .create_agent(tenant, "w1", &[1; 32], &[], None, 0)
        .await
        .expect("agent")
        .id;
    let a2 = d
        .create_agent(tenant, "w2", &[2; 32], &[], None, 0)
        .await
        .expect("agent")
        .id;
    let memory = d
        .register_memory(tenant, None, 0)
        .await
        .expect("memory")
        .memory_instance_id;
    let lease = d
        .acquire_lease(
            &NewLease {
                tenant,
                name: "writer".into(),
                skeleton: "writer".into(),
                display_name: None,
                memory,
                ttl_ms: 10_000,
                lock_delay_ms: 0,
                owner_client: Some("host".into()),
                holder: "agent:w1".into(),
                holder_key: format!("agent:{a1}"),
            },
            None,
            0,
        )
        .await
        .expect("lease");
    Seeded {
        tenant,
        other,
        a1,
        a2,
        memory,
        token: lease.fencing_token,
    }
}

/// The checks, on a database seeded as [`Seeded`] says (by [`seed`], or by a
/// backend whose store methods are not all there yet, with its own SQL).
async fn check_seeded<D: RecordStatements>(d: &Engine<D>, s: &Seeded)
where
    Engine<D>: Store,
{
    let Seeded {
        tenant,
        other,
        a1,
        a2,
        memory,
        token: t,
    } = *s;
    let mut tx = d.begin_write().await.expect("begin");
    // The fence, within the tenant only.
    assert_eq!(
        d.lock_memory_fence(&mut tx, tenant, memory).await.unwrap(),
        Some(t as i64)
    );
    assert_eq!(
        d.lock_memory_fence(&mut tx, other, memory).await.unwrap(),
        None
    );
    assert_eq!(
        d.lock_memory_fence(&mut tx, tenant, MemoryId::new())
            .await
            .unwrap(),
        None
    );
    // Whom the token went to; nobody for one never issued.
    let issued = d.issued(&mut tx, memory, t).await.unwrap().expect("issued");
    assert_eq!(
        (&issued.holder, issued.owner_client.as_deref()),
        (
            &crate::record_rules::IssuedTo::Key(format!("agent:{a1}")),
            Some("host")
        )
    );
    assert!(d.issued(&mut tx, memory, t + 1).await.unwrap().is_none());
    // Live until its expiry, only with its own token.
    assert!(d.lock_live_lease(&mut tx, memory, t, 9_999).await.unwrap());
    assert!(!d.lock_live_lease(&mut tx, memory, t, 10_000).await.unwrap());
    assert!(!d.lock_live_lease(&mut tx, memory, t + 1, 0).await.unwrap());
    d.see_fence(&mut tx, memory, t).await.unwrap();
    // Records: none, put, overwrite, delete.
    assert_eq!(d.load_record(&mut tx, memory, "k").await.unwrap(), None);
    let put = RecordWrite {
        memory,
        key: "k",
        value: "{\"v\":1}",
        version: 1,
        token: t,
        now: 5,
    };
    d.insert_record(&mut tx, &put).await.unwrap();
    let r = d
        .load_record(&mut tx, memory, "k")
        .await
        .unwrap()
        .expect("put");
    assert_eq!(
        (r.value.clone(), r.version, r.fencing_token),
        (serde_json::json!({"v": 1}), 1, t)
    );
    let overwrite = RecordWrite {
        value: "{\"v\":2}",
        version: 2,
        now: 6,
        ..put
    };
    d.update_record(&mut tx, &overwrite).await.unwrap();
    let r = d
        .load_record(&mut tx, memory, "k")
        .await
        .unwrap()
        .expect("put");
    assert_eq!((r.value, r.version), (serde_json::json!({"v": 2}), 2));
    assert_eq!(d.load_record(&mut tx, memory, "other").await.unwrap(), None);
    d.delete_record(&mut tx, memory, "k").await.unwrap();
    assert_eq!(d.load_record(&mut tx, memory, "k").await.unwrap(), None);
    // Memories by tenant; subscriptions idempotent, listed in agent-id order.
    assert!(d.memory_exists(&mut tx, tenant, memory).await.unwrap());
    assert!(!d.memory_exists(&mut tx, other, memory).await.unwrap());
    assert!(d.subscribers(&mut tx, memory).await.unwrap().is_empty());
    for agent in [a2, a2, a1] {
        d.set_subscribed(&mut tx, memory, agent, true)
            .await
            .unwrap();
    }
    let mut both = vec![a1, a2];
    both.sort_by_key(|a| a.to_string());
    assert_eq!(d.subscribers(&mut tx, memory).await.unwrap(), both);
    d.set_subscribed(&mut tx, memory, a2, false).await.unwrap();
    d.set_subscribed(&mut tx, memory, a2, false).await.unwrap();
    assert_eq!(d.subscribers(&mut tx, memory).await.unwrap(), [a1]);
    // Events take the agent's next sequence numbers.
    let first = deliver(&d.0, &mut tx, a1, &operator(tenant, &message(1), 0))
        .await
        .unwrap();
    let second = deliver(&d.0, &mut tx, a1, &operator(tenant, &message(2), 0))
        .await
        .unwrap();
    // Not to an agent of another tenant.
    assert!(
        deliver(&d.0, &mut tx, a1, &operator(other, &message(3), 0))
            .await
            .is_err()
    );
    assert_eq!((first.agent_id, first.seq, second.seq), (a1, 1, 2));
    // The portable sequence statements (SQLite and PostgreSQL take it in one).
    assert!(!d.take_seq(&mut tx, other, a2).await.unwrap());
    assert!(d.take_seq(&mut tx, tenant, a2).await.unwrap());
    assert_eq!(d.head_seq(&mut tx, a2).await.unwrap(), 1);
    // A refusal: its row and its audit line.
    d.insert_rejection(
        &mut tx,
        &Rejection {
            tenant,
            memory,
            presented: t as i64 - 1,
            current: t as i64,
            owner_client: Some("host"),
            actor: "agent:w2",
            operation: "put k",
            at: 7,
        },
    )
    .await
    .unwrap();
    let m = memory.to_string();
    let line = Line {
        event: "fence_rejected",
        name: None,
        memory: &m,
        token: t as i64 - 1,
        actor: "agent:w2",
    };
    lease_audit::write(&d.0, &mut tx, tenant, line, 7)
        .await
        .unwrap();
    // The first line of a tenant makes its salt, which stays.
    assert_eq!(d.audit_salt(&mut tx, other).await.unwrap(), None);
    let line = Line {
        event: "fence_rejected",
        name: None,
        memory: &m,
        token: t as i64,
        actor: "agent:x",
    };
    lease_audit::write(&d.0, &mut tx, other, line, 7)
        .await
        .unwrap();
    let salt = d.audit_salt(&mut tx, other).await.unwrap().expect("made");
    d.keep_audit_salt(&mut tx, other, &[9; 32]).await.unwrap();
    assert_eq!(d.audit_salt(&mut tx, other).await.unwrap(), Some(salt));
    d.commit(tx, &[]).await.expect("commit");

    let rejections = RecordStatements::fencing_rejections(&d.0, tenant, 10)
        .await
        .unwrap();
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    let r = &rejections[0];
    assert_eq!(
        (
            r.presented_token,
            r.current_token,
            r.owner_client.as_deref()
        ),
        (t - 1, t, Some("host"))
    );
    assert_eq!(
        (r.actor.as_str(), r.operation.as_str()),
        ("agent:w2", "put k")
    );
    assert!(
        RecordStatements::fencing_rejections(&d.0, other, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let audit = LeaseAuditStatements::audit_lines(&d.0, tenant, 10)
        .await
        .unwrap();
    assert!(
        audit.iter().any(|e| e.event == "fence_rejected"),
        "{audit:?}"
    );
    let audit = LeaseAuditStatements::audit_lines(&d.0, other, 10)
        .await
        .unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].actor, "agent:x");

    // What a transaction does is gone when it ends without a commit.
    let mut tx = d.begin_write().await.expect("begin");
    let gone = RecordWrite {
        memory,
        key: "gone",
        value: "1",
        version: 1,
        token: t,
        now: 8,
    };
    d.insert_record(&mut tx, &gone).await.unwrap();
    drop(tx);
    let mut tx = d.begin_write().await.expect("begin");
    assert_eq!(d.load_record(&mut tx, memory, "gone").await.unwrap(), None);
    d.commit(tx, &[]).await.expect("commit");
}
