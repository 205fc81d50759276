//! The jobs' statements and driver, and the job store over them.

use super::ops::send;
use crate::engine::jobs::JobStatements;
use crate::engine::ops::bulk::{NewAudit, NewJob};
use crate::*;
use switchboard_proto::JobState;

/// A job's audit row, as `job_start` writes it, at `now`.
async fn insert_job<D: JobStatements>(
    d: &Engine<D>,
    tx: &mut D::Tx,
    tenant: TenantId,
    scope: &Scope<'_>,
    state: JobState,
    now: i64,
) -> i64
where
    Engine<D>: Store,
{
    let row = NewAudit {
        tenant,
        scope,
        actor: &Actor::Operator,
        count: 0,
        job: Some(NewJob {
            state,
            total: 3,
            rate: Some(9),
            owner: d.job_owner(),
        }),
        now,
    };
    d.insert_audit(tx, &row).await.expect("audit row")
}

/// Every `JobStatements` and [`JobStatements`] method, then the job store's paths,
/// against a fresh database of `d`'s backend (with no live job yet).
pub(super) async fn check<D: JobStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("jobs", 0).await.expect("tenant");
    let other = d.ensure_tenant("jobs-other", 0).await.expect("tenant");
    let agent = d
        .create_agent(tenant, "j1", &[41; 32], &[], None, 0)
        .await
        .expect("agent");
    let mut events = Vec::new();
    for n in 0..3 {
        events.push(send(d, tenant, agent.id, &format!("{{\"n\":{n}}}"), 0, None).await);
    }
    events.sort_by_key(ToString::to_string);
    let filter = EventFilter {
        agent: Some("j1".into()),
        ..EventFilter::default()
    };
    let scope = Scope {
        action: BulkAction::Purge,
        ids: None,
        filter: Some(&filter),
    };
    match d.job_owner() {
        Some(owner) => assert!(!owner.is_empty(), "{}", d.backend()),
        None => assert_eq!(d.backend(), "sqlite"),
    }

    // A job's row: locked, read, counted, moved, ended with its error.
    let mut tx = d.begin_write().await.expect("begin");
    let stale = insert_job(d, &mut tx, tenant, &scope, JobState::Running, 10).await;
    let beating = insert_job(d, &mut tx, tenant, &scope, JobState::Running, 100).await;
    let ended = insert_job(d, &mut tx, tenant, &scope, JobState::Completed, 10).await;
    let at_once = d
        .insert_audit(
            &mut tx,
            &NewAudit {
                tenant,
                scope: &scope,
                actor: &Actor::Operator,
                count: 0,
                job: None,
                now: 10,
            },
        )
        .await
        .unwrap();
    let job = d.lock_job(&mut tx, tenant, stale).await.unwrap();
    assert_eq!(
        (
            job.job_id,
            job.state,
            job.total,
            job.done,
            job.rate_per_second
        ),
        (stale, JobState::Running, 3, 0, Some(9))
    );
    assert_eq!(
        (job.action, job.filter.clone()),
        (BulkAction::Purge, Some(filter.clone()))
    );
    assert!(job.finished_at.is_none());
    let done = d.lock_job(&mut tx, tenant, ended).await.unwrap();
    assert!(done.finished_at.is_some(), "{done:?}");
    for (t, id) in [(other, stale), (tenant, at_once)] {
        assert!(matches!(
            d.lock_job(&mut tx, t, id).await,
            Err(StoreError::NotFound)
        ));
    }
    let job = d.update_job(&mut tx, beating, 2, None, 100).await.unwrap();
    assert_eq!(
        (job.done, job.state, job.finished_at),
        (2, JobState::Running, None)
    );
    let failed = Some((JobState::Failed, Some("a batch failed")));
    let job = d.update_job(&mut tx, ended, 1, failed, 20).await.unwrap();
    assert_eq!(
        (job.done, job.state, job.error.as_deref()),
        (1, JobState::Failed, Some("a batch failed"))
    );
    let job = d
        .update_job(&mut tx, ended, 0, Some((JobState::Interrupted, None)), 30)
        .await
        .unwrap();
    assert_eq!(
        (job.state, job.error.as_deref()),
        (JobState::Interrupted, Some("a batch failed")),
        "the error stays"
    );
    // Only live jobs with a stale heartbeat are interrupted.
    let taken = d.interrupt_jobs(&mut tx, 200, 50, 50).await.unwrap();
    assert_eq!(
        taken
            .iter()
            .map(|(t, j)| (*t, j.job_id, j.state))
            .collect::<Vec<_>>(),
        [(tenant, stale, JobState::Interrupted)]
    );
    assert!(taken[0].1.finished_at.is_some());
    d.commit(tx, &[]).await.expect("commit");
    assert_eq!(
        d.read_job(tenant, beating).await.unwrap().state,
        JobState::Running
    );
    assert!(matches!(
        d.read_job(other, beating).await,
        Err(StoreError::NotFound)
    ));
    let listed = d.list_jobs(tenant, 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        [ended, beating, stale],
        "newest first, jobs only"
    );
    assert_eq!(d.list_jobs(tenant, 1).await.unwrap().len(), 1);
    assert!(d.list_jobs(other, 10).await.unwrap().is_empty());
    d.job_end(tenant, beating, JobState::Interrupted, None, 300)
        .await
        .unwrap();

    // The store's jobs: start, batches, cancel, end.
    let spec = JobSpec {
        tenant,
        action: BulkAction::Purge,
        ids: None,
        filter: Some(filter.clone()),
        rate: None,
        actor: Actor::Operator,
    };
    let started = d.job_start(&spec, 400).await.unwrap();
    assert_eq!(
        (started.job.state, started.job.total, started.upto),
        (JobState::Running, 3, Some(events[2]))
    );
    let id = started.job.job_id;
    let step = d
        .job_step(&spec, id, None, events[2], 2, 401)
        .await
        .unwrap();
    assert_eq!(
        (step.value.job.done, step.value.job.state, step.value.last),
        (2, JobState::Running, Some(events[1]))
    );
    assert_eq!(step.wakes.len(), 1, "one per agent");
    let cancelling = d.job_cancel(tenant, id, 402).await.unwrap();
    assert_eq!(cancelling.state, JobState::Cancelling);
    let step = d
        .job_step(&spec, id, Some(events[1]), events[2], 2, 403)
        .await
        .unwrap();
    assert_eq!(
        (step.value.job.state, step.value.job.done, step.value.last),
        (JobState::Cancelled, 2, None)
    );
    assert!(step.wakes.is_empty());
    let after = d
        .job_end(tenant, id, JobState::Failed, Some("late"), 404)
        .await
        .unwrap();
    assert_eq!((after.state, after.error), (JobState::Cancelled, None));
    assert_eq!(
        d.job_cancel(tenant, id, 405).await.unwrap().state,
        JobState::Cancelled
    );
    // The rest in one batch smaller than its limit: completed.
    let started = d.job_start(&spec, 500).await.unwrap();
    assert_eq!((started.job.total, started.upto), (1, Some(events[2])));
    let step = d
        .job_step(&spec, started.job.job_id, None, events[2], 10, 501)
        .await
        .unwrap();
    assert_eq!(
        (step.value.job.state, step.value.job.done, step.value.last),
        (JobState::Completed, 1, Some(events[2]))
    );
    assert!(step.value.job.finished_at.is_some());
    assert_eq!(d.job(tenant, started.job.job_id).await.unwrap().done, 1);
    assert_eq!(
        d.jobs(tenant, 2).await.unwrap()[0].job_id,
        started.job.job_id
    );
    // Nothing to do is done at once.
    let empty = d.job_start(&spec, 600).await.unwrap();
    assert_eq!((empty.job.state, empty.upto), (JobState::Completed, None));

    // Live jobs left behind: a shared database takes over those whose heartbeat
    // stopped 30 s ago; one process takes every live job at start, none in passes.
    send(d, tenant, agent.id, "{}", 0, None).await;
    let live = d.job_start(&spec, 1_000).await.unwrap();
    assert_eq!(live.job.state, JobState::Running);
    match d.job_owner() {
        Some(_) => {
            assert_eq!(
                d.jobs_interrupted(30_000).await.unwrap(),
                0,
                "still beating"
            );
            assert!(d.jobs_orphaned(30_999).await.unwrap().is_empty());
            let orphaned = d.jobs_orphaned(31_001).await.unwrap();
            assert_eq!(
                orphaned
                    .iter()
                    .map(|(t, j)| (*t, j.job_id, j.state))
                    .collect::<Vec<_>>(),
                [(tenant, live.job.job_id, JobState::Interrupted)]
            );
            assert_eq!(d.jobs_interrupted(40_000).await.unwrap(), 0, "marked once");
        }
        None => {
            assert!(d.jobs_orphaned(100_000).await.unwrap().is_empty());
            assert_eq!(d.jobs_interrupted(1_001).await.unwrap(), 1);
            assert_eq!(d.jobs_interrupted(1_002).await.unwrap(), 0);
        }
    }
    assert_eq!(
        d.job(tenant, live.job.job_id).await.unwrap().state,
        JobState::Interrupted
    );
}
