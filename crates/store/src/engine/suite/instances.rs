//! The instances' heartbeats, and what the idempotency keys and jobs of a dead
//! instance become.

use crate::engine::idempotency::IdemStatements;
use crate::engine::instances::{INSTANCE_DEAD_MS, beat};
use crate::engine::jobs::JobStatements;
use crate::engine::ops::bulk::{NewAudit, NewJob};
use crate::*;
use switchboard_proto::JobState;

const DAY: i64 = 24 * 60 * 60 * 1000;

/// Every `InstanceStatements` method, then phase 1 and the job pass over a dead
/// instance's key and job, against a fresh database of `d`'s backend.
pub(super) async fn check<D: IdemStatements + JobStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    // Beats: upserted, read back, and forgotten a day after the last one.
    let (a, b) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let (a_name, b_name) = (a.to_string(), b.to_string());
    let mut tx = d.begin_write().await.expect("begin");
    assert_eq!(d.last_beat(&mut tx, &a_name).await.unwrap(), None);
    d.beat_instance(&mut tx, &a_name, 100, 0).await.unwrap();
    d.beat_instance(&mut tx, &a_name, 200, 0).await.unwrap();
    d.beat_instance(&mut tx, &b_name, 150, 0).await.unwrap();
    assert_eq!(d.last_beat(&mut tx, &a_name).await.unwrap(), Some(200));
    d.beat_instance(&mut tx, &a_name, 150, 0).await.unwrap();
    assert_eq!(
        d.last_beat(&mut tx, &a_name).await.unwrap(),
        Some(200),
        "a beat that read the clock earlier but came later never moves it back"
    );
    d.beat_instance(&mut tx, &b_name, 160, 180).await.unwrap();
    assert_eq!(
        d.last_beat(&mut tx, &a_name).await.unwrap(),
        Some(200),
        "beaten after the cut"
    );
    assert_eq!(
        d.last_beat(&mut tx, &b_name).await.unwrap(),
        None,
        "silent since before the cut: forgotten (with its own late beat)"
    );
    d.commit(tx, &[]).await.expect("commit");

    // Instance A (beat at t) holds a key in flight, locked for 60 s. Another
    // request waits while A beats, and takes the key over once A has been silent
    // for 10 s, long before the lock runs out; A can then store nothing.
    let t = 10 * DAY;
    beat(&d.0, &a_name, t).await.unwrap();
    let tenant = d.ensure_tenant("suite-instances", 0).await.expect("tenant");
    let held = IdemKey {
        tenant_id: tenant,
        principal: "agent:i1".into(),
        key_hash: vec![1],
        fingerprint: vec![1],
        owner: a.as_bytes().to_vec(),
    };
    let retry = IdemKey {
        owner: b.as_bytes().to_vec(),
        ..held.clone()
    };
    let lock = 60_000;
    assert_eq!(
        d.idem_begin(&held, t, lock, DAY).await.unwrap(),
        IdemBegin::Fresh
    );
    let alive = t + INSTANCE_DEAD_MS - 1;
    assert_eq!(
        d.idem_begin(&retry, alive, lock, DAY).await.unwrap(),
        IdemBegin::InFlight,
        "A is alive"
    );
    let dead = t + INSTANCE_DEAD_MS;
    assert_eq!(
        d.idem_begin(&retry, dead, lock, DAY).await.unwrap(),
        IdemBegin::Fresh,
        "A is dead: taken over within the lock"
    );
    assert!(matches!(
        d.idem_complete(&held, &response()).await,
        Err(StoreError::KeyTakenOver)
    ));
    d.idem_complete(&retry, &response()).await.unwrap();

    // An owner that never beat (no instance row, or not a UUID) waits out its lock.
    for owner in [uuid::Uuid::now_v7().as_bytes().to_vec(), vec![7]] {
        let silent = IdemKey {
            key_hash: vec![2],
            owner,
            ..held.clone()
        };
        let key_retry = IdemKey {
            key_hash: vec![2],
            ..retry.clone()
        };
        assert_eq!(
            d.idem_begin(&silent, t, lock, DAY).await.unwrap(),
            IdemBegin::Fresh
        );
        assert_eq!(
            d.idem_begin(&key_retry, t + lock - 1, lock, DAY)
                .await
                .unwrap(),
            IdemBegin::InFlight,
            "an owner that never beat is not known dead"
        );
        d.idem_abort(&silent).await.unwrap();
    }

    // Jobs: one of dead A with a fresh heartbeat is interrupted; one of an instance
    // that beats is not.
    beat(&d.0, &b_name, dead).await.unwrap();
    let scope = Scope {
        action: BulkAction::Purge,
        ids: Some(&[]),
        filter: None,
    };
    let mut tx = d.begin_write().await.expect("begin");
    let of_dead = d
        .insert_audit(&mut tx, &running_job(tenant, &scope, &a_name, dead))
        .await
        .unwrap();
    let of_live = d
        .insert_audit(&mut tx, &running_job(tenant, &scope, &b_name, dead))
        .await
        .unwrap();
    let ended = d
        .interrupt_jobs(&mut tx, dead, dead - 30_000, dead - INSTANCE_DEAD_MS)
        .await
        .unwrap();
    assert_eq!(
        ended.iter().map(|(_, j)| j.job_id).collect::<Vec<_>>(),
        [of_dead],
        "only the dead instance's job (A beat at {t}, B at {dead})"
    );
    d.commit(tx, &[]).await.expect("commit");
    assert_eq!(
        d.read_job(tenant, of_live).await.unwrap().state,
        JobState::Running
    );
    // Ended, so the other areas' checks of live jobs start from none.
    d.job_end(tenant, of_live, JobState::Completed, None, dead)
        .await
        .unwrap();
}

/// A running job's audit row of `owner`, with a heartbeat at `now`.
fn running_job<'a>(
    tenant: TenantId,
    scope: &'a Scope<'a>,
    owner: &'a str,
    now: i64,
) -> NewAudit<'a> {
    NewAudit {
        tenant,
        scope,
        actor: &Actor::Operator,
        count: 0,
        job: Some(NewJob {
            state: JobState::Running,
            total: 1,
            rate: None,
            owner: Some(owner),
        }),
        now,
    }
}

fn response() -> StoredResponse {
    StoredResponse {
        status: 201,
        body: "{}".into(),
    }
}
