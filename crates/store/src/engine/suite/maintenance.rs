//! The background passes' statements and driver methods (on PostgreSQL, its CTE
//! overrides). Their statements are not per tenant, so the checks run at times
//! before anything the other areas' checks left to expire (150 and later), and look
//! for this area's rows among what they return.

use super::{last_step, message_with, send};
use crate::engine::maintenance::{ExpiredLease, MaintenanceDriver, ReturnedLease};
use crate::*;
use switchboard_proto::EventStatus;

/// Every [`MaintenanceStatements`](crate::engine::maintenance::MaintenanceStatements)
/// and [`MaintenanceDriver`] method against a fresh database of `d`'s backend.
pub(super) async fn check<D: MaintenanceDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("maintenance", 0).await.expect("tenant");
    let agent = d
        .create_agent(tenant, "worker", &[21; 32], &[], None, 0)
        .await
        .expect("agent");
    let m = agent.id;
    let e1 = send(d, tenant, m, &message_with(0, 1, 0, None), 10).await;
    let e2 = send(d, tenant, m, &message_with(0, 5, 0, None), 10).await;
    let e3 = send(d, tenant, m, &message_with(0, 5, 10_000, Some(60)), 10).await;
    let e4 = send(d, tenant, m, &message_with(0, 5, 0, None), 10).await;
    let e5 = send(d, tenant, m, &message_with(0, 5, 10_000, Some(60)), 10).await;

    // e1, e2, e4 claimed until 50; e2 released with an error and claimed again.
    let claimed = d
        .claim(&agent, 10, 40, None, 10)
        .await
        .expect("claim")
        .events;
    assert_eq!(claimed.len(), 3);
    let args = ReleaseArgs {
        delay_ms: 0,
        error: Some("boom".into()),
        terminal: false,
    };
    d.release(&agent, e2, claimed[1].claim_token, &args, 20)
        .await
        .expect("release");
    let again = d
        .claim(&agent, 10, 30, None, 20)
        .await
        .expect("claim")
        .events;
    assert_eq!(
        again.iter().map(|c| c.event.event_id).collect::<Vec<_>>(),
        [e2]
    );

    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        d.expired_leases(&mut tx, 49, Some(m), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let mut expired = d.expired_leases(&mut tx, 50, Some(m), 10).await.unwrap();
    expired.sort_by_key(|l| l.seq);
    assert_eq!(
        expired[1],
        ExpiredLease {
            id: e2,
            tenant,
            agent: m,
            seq: 2,
            attempts: 2,
            max_attempts: 5,
            last_error: Some("boom".into()),
        }
    );
    assert_eq!(
        expired.iter().map(|l| l.id).collect::<Vec<_>>(),
        [e1, e2, e4]
    );
    let all = d.expired_leases(&mut tx, 50, None, 1_000).await.unwrap();
    assert!(expired.iter().all(|l| all.contains(l)));
    assert_eq!(
        d.expired_leases(&mut tx, 50, Some(m), 1)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        d.expired_leases(&mut tx, 50, Some(AgentId::new()), 10)
            .await
            .unwrap()
            .is_empty()
    );
    d.return_lease(&mut tx, e4, EventStatus::Pending, "given back", 50)
        .await
        .unwrap();
    let mut returned = d
        .return_expired_leases(&mut tx, 50, Some(m), 10)
        .await
        .unwrap();
    returned.sort_by_key(|l| l.seq);
    assert_eq!(
        returned,
        [
            ReturnedLease {
                tenant,
                agent: m,
                seq: 1,
                quarantined: true
            },
            ReturnedLease {
                tenant,
                agent: m,
                seq: 2,
                quarantined: false
            },
        ]
    );
    assert!(
        d.return_expired_leases(&mut tx, 50, Some(m), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Expiry: pending events past `expires_at`.
    let ids = |found: Vec<(EventId, TenantId)>| -> Vec<EventId> {
        found.into_iter().map(|(id, _)| id).collect()
    };
    let before = ids(d.expired_events(&mut tx, 59, 1_000).await.unwrap());
    assert!(!before.contains(&e3) && !before.contains(&e5));
    let due = d.expired_events(&mut tx, 60, 1_000).await.unwrap();
    assert!(
        due.iter().all(|(_, t)| *t == tenant),
        "each with its tenant: {due:?}"
    );
    let due = ids(due);
    assert!(due.contains(&e3) && due.contains(&e5), "{due:?}");
    d.expire_event(&mut tx, e3, 60).await.unwrap();
    assert!(!ids(d.expired_events(&mut tx, 60, 1_000).await.unwrap()).contains(&e3));
    let expired = d.expire_events(&mut tx, 60, 1_000).await.unwrap();
    assert!(!expired.is_empty() && expired.iter().all(|t| *t == tenant));
    assert!(!ids(d.expired_events(&mut tx, 60, 1_000).await.unwrap()).contains(&e5));
    d.commit(tx, &[]).await.expect("commit");

    // What each left, and its history step, alike on every backend.
    let scavenger = "system:scavenger".to_owned();
    assert_eq!(
        last_step(d, tenant, e1).await,
        (
            EventStatus::Quarantined,
            Some("lease expired on attempt 1 of 1".into()),
            (
                "quarantined".into(),
                scavenger.clone(),
                Some("lease expired on attempt 1; attempts exhausted".into())
            )
        )
    );
    assert_eq!(
        last_step(d, tenant, e2).await,
        (
            EventStatus::Pending,
            Some("lease expired on attempt 2 of 5 (last error: boom)".into()),
            ("lease_expired".into(), scavenger, Some("attempt 2".into()))
        )
    );
    let (status, error, _) = last_step(d, tenant, e4).await;
    assert_eq!(
        (status, error.as_deref()),
        (EventStatus::Pending, Some("given back"))
    );
    let (status, _, _) = last_step(d, tenant, e3).await;
    assert_eq!(status, EventStatus::Expired);
    let (status, _, step) = last_step(d, tenant, e5).await;
    assert_eq!(status, EventStatus::Expired);
    assert_eq!(step, ("expired".into(), "system:expiry".into(), None));
    let detail = d.event_detail(tenant, e5).await.unwrap();
    assert_eq!(detail.event.event.payload, None, "expiry drops the payload");

    super::retention::check(d, tenant).await;
}
