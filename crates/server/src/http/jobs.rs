//! Bulk jobs (`/api/v1/ops/jobs`) and the overview's sample history
//! (`/api/v1/ops/history`).

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Json, Path, Query};
use super::limits::*;
use crate::app::jobs::{self as app, JobSpec, MAX_RATE};
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_job, list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(cancel_job))
        .routes(routes!(history))
}

/// Start a bulk job: replay, release or purge every event the filter (or id list)
/// covers, in batches, with progress on the operator stream (`job` events) and here.
/// Events arriving after the start are not included. Recorded in the audit log, whose
/// row is the job (same id) and shows how far it got.
#[utoipa::path(post, path = "/api/v1/ops/jobs", tag = "ops", request_body = StartJob,
    responses((status = 202, body = Job, headers(("Location" = String))), (status = 422, body = Problem)))]
async fn start_job(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<StartJob>,
) -> ApiResult<(StatusCode, HeaderMap, axum::Json<Job>)> {
    principal.require(SCOPE_OPS_WRITE)?;
    if req.ids.is_none() && req.filter.is_none() {
        return Err(ApiError::unprocessable(
            "name the events: send \"ids\": [...] or \"filter\": {...} ({} means every event)",
        ));
    }
    if req
        .ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_PAGE as usize)
    {
        return Err(ApiError::unprocessable(format!(
            "at most {MAX_PAGE} ids per job; use a filter for more"
        )));
    }
    if let Some(rate) = req.rate_per_second
        && !(1..=MAX_RATE).contains(&rate)
    {
        return Err(ApiError::unprocessable(format!(
            "rate_per_second must be between 1 and {MAX_RATE} (events per second), not {rate}; leave it out for no pacing"
        )));
    }
    let spec = JobSpec {
        tenant: principal.tenant_id,
        action: req.action,
        ids: req.ids,
        filter: req.filter,
        rate: req.rate_per_second,
        actor: principal.actor(),
    };
    let job = app::start(&state, spec).await?;
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/ops/jobs/{}", job.job_id)) {
        headers.insert(header::LOCATION, v);
    }
    Ok((StatusCode::ACCEPTED, headers, axum::Json(job)))
}

/// Bulk jobs of the tenant, newest first.
#[utoipa::path(get, path = "/api/v1/ops/jobs", tag = "ops", params(PageLimit),
    responses((status = 200, body = JobPage)))]
async fn list_jobs(
    State(state): State<AppState>,
    principal: Principal,
    Query(q): Query<PageLimit>,
) -> ApiResult<axum::Json<JobPage>> {
    principal.require(SCOPE_OPS_READ)?;
    let limit = q.get()?;
    Ok(axum::Json(JobPage {
        jobs: app::list(&state, principal.tenant_id, limit).await?,
    }))
}

/// One bulk job: how far it got.
#[utoipa::path(get, path = "/api/v1/ops/jobs/{job_id}", tag = "ops",
    params(("job_id" = i64, Path)),
    responses((status = 200, body = Job), (status = 404, body = Problem)))]
async fn get_job(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<i64>,
) -> ApiResult<axum::Json<Job>> {
    principal.require(SCOPE_OPS_READ)?;
    let job = app::get(&state, principal.tenant_id, id).await?;
    Ok(axum::Json(job))
}

/// Cancel a running job. It stops before its next batch (`cancelling`, then
/// `cancelled`); what it changed stays changed. Cancelling an ended job changes nothing.
#[utoipa::path(post, path = "/api/v1/ops/jobs/{job_id}/cancel", tag = "ops",
    params(("job_id" = i64, Path)),
    responses((status = 200, body = Job), (status = 404, body = Problem)))]
async fn cancel_job(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<i64>,
) -> ApiResult<axum::Json<Job>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let job = app::cancel(&state, &principal, id).await?;
    Ok(axum::Json(job))
}

/// The overview's history: a sample of inbox depth and counters every
/// `sample_interval` (5 s) for the last hour, oldest first, and the delivery latency
/// distribution over that window.
#[utoipa::path(get, path = "/api/v1/ops/history", tag = "ops",
    responses((status = 200, body = OpsHistory)))]
async fn history(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<OpsHistory>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(state.history.samples(principal.tenant_id)))
}
