//! The horizons (issue 36): each table that only grew is trimmed by age, in
//! batches, and keeps what must stay whatever its age (a live lease's token record,
//! a running job's row). Times here are far above the other checks' (it runs last).

use super::note;
use crate::*;
use switchboard_proto::MemoryId;

const OLD: i64 = 10_000_000;
const NEW: i64 = 20_000_000;
const CUT: i64 = 15_000_000;

fn lease(tenant: TenantId, name: &str, memory: MemoryId, who: &Actor) -> NewLease {
    NewLease {
        tenant,
        name: name.into(),
        skeleton: name.into(),
        display_name: None,
        memory,
        ttl_ms: 100_000_000,
        lock_delay_ms: 0,
        owner_client: None,
        holder: who.to_string(),
        holder_key: who.key(),
    }
}

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("horizons", 0).await.unwrap();
    let agent = d
        .create_agent(tenant, "keeper", &[0x91; 32], &[], None, OLD)
        .await
        .unwrap();
    let who = Actor::Agent {
        id: agent.id,
        name: agent.name.clone(),
    };
    let m_old = d
        .register_memory(tenant, None, OLD)
        .await
        .unwrap()
        .memory_instance_id;
    let m_live = d
        .register_memory(tenant, None, OLD)
        .await
        .unwrap()
        .memory_instance_id;
    // An old lease, released; an old lease still live; a new one.
    let released = d
        .acquire_lease(&lease(tenant, "h-old", m_old, &who), None, OLD)
        .await
        .unwrap();
    d.release_lease(
        tenant,
        released.lease_id,
        released.fencing_token,
        &who,
        OLD + 1,
    )
    .await
    .unwrap();
    let live = d
        .acquire_lease(&lease(tenant, "h-live", m_live, &who), None, OLD)
        .await
        .unwrap();
    // An old fencing rejection: the released lease's token.
    let stale = RecordCall {
        tenant,
        memory: m_old,
        key: "k",
        token: released.fencing_token,
        who: &who,
        op: RecordOp::Get,
    };
    assert!(d.record(&stale, OLD + 2).await.is_err());
    // Old and new operator audit rows; an old revoked credential and a new one.
    d.insert_token(
        &[0x92; 32],
        tenant,
        &["ops:read".into()],
        "old",
        Some(&note()),
        OLD,
    )
    .await
    .unwrap();
    d.revoke_credential(tenant, &[0x92; 32], &note(), OLD)
        .await
        .unwrap();
    d.insert_token(
        &[0x93; 32],
        tenant,
        &["ops:read".into()],
        "new",
        Some(&note()),
        NEW,
    )
    .await
    .unwrap();
    d.revoke_credential(tenant, &[0x93; 32], &note(), NEW)
        .await
        .unwrap();

    // A new line: the live lease renewed.
    d.renew_lease(tenant, live.lease_id, live.fencing_token, None, &who, NEW)
        .await
        .unwrap();
    let before = d.lease_audit(tenant, 100).await.unwrap();
    assert_eq!(before.len(), 5, "with the fence's refusal: {before:?}");
    assert!(d.trim(Horizon::LeaseAudit, CUT).await.unwrap() >= 4);
    let after = d.lease_audit(tenant, 100).await.unwrap();
    assert_eq!(
        after.iter().map(|l| l.event.as_str()).collect::<Vec<_>>(),
        ["renewed"],
        "the old lines go; the renewal after the cut stays"
    );

    let rejections = d.fencing_rejections(tenant, 100).await.unwrap().len();
    assert_eq!(rejections, 1);
    assert!(d.trim(Horizon::FencingRejections, CUT).await.unwrap() >= 1);
    assert!(d.fencing_rejections(tenant, 100).await.unwrap().is_empty());

    let rows = d.audit(tenant, 100).await.unwrap();
    assert!(rows.iter().any(|r| r.at == crate::clock::to_timestamp(OLD)));
    d.trim(Horizon::AuditLog, CUT).await.unwrap();
    let rows = d.audit(tenant, 100).await.unwrap();
    assert!(!rows.is_empty(), "the new rows stay");
    assert!(
        rows.iter().all(|r| r.at >= crate::clock::to_timestamp(CUT)),
        "{rows:?}"
    );

    let labels =
        |rows: Vec<CredentialRow>| -> Vec<String> { rows.into_iter().map(|c| c.label).collect() };
    assert!(labels(d.credentials(tenant).await.unwrap()).contains(&"old".to_owned()));
    d.trim(Horizon::RevokedTokens, CUT).await.unwrap();
    let left = labels(d.credentials(tenant).await.unwrap());
    assert!(!left.contains(&"old".to_owned()), "{left:?}");
    assert!(
        left.contains(&"new".to_owned()),
        "revoked after the cut: kept"
    );
    assert!(
        left.iter().any(|l| l.starts_with("agent:")),
        "a live credential stays whatever its age: {left:?}"
    );

    // The released lease's token record goes; the live lease's stays (the data
    // plane reads it), however old.
    d.trim(Horizon::IssuedTokens, CUT).await.unwrap();
    let read = RecordCall {
        tenant,
        memory: m_live,
        key: "k",
        token: live.fencing_token,
        who: &who,
        op: RecordOp::Get,
    };
    assert!(
        matches!(d.record(&read, NEW).await, Err(StoreError::NotFound)),
        "the live holder is still the holder (no such record, not refused)"
    );
    // A token whose record is gone is refused as a stranger's (403), as old as it is.
    assert!(matches!(
        d.record(&stale, NEW).await,
        Err(StoreError::NotHolder(_))
    ));
}
