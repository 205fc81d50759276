//! The bulk job runner. A job applies replay, release or purge to every event that
//! matched its filter when it started, in batches of [`BATCH`], each its own
//! transaction, so the single writer is free for other requests between batches.
//! After each batch it wakes the agents concerned and publishes the job's progress on
//! the operator stream. A cancel is stored; the next batch sees it and stops. With a
//! rate, batches are paced so that `done` never runs ahead of `rate × elapsed`.

use crate::http::AppState;
use crate::store::{JobSpec, JobStarted, StoreError};
use std::time::Duration;
use switchboard_proto::JobState;
use tokio::time::Instant;

/// Events per batch (and per transaction).
pub(crate) const BATCH: u32 = 500;
/// Highest accepted `rate_per_second`.
pub(crate) const MAX_RATE: u32 = 10_000;
/// Attempts of one batch before the job is marked failed.
const ATTEMPTS: u32 = 4;

/// Starts `started`'s job in the background (tracked, so shutdown waits for it).
pub(crate) fn spawn(state: &AppState, spec: JobSpec, started: JobStarted) {
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
    let limit = spec.rate.map_or(BATCH, |r| r.clamp(1, BATCH));
    let mut after = None;
    loop {
        if state.shutdown.is_cancelled() {
            end(&state, &spec, job_id, JobState::Interrupted, None).await;
            return;
        }
        let step = match step(&state, &spec, job_id, after, upto, limit).await {
            Ok(step) => step,
            Err(e) => {
                tracing::warn!(job_id, error = %e, "bulk job batch failed; stopping the job");
                let why = format!("a batch failed: {e}; run the job again for the rest");
                end(&state, &spec, job_id, JobState::Failed, Some(&why)).await;
                return;
            }
        };
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
                state.wake(&done.wakes);
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
