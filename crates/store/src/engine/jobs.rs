//! Bulk jobs, once for every backend. A job is an audit row with a state; each batch
//! adds to its `count` in the batch's own transaction (so the audit log never claims
//! more than was changed, even after a crash), and a cancel is a state the next
//! batch reads.
//!
//! Where several instances share the database:
//! - a job step locks the job's audit row first, so a cancel or an end from any
//!   instance waits for the batch and is seen by the next one, and `count` grows in
//!   the batch's own transaction;
//! - a batch's events are changed at most once (see `bulk.rs`);
//! - a job has an owner (the instance running it, [`Driver::job_owner`](super::Driver::job_owner)) and a
//!   heartbeat each step refreshes; only a job whose heartbeat is stale counts as
//!   interrupted. A backend that one process owns (SQLite) has no other instance:
//!   its live jobs are its own, and at start every live job is one whose process
//!   stopped.

use super::area::store_area;
use super::instances::{self, INSTANCE_DEAD_MS, InstanceStatements};
use super::ops::bulk::{self, BulkDriver, NewAudit, NewJob, Window};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::{Job, JobState};

/// A live job whose heartbeat is older than this has lost its instance (which
/// stopped without ending it). Every batch refreshes the heartbeat; batches follow
/// each other within about a second, paced or not (a paced batch is at most `rate`
/// events, so its pause is at most 1 s), and a batch ends within the 15 s statement
/// timeout: twice that leaves no live job mistaken for a lost one.
const JOB_STALE_MS: i64 = 30_000;

/// The statements of the jobs (`store/statements/jobs.rs`).
#[async_trait]
pub(crate) trait JobStatements: BulkDriver + InstanceStatements {
    /// The job, its row locked until the transaction ends, so a step, a cancel and
    /// an end of one job (from any instances) run one after another.
    async fn lock_job(&self, tx: &mut Self::Tx, tenant: TenantId, id: i64) -> StoreResult<Job>;
    /// Adds `done` to the job's count, moves it to `state` (if given, with its
    /// error), refreshes its heartbeat, and returns it.
    async fn update_job(
        &self,
        tx: &mut Self::Tx,
        id: i64,
        done: u64,
        state: Option<(JobState, Option<&str>)>,
        now: Millis,
    ) -> StoreResult<Job>;
    /// Marks interrupted the live jobs whose heartbeat is older than `stale_before`
    /// (or missing), or whose owner last beat at or before `dead_before` (its
    /// instance died), and returns them with their tenants.
    async fn interrupt_jobs(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        stale_before: Millis,
        dead_before: Millis,
    ) -> StoreResult<Vec<(TenantId, Job)>>;
    /// A read, outside any write transaction.
    async fn read_job(&self, tenant: TenantId, id: i64) -> StoreResult<Job>;
    /// Newest first (a read, outside any write transaction).
    async fn list_jobs(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<Job>>;
}

/// One batch of a job, in one transaction (see [`JobStore::job_step`]).
async fn job_step<D: JobStatements>(
    d: &D,
    spec: &JobSpec,
    job_id: i64,
    window: &Window,
    now: Millis,
) -> StoreResult<Committed<JobStep>> {
    let scope = spec.scope();
    let mut tx = d.begin_write().await?;
    let job = d.lock_job(&mut tx, spec.tenant, job_id).await?;
    let (job, last, wakes) = match job.state {
        JobState::Running => {
            let applied =
                bulk::apply(d, &mut tx, spec.tenant, &scope, window, &spec.actor, now).await?;
            // A batch smaller than the limit found the rest of the window empty.
            let state = (!applied.full).then_some((JobState::Completed, None));
            let job = d
                .update_job(&mut tx, job_id, applied.count, state, now)
                .await?;
            (job, applied.last, applied.wakes)
        }
        JobState::Cancelling => {
            let cancelled = Some((JobState::Cancelled, None));
            let job = d.update_job(&mut tx, job_id, 0, cancelled, now).await?;
            (job, None, Vec::new())
        }
        // Ended elsewhere (cancelled and finished, or marked interrupted).
        _ => (job, None, Vec::new()),
    };
    d.commit(tx, &wakes).await?;
    Ok(Committed {
        value: JobStep { job, last },
        wakes,
    })
}

/// Moves a job of `tenant` to `to` (with its error) if its state, read under its
/// row lock, is one `from` accepts; else returns it unchanged. A cancel from any
/// instance is such a move: the state is stored, and the owner's next step (which
/// waits for this row lock) reads it.
async fn move_job<D: JobStatements>(
    d: &D,
    tenant: TenantId,
    job_id: i64,
    from: fn(JobState) -> bool,
    to: (JobState, Option<&str>),
    now: Millis,
) -> StoreResult<Job> {
    let mut tx = d.begin_write().await?;
    let job = d.lock_job(&mut tx, tenant, job_id).await?;
    let job = if from(job.state) {
        d.update_job(&mut tx, job_id, 0, Some(to), now).await?
    } else {
        job
    };
    d.commit(tx, &[]).await?;
    Ok(job)
}

/// Marks interrupted the live jobs whose heartbeat is older than `stale_before`, or
/// whose instance died (see `instances.rs`).
async fn interrupt<D: JobStatements>(
    d: &D,
    now: Millis,
    stale_before: Millis,
) -> StoreResult<Vec<(TenantId, Job)>> {
    // A step holds its job's row lock and refreshes the heartbeat: this waits for it
    // and then sees the fresh heartbeat (READ COMMITTED rechecks the row).
    let mut tx = d.begin_write().await?;
    let dead_before = now - INSTANCE_DEAD_MS;
    let ended = d
        .interrupt_jobs(&mut tx, now, stale_before, dead_before)
        .await?;
    d.commit(tx, &[]).await?;
    Ok(ended)
}

// Every backend with the job driver has the jobs.
store_area! {
    /// Bulk jobs. A job is an audit row with a state; each batch adds to its `count` in
    /// the batch's own transaction, and a cancel is a state the next batch reads.
    pub trait JobStore for Engine<D: JobStatements> {
        async fn job_start(&self, spec: &JobSpec, now: Millis) -> StoreResult<JobStarted> {
            let d = &self.0;
            d.retrying(|| async {
                let scope = spec.scope();
                let mut tx = d.begin_write().await?;
                let (total, upto) = d.count_matching(&mut tx, spec.tenant, &scope).await?;
                // Nothing to do is done at once.
                let state = if total == 0 {
                    JobState::Completed
                } else {
                    JobState::Running
                };
                let row = NewAudit {
                    tenant: spec.tenant,
                    scope: &scope,
                    actor: &spec.actor,
                    count: 0,
                    job: Some(NewJob {
                        state,
                        total,
                        rate: spec.rate,
                        owner: d.job_owner(),
                    }),
                    now,
                };
                let id = d.insert_audit(&mut tx, &row).await?;
                let job = d.lock_job(&mut tx, spec.tenant, id).await?;
                d.commit(tx, &[]).await?;
                Ok(JobStarted { job, upto })
            })
            .await
        }

        /// One batch of at most `limit` events with `after < id <= upto`. A job asked to
        /// cancel ends `cancelled` here instead; a batch smaller than `limit` completes it.
        async fn job_step(
            &self,
            spec: &JobSpec,
            job_id: i64,
            after: Option<EventId>,
            upto: EventId,
            limit: u32,
            now: Millis,
        ) -> StoreResult<Committed<JobStep>> {
            let window = Window {
                after,
                upto: Some(upto),
                limit: Some(u64::from(limit)),
            };
            // A deadlock with another writer rolls the whole batch back: run it again.
            self.0
                .retrying(|| job_step(&self.0, spec, job_id, &window, now))
                .await
        }

        /// Ends a live job in `state` (failed, interrupted); a finished job is unchanged.
        async fn job_end(
            &self,
            tenant: TenantId,
            job_id: i64,
            state: JobState,
            error: Option<&str>,
            now: Millis,
        ) -> StoreResult<Job> {
            // A finished job is unchanged.
            let live = |s: JobState| s.is_live();
            self.0
                .retrying(|| move_job(&self.0, tenant, job_id, live, (state, error), now))
                .await
        }

        /// Asks a running job to stop before its next batch.
        async fn job_cancel(&self, tenant: TenantId, job_id: i64, now: Millis) -> StoreResult<Job> {
            let running = |s: JobState| s == JobState::Running;
            let cancelling = (JobState::Cancelling, None);
            self.0
                .retrying(|| move_job(&self.0, tenant, job_id, running, cancelling, now))
                .await
        }

        async fn job(&self, tenant: TenantId, job_id: i64) -> StoreResult<Job> {
            self.0.read_job(tenant, job_id).await
        }

        /// Newest first.
        async fn jobs(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<Job>> {
            self.0.list_jobs(tenant, limit).await
        }

        /// This instance's name where several instances share the database: the owner
        /// of the jobs it runs and of the idempotency keys it holds in flight. `None`
        /// where one process owns the database (SQLite).
        fn instance_name(&self) -> Option<&str> {
            self.0.job_owner()
        }

        /// Records that this instance is alive at `now`, where several instances share
        /// the database (a no-op elsewhere). One silent for 10 s is dead: its in-flight
        /// keys and live jobs are taken over (`store/engine/instances.rs`).
        async fn beat(&self, now: Millis) -> StoreResult<()> {
            match self.0.job_owner() {
                Some(me) => self.0.retrying(|| instances::beat(&self.0, me, now)).await,
                None => Ok(()),
            }
        }

        /// At start: jobs left live by a stopped process become `interrupted`.
        async fn jobs_interrupted(&self, now: Millis) -> StoreResult<u64> {
            let ended = match self.0.job_owner() {
                // One process owns the database, so a live job at start is one whose
                // process stopped.
                None => {
                    self.0
                        .retrying(|| interrupt(&self.0, now, Millis::MAX))
                        .await?
                }
                // Other instances' jobs are live while they beat: at start, as in every
                // pass, only a job whose heartbeat stopped lost its instance.
                Some(_) => self.jobs_orphaned(now).await?,
            };
            Ok(ended.len() as u64)
        }

        /// Every background pass: live jobs whose instance stopped beating (it died
        /// without ending them) become `interrupted`, returned with their tenant so the
        /// consoles hear of it. Only a shared backend has such jobs: with SQLite, the one
        /// process's live jobs are its own, and `jobs_interrupted` cleaned up at start.
        async fn jobs_orphaned(&self, now: Millis) -> StoreResult<Vec<(TenantId, Job)>> {
            if self.0.job_owner().is_none() {
                return Ok(Vec::new());
            }
            let stale_before = now.saturating_sub(JOB_STALE_MS);
            self.0
                .retrying(|| interrupt(&self.0, now, stale_before))
                .await
        }
    }
}
