//! Bulk jobs as use cases: start, list, read and cancel, and the runner. A job applies replay, release or purge to every event that
//! matched its filter when it started, in batches of at most [`BATCH`], each its own
//! transaction, so the single writer is free for other requests between batches.
//! After each batch it wakes the agents concerned and publishes the job's progress on
//! the operator stream. A cancel is stored; the next batch sees it and stops. With a
//! rate, batches are paced so that `done` never runs ahead of `rate × elapsed`.
//!
//! Batches are sized by time, not count: each should hold the single writer for about
//! [`BATCH_TIME`], so a request arriving meanwhile waits about that long, not for a
//! whole 500-event transaction (measured in `cargo xtask bench`, R1).

use super::{AppState, or_not_found};
use crate::access::Principal;
use crate::error::ApiResult;
use crate::store::{JobStarted, StoreError};
use std::time::Duration;
use switchboard_proto::{Job, JobState};

pub use crate::store::JobSpec;
use tokio::time::Instant;

/// Most events per batch (and per transaction).
const BATCH: u32 = 500;
/// Fewest events per batch, so a slow disk still makes progress.
const MIN_BATCH: u32 = 16;
/// How long one batch may hold the single writer: other requests wait at most about
/// this long for it. The batch size follows the measured time of the last batch.
const BATCH_TIME: Duration = Duration::from_millis(10);
/// Highest accepted `rate_per_second`.
pub const MAX_RATE: u32 = 10_000;
/// Attempts of one batch before the job is marked failed.
const ATTEMPTS: u32 = 4;

/// Starts the job `spec` describes: recorded, then run in the background (tracked,
/// so shutdown waits for it). The console hears of it and of each batch.
pub async fn start(state: &AppState, spec: JobSpec) -> ApiResult<Job> {
    let started = state.store.job_start(&spec, state.now()).await?;
    let job = started.job.clone();
    tracing::info!(
        job_id = job.job_id,
        action = job.action.as_str(),
        total = job.total,
        rate = job.rate_per_second,
        "bulk job started"
    );
    spawn(state, spec, started);
    Ok(job)
}

/// The tenant's last `limit` jobs.
pub async fn list(
    state: &AppState,
    tenant: switchboard_proto::TenantId,
    limit: u32,
) -> ApiResult<Vec<Job>> {
    Ok(state.store.jobs(tenant, limit).await?)
}

/// Job `id` of the tenant.
pub async fn get(state: &AppState, tenant: switchboard_proto::TenantId, id: i64) -> ApiResult<Job> {
    or_not_found(state.store.job(tenant, id).await, format_args!("job {id}"))
}

/// Asks job `id` to stop: its next batch sees the cancel.
pub async fn cancel(state: &AppState, principal: &Principal, id: i64) -> ApiResult<Job> {
    let job = state
        .store
        .job_cancel(principal.tenant_id, id, state.now())
        .await;
    let job = or_not_found(job, format_args!("job {id}"))?;
    state.publish_job(principal.tenant_id, &job);
    tracing::info!(
        job_id = id,
        state = job.state.as_str(),
        "bulk job cancel asked"
    );
    Ok(job)
}

/// Runs `started`'s job in the background (tracked, so shutdown waits for it).
fn spawn(state: &AppState, spec: JobSpec, started: JobStarted) {
    state.publish_job(spec.tenant, &started.job);
    let Some(upto) = started.upto.filter(|_| started.job.state.is_live()) else {
        return;
    };
    let state2 = state.clone();
    state
        .tasks
        .spawn(async move { run(state2, spec, started.job.job_id, upto).await });
}

async fn run(state: AppState, spec: JobSpec, job_id: i64, upto: switchboard_proto::EventId) {
    let started = Instant::now();
    let mut size = 64u32;
    let mut after = None;
    loop {
        if state.shutdown.is_cancelled() {
            end(&state, &spec, job_id, JobState::Interrupted, None).await;
            return;
        }
        let limit = spec.rate.map_or(size, |r| r.clamp(1, size));
        let batch_started = Instant::now();
        let step = match step(&state, &spec, job_id, after, upto, limit).await {
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(job_id, error = %e, "bulk job batch failed; stopping the job");
                let why = format!("a batch failed: {e}; run the job again for the rest");
                end(&state, &spec, job_id, JobState::Failed, Some(&why)).await;
                return;
            }
        };
        size = next_size(size, limit, batch_started.elapsed());
        state.publish_job(spec.tenant, &step.job);
        if !step.job.state.is_live() {
            tracing::info!(
                job_id,
                state = step.job.state.as_str(),
                done = step.job.done,
                total = step.job.total,
                "bulk job ended"
            );
            return;
        }
        after = step.last.or(after);
        match spec.rate {
            Some(rate) => {
                let due = started + Duration::from_secs_f64(step.job.done as f64 / f64::from(rate));
                tokio::select! {
                    _ = state.shutdown.cancelled() => {}
                    _ = tokio::time::sleep_until(due) => {}
                }
            }
            // Let queued requests take the writer before the next batch.
            None => tokio::task::yield_now().await,
        }
    }
}

/// The next batch size: scaled so a batch takes about [`BATCH_TIME`], at most
/// doubling at a time, within [`MIN_BATCH`]..=[`BATCH`].
fn next_size(size: u32, used: u32, took: Duration) -> u32 {
    if used < size {
        return size; // paced below the size: the time says nothing about it
    }
    let scaled = f64::from(size) * BATCH_TIME.as_secs_f64() / took.as_secs_f64().max(1e-4);
    (scaled.min(f64::from(size) * 2.0) as u32).clamp(MIN_BATCH, BATCH)
}

/// One batch, retried a few times when the database is briefly unavailable.
async fn step(
    state: &AppState,
    spec: &JobSpec,
    job_id: i64,
    after: Option<switchboard_proto::EventId>,
    upto: switchboard_proto::EventId,
    limit: u32,
) -> Result<crate::store::JobStep, StoreError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match state
            .store
            .job_step(spec, job_id, after, upto, limit, state.now())
            .await
        {
            Ok(done) => {
                return Ok(done.value);
            }
            Err(e @ (StoreError::Unavailable(_) | StoreError::Aborted(_)))
                if attempt < ATTEMPTS =>
            {
                tracing::info!(job_id, attempt, error = %e, "bulk job batch retried");
                tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn end(state: &AppState, spec: &JobSpec, job_id: i64, to: JobState, why: Option<&str>) {
    match state
        .store
        .job_end(spec.tenant, job_id, to, why, state.now())
        .await
    {
        Ok(job) => state.publish_job(spec.tenant, &job),
        Err(e) => tracing::warn!(job_id, error = %e, "could not record the end of a bulk job"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_grow_to_fill_the_time_and_shrink_when_slow() {
        let ms = Duration::from_millis;
        assert_eq!(next_size(64, 64, ms(1)), 128, "fast: at most double");
        assert_eq!(next_size(64, 64, ms(20)), 32, "twice too slow: half");
        assert_eq!(next_size(400, 400, ms(2)), BATCH, "never above the cap");
        assert_eq!(
            next_size(32, 32, ms(1000)),
            MIN_BATCH,
            "never below the floor"
        );
        assert_eq!(
            next_size(64, 10, ms(50)),
            64,
            "a paced batch below the size"
        );
    }
}
