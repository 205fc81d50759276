//! The callbacks' statements: registration within a tenant, replacement, the
//! delivery lease (one holder, fenced updates), the attempt log and the schedule.

use super::note;
use super::{message, operator};
use crate::engine::events::{EventStatements, deliver};
use crate::*;
use switchboard_proto::{CallbackAttempt, CallbackId, CallbackState};

fn new_callback(tenant: TenantId, agent: AgentId, url: &str, now: Millis) -> NewCallback {
    NewCallback {
        id: CallbackId::new(),
        tenant,
        agent,
        url: url.to_owned(),
        sealed: vec![0xab; 72],
        key_id: "k1".to_owned(),
        now,
    }
}

fn attempt(
    tenant: TenantId,
    id: CallbackId,
    token: Option<uuid::Uuid>,
    status: Option<u16>,
    at: Millis,
) -> AttemptRecord {
    AttemptRecord {
        tenant,
        callback: id,
        lease_token: token,
        attempt: CallbackAttempt {
            at: crate::clock::to_timestamp(at),
            event_id: None,
            kind: "delivery".to_owned(),
            status,
            error: status.filter(|s| *s >= 300).map(|s| format!("HTTP {s}")),
            latency_ms: 12,
        },
        at,
        succeeded: status.is_some_and(|s| (200..300).contains(&s)),
        next_attempt_at: at + 5_000,
        disable: None,
    }
}

pub(super) async fn check<D: EventStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("cb", 1).await.unwrap();
    let other = d.ensure_tenant("cb-other", 1).await.unwrap();
    let a = d
        .create_agent(tenant, "cb-a", &[0xc1; 32], &[], None, 1)
        .await
        .unwrap();
    let b = d
        .create_agent(tenant, "cb-b", &[0xc2; 32], &[], None, 1)
        .await
        .unwrap();

    // Registration, and the secret's sealed bytes as stored.
    let first = new_callback(tenant, a.id, "https://a.example/hook", 100);
    let cb = d.put_callback(&first, None, &note()).await.unwrap();
    assert_eq!(cb.agent, "cb-a");
    assert_eq!(cb.state, CallbackState::Active);
    assert_eq!(cb.failure_streak, 0);
    let stored = d.callback(tenant, first.id).await.unwrap().expect("stored");
    assert_eq!(stored.sealed, vec![0xab; 72]);
    assert_eq!(stored.key_id, "k1");
    assert_eq!(stored.tenant, tenant);
    // Another tenant sees nothing of it.
    assert!(d.callback(other, first.id).await.unwrap().is_none());
    assert!(d.callbacks(other, None).await.unwrap().is_empty());
    assert!(
        !d.delete_callback(other, first.id, &note(), 0)
            .await
            .unwrap()
    );

    // A second registration of the agent replaces the first, with its log.
    let log = attempt(tenant, first.id, None, Some(200), 150);
    d.record_attempt(&log).await.unwrap();
    assert_eq!(d.callback_attempts(first.id, 10).await.unwrap().len(), 1);
    let second = new_callback(tenant, a.id, "https://a.example/v2", 200);
    d.put_callback(&second, None, &note()).await.unwrap();
    assert!(d.callback(tenant, first.id).await.unwrap().is_none());
    assert!(d.callback_attempts(first.id, 10).await.unwrap().is_empty());
    let of_b = new_callback(tenant, b.id, "https://b.example/hook", 300);
    d.put_callback(&of_b, None, &note()).await.unwrap();
    let all = d.callbacks(tenant, None).await.unwrap();
    assert_eq!(
        all.iter().map(|c| c.url.as_str()).collect::<Vec<_>>(),
        ["https://a.example/v2", "https://b.example/hook"]
    );
    let only_b = d.callbacks(tenant, Some(b.id)).await.unwrap();
    assert_eq!(only_b.len(), 1);
    assert_eq!(only_b[0].callback_id, of_b.id);

    // Due: only an active callback whose agent has a claimable event.
    assert!(d.due_callbacks(1_000, 10).await.unwrap().is_empty());
    let mut tx = d.begin_write().await.unwrap();
    deliver(&d.0, &mut tx, a.id, &operator(tenant, &message(1), 1_000))
        .await
        .unwrap();
    let mut later = message(2);
    later.available_at = 50_000;
    deliver(&d.0, &mut tx, b.id, &operator(tenant, &later, 1_000))
        .await
        .unwrap();
    d.commit(tx, &[]).await.unwrap();
    let due = d.due_callbacks(1_000, 10).await.unwrap();
    assert_eq!(
        due.iter()
            .map(|c| c.callback.callback_id)
            .collect::<Vec<_>>(),
        [second.id],
        "b's only event is not available yet"
    );
    assert_eq!(
        d.due_callbacks(50_000, 10).await.unwrap().len(),
        2,
        "b's event is available at 50 s"
    );

    // The delivery lease: one holder until it ends.
    let t1 = uuid::Uuid::new_v4();
    let t2 = uuid::Uuid::new_v4();
    assert!(
        d.lease_callback(second.id, t1, 61_000, 1_000)
            .await
            .unwrap()
    );
    assert!(
        !d.lease_callback(second.id, t2, 61_000, 1_001)
            .await
            .unwrap()
    );
    assert!(
        d.due_callbacks(1_002, 10).await.unwrap().is_empty(),
        "a leased callback is not due"
    );
    // A lease that ended can be taken over; the old holder's update is fenced.
    assert!(
        d.lease_callback(second.id, t2, 122_000, 61_000)
            .await
            .unwrap()
    );
    let stale = attempt(tenant, second.id, Some(t1), Some(500), 61_500);
    let after = d.record_attempt(&stale).await.unwrap().expect("exists");
    assert_eq!(after.failure_streak, 0, "the stale holder changed nothing");
    assert_eq!(
        d.callback_attempts(second.id, 10).await.unwrap().len(),
        1,
        "its attempt is logged all the same"
    );

    // Failures count and schedule; the holder's update returns the lease.
    let failed = attempt(tenant, second.id, Some(t2), Some(503), 62_000);
    let after = d.record_attempt(&failed).await.unwrap().expect("exists");
    assert_eq!(after.failure_streak, 1);
    assert_eq!(after.last_status, Some(503));
    assert_eq!(after.last_error.as_deref(), Some("HTTP 503"));
    let stored = d.callback(tenant, second.id).await.unwrap().unwrap();
    assert_eq!(stored.next_attempt_at, 67_000);
    assert_eq!(stored.failing_since, Some(62_000));
    assert!(
        d.due_callbacks(66_999, 10)
            .await
            .unwrap()
            .iter()
            .all(|c| c.callback.callback_id != second.id),
        "not before its next attempt"
    );
    let t3 = uuid::Uuid::new_v4();
    assert!(
        d.lease_callback(second.id, t3, 130_000, 67_000)
            .await
            .unwrap()
    );
    let again = attempt(tenant, second.id, Some(t3), None, 68_000);
    let after = d.record_attempt(&again).await.unwrap().unwrap();
    assert_eq!(after.failure_streak, 2);
    assert_eq!(after.last_status, None);
    let stored = d.callback(tenant, second.id).await.unwrap().unwrap();
    assert_eq!(
        stored.failing_since,
        Some(62_000),
        "since the first failure"
    );
    // A success clears the record.
    let t4 = uuid::Uuid::new_v4();
    assert!(
        d.lease_callback(second.id, t4, 140_000, 73_000)
            .await
            .unwrap()
    );
    let ok = attempt(tenant, second.id, Some(t4), Some(204), 73_500);
    let after = d.record_attempt(&ok).await.unwrap().unwrap();
    assert_eq!((after.failure_streak, after.last_status), (0, Some(204)));
    assert_eq!(after.failing_since, None);
    assert_eq!(after.last_error, None);
    // Given back without an attempt.
    let t5 = uuid::Uuid::new_v4();
    assert!(
        d.lease_callback(second.id, t5, 200_000, 74_000)
            .await
            .unwrap()
    );
    d.unlease_callback(second.id, uuid::Uuid::new_v4())
        .await
        .unwrap();
    assert!(
        !d.lease_callback(second.id, t1, 200_000, 74_001)
            .await
            .unwrap()
    );
    d.unlease_callback(second.id, t5).await.unwrap();
    assert!(
        d.lease_callback(second.id, t1, 200_000, 74_002)
            .await
            .unwrap()
    );

    // A 410 disables it with its reason; an operator's reason is kept.
    let mut gone = attempt(tenant, second.id, Some(t1), Some(410), 75_000);
    gone.disable = Some("the endpoint answered 410 Gone".to_owned());
    let after = d.record_attempt(&gone).await.unwrap().unwrap();
    assert_eq!(after.state, CallbackState::Disabled);
    assert_eq!(
        after.disabled_reason.as_deref(),
        Some("the endpoint answered 410 Gone")
    );
    assert!(
        !d.lease_callback(second.id, t2, 300_000, 80_000)
            .await
            .unwrap(),
        "a disabled callback is not delivered to"
    );
    let enabled = d
        .change_callback(tenant, second.id, &StateChange::Enable, &note(), 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(enabled.state, CallbackState::Active);
    assert_eq!((enabled.failure_streak, enabled.disabled_reason), (0, None));
    let off = StateChange::Disable {
        reason: "disabled by an operator".to_owned(),
    };
    d.change_callback(tenant, second.id, &off, &note(), 0)
        .await
        .unwrap();
    // An operator disables b while a delivery is in flight; the delivery's 410
    // then keeps the operator's reason.
    assert!(
        d.lease_callback(of_b.id, t2, 400_000, 82_000)
            .await
            .unwrap()
    );
    d.change_callback(tenant, of_b.id, &off, &note(), 0)
        .await
        .unwrap();
    let mut gone = attempt(tenant, of_b.id, Some(t2), Some(410), 83_000);
    gone.disable = Some("the endpoint answered 410 Gone".to_owned());
    let after = d.record_attempt(&gone).await.unwrap().unwrap();
    assert_eq!(after.state, CallbackState::Disabled);
    assert_eq!(
        after.disabled_reason.as_deref(),
        Some("disabled by an operator")
    );
    assert!(
        d.change_callback(other, second.id, &StateChange::Enable, &note(), 0)
            .await
            .unwrap()
            .is_none(),
        "not in the other tenant"
    );
    assert_eq!(d.count_callbacks(CallbackState::Disabled).await.unwrap(), 2);
    assert_eq!(d.count_callbacks(CallbackState::Active).await.unwrap(), 0);

    // The log, newest first, and its trim.
    let log = d.callback_attempts(second.id, 10).await.unwrap();
    assert_eq!(
        log.iter().map(|a| a.status).collect::<Vec<_>>(),
        [Some(410), Some(204), None, Some(503), Some(500)]
    );
    assert_eq!(d.callback_attempts(second.id, 2).await.unwrap().len(), 2);
    assert_eq!(d.trim_callback_attempts(68_001).await.unwrap(), 3);
    assert_eq!(d.callback_attempts(second.id, 10).await.unwrap().len(), 2);

    assert!(
        d.delete_callback(tenant, second.id, &note(), 0)
            .await
            .unwrap()
    );
    assert!(d.callback_attempts(second.id, 10).await.unwrap().is_empty());
    assert!(
        !d.delete_callback(tenant, second.id, &note(), 0)
            .await
            .unwrap()
    );
}
