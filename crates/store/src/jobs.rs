//! The store's bulk-job seam (the runner is the server's `workers/jobs.rs`).

use super::*;
use async_trait::async_trait;

/// The events an operator action covers: those `ids` and/or `filter` name that the
/// action applies to (replay: quarantined; release: claimed; purge: not yet purged).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub action: BulkAction,
    pub ids: Option<&'a [EventId]>,
    pub filter: Option<&'a EventFilter>,
}

/// A bulk job as its runner holds it.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub tenant: TenantId,
    pub action: BulkAction,
    pub ids: Option<Vec<EventId>>,
    pub filter: Option<EventFilter>,
    /// Events per second; `None`: unpaced.
    pub rate: Option<u32>,
    pub actor: Actor,
}

impl JobSpec {
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            action: self.action,
            ids: self.ids.as_deref(),
            filter: self.filter.as_ref(),
        }
    }
}

/// A job's audit row, written, and the largest matching id then: later events are
/// not the job's.
#[derive(Debug, Clone)]
pub struct JobStarted {
    pub job: switchboard_proto::Job,
    pub upto: Option<EventId>,
}

/// One committed batch: the job after it, and the last event it changed.
#[derive(Debug, Clone)]
pub struct JobStep {
    pub job: switchboard_proto::Job,
    pub last: Option<EventId>,
}

/// Bulk jobs. A job is an audit row with a state; each batch adds to its `count` in
/// the batch's own transaction, and a cancel is a state the next batch reads.
#[async_trait]
pub trait JobStore: Send + Sync {
    async fn job_start(&self, spec: &JobSpec, now: Millis) -> StoreResult<JobStarted>;
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
    ) -> StoreResult<Committed<JobStep>>;
    /// Ends a live job in `state` (failed, interrupted); a finished job is unchanged.
    async fn job_end(
        &self,
        tenant: TenantId,
        job_id: i64,
        state: switchboard_proto::JobState,
        error: Option<&str>,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Job>;
    /// Asks a running job to stop before its next batch.
    async fn job_cancel(
        &self,
        tenant: TenantId,
        job_id: i64,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Job>;
    async fn job(&self, tenant: TenantId, job_id: i64) -> StoreResult<switchboard_proto::Job>;
    /// Newest first.
    async fn jobs(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<switchboard_proto::Job>>;
    /// This instance's name where several instances share the database: the owner
    /// of the jobs it runs and of the idempotency keys it holds in flight. `None`
    /// where one process owns the database (SQLite).
    fn instance_name(&self) -> Option<&str>;
    /// Records that this instance is alive at `now`, where several instances share
    /// the database (a no-op elsewhere). One silent for 10 s is dead: its in-flight
    /// keys and live jobs are taken over (`store/engine/instances.rs`).
    async fn beat(&self, now: Millis) -> StoreResult<()>;
    /// At start: jobs left live by a stopped process become `interrupted`.
    async fn jobs_interrupted(&self, now: Millis) -> StoreResult<u64>;
    /// Every background pass: live jobs whose instance stopped beating (it died
    /// without ending them) become `interrupted`, returned with their tenant so the
    /// consoles hear of it. Only a shared backend has such jobs: with SQLite, the one
    /// process's live jobs are its own, and `jobs_interrupted` cleaned up at start.
    async fn jobs_orphaned(
        &self,
        _now: Millis,
    ) -> StoreResult<Vec<(TenantId, switchboard_proto::Job)>> {
        Ok(Vec::new())
    }
}
