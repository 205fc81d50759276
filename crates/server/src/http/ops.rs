//! The operator API: agents, overview, events, bulk actions, audit, live stream.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::credentials::{SecretCreated, secret_created};
use super::extract::{Json, Path, Query};
use super::limits::*;
use crate::app::ops as app;
use crate::error::{ApiError, ApiResult};
use crate::hub::OpsSignal;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use std::convert::Infallible;
use switchboard_proto::*;
use tokio::sync::broadcast::error::RecvError;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(overview))
        .routes(routes!(list_events))
        .routes(routes!(event_detail))
        .routes(routes!(bulk))
        .routes(routes!(audit))
        .routes(routes!(stream))
}

/// Create an agent. Its token is in the answer, once; only a hash is kept.
#[utoipa::path(post, path = "/api/v1/ops/agents", tag = "ops", request_body = CreateAgent,
    responses((status = 201, body = AgentCreated), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_agent(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<CreateAgent>,
) -> ApiResult<SecretCreated<AgentCreated>> {
    principal.require(SCOPE_OPS_WRITE)?;
    name("name", &req.name)?;
    Ok(secret_created(
        app::create_agent(&state, &principal, &req.name).await?,
    ))
}

/// Every agent of the tenant with its inbox depth by status.
#[utoipa::path(get, path = "/api/v1/ops/agents", tag = "ops", responses((status = 200, body = Vec<AgentSummary>)))]
async fn list_agents(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<AgentSummary>>> {
    Ok(axum::Json(app::agents(&state, &principal).await?))
}

/// Live health: per-agent depth, oldest pending age, subscribers, totals.
#[utoipa::path(get, path = "/api/v1/ops/overview", tag = "ops", responses((status = 200, body = Overview)))]
async fn overview(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Overview>> {
    Ok(axum::Json(app::overview(&state, &principal).await?))
}

/// Events of the tenant, filtered by agent, status, correlation id and payload text,
/// in creation order, paginated by `after`.
#[utoipa::path(get, path = "/api/v1/ops/events", tag = "ops", params(EventListQuery),
    responses((status = 200, body = OpsEventPage), (status = 400, body = Problem)))]
async fn list_events(
    State(state): State<AppState>,
    principal: Principal,
    Query(q): Query<EventListQuery>,
) -> ApiResult<axum::Json<OpsEventPage>> {
    principal.require(SCOPE_OPS_READ)?;
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    Ok(axum::Json(
        app::events(&state, principal.tenant_id, &q, limit).await?,
    ))
}

/// One event with its whole history (the event inspector).
#[utoipa::path(get, path = "/api/v1/ops/events/{event_id}", tag = "ops",
    params(("event_id" = EventId, Path)),
    responses((status = 200, body = EventDetail), (status = 404, body = Problem)))]
async fn event_detail(
    State(state): State<AppState>,
    principal: Principal,
    Path(event_id): Path<EventId>,
) -> ApiResult<axum::Json<EventDetail>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(
        app::event(&state, principal.tenant_id, event_id).await?,
    ))
}

/// Replay (quarantined → pending, attempts reset), release (claimed → pending, token
/// invalidated) or purge, by id list or by filter, at once and in one transaction.
/// At most 1,000 events: for more, start a job (`POST /api/v1/ops/jobs`). Recorded in
/// the audit log.
#[utoipa::path(post, path = "/api/v1/ops/bulk/{action}", tag = "ops",
    params(("action" = BulkAction, Path, description = "replay, release or purge")),
    request_body = BulkRequest,
    responses((status = 200, body = BulkResult), (status = 422, body = Problem)))]
async fn bulk(
    State(state): State<AppState>,
    principal: Principal,
    Path(action): Path<BulkAction>,
    Json(req): Json<BulkRequest>,
) -> ApiResult<axum::Json<BulkResult>> {
    principal.require(SCOPE_OPS_WRITE)?;
    if req.ids.is_none() && req.filter.is_none() {
        return Err(ApiError::unprocessable(
            "name the events: send {\"ids\": [...]} or {\"filter\": {...}} ({\"filter\": {}} means every event)",
        ));
    }
    if req
        .ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_PAGE as usize)
    {
        return Err(ApiError::unprocessable(format!(
            "at most {MAX_PAGE} ids per request; use a filter for more"
        )));
    }
    let (affected, audit_id) = app::bulk(
        &state,
        &principal,
        action,
        req.ids.as_deref(),
        req.filter.as_ref(),
        u64::from(MAX_PAGE),
    )
    .await?;
    Ok(axum::Json(BulkResult {
        action,
        affected,
        audit_id,
    }))
}

/// The operator audit log, newest first.
#[utoipa::path(get, path = "/api/v1/ops/audit", tag = "ops", params(PageLimit), responses((status = 200, body = AuditPage)))]
async fn audit(
    State(state): State<AppState>,
    principal: Principal,
    Query(q): Query<PageLimit>,
) -> ApiResult<axum::Json<AuditPage>> {
    principal.require(SCOPE_OPS_READ)?;
    let limit = q.get()?;
    Ok(axum::Json(AuditPage {
        entries: app::audit(&state, principal.tenant_id, limit).await?,
    }))
}

/// The console's live stream: `changed {"agent_id","cursor_hint"}` whenever an inbox
/// of the tenant changes, `job {…}` (a [`Job`]) after each batch of a bulk job and
/// when it ends, `sampled` when the overview's history has a new sample, `leases`
/// when a lease changed or the fence refused a call, `callbacks` when a webhook
/// callback was registered, changed or attempted, `heartbeat` at the configured
/// interval.
#[utoipa::path(get, path = "/api/v1/ops/stream", tag = "ops",
    responses((status = 200, description = "text/event-stream", content_type = "text/event-stream")))]
async fn stream(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    principal.require(SCOPE_OPS_READ)?;
    let mut rx = state.hub.subscribe_ops();
    let heartbeat = state.config.heartbeat;
    let shutdown = state.shutdown.clone();
    let tenant = principal.tenant_id;
    let stream = async_stream::stream! {
        yield Ok(Event::default().event("heartbeat").data("{}").retry(std::time::Duration::from_secs(3)));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => yield Ok(Event::default().event("heartbeat").data("{}")),
                msg = rx.recv() => match msg {
                    Ok(OpsSignal::Changed(w)) if w.tenant_id == tenant => {
                        let change = OpsChange { agent_id: w.agent_id, cursor_hint: w.cursor_hint };
                        yield Ok(Event::default().event("changed").data(serde_json::to_string(&change).unwrap_or_default()));
                    }
                    Ok(OpsSignal::Sampled) => yield Ok(Event::default().event("sampled").data("{}")),
                    Ok(OpsSignal::Leases(t)) if t == tenant => yield Ok(Event::default().event("leases").data("{}")),
                    Ok(OpsSignal::Callbacks(t)) if t == tenant => yield Ok(Event::default().event("callbacks").data("{}")),
                    Ok(OpsSignal::ClientSettings(t)) if t == tenant => yield Ok(Event::default().event("client_settings").data("{}")),
                    Ok(OpsSignal::Job(t, job)) if t == tenant => {
                        yield Ok(Event::default().event("job").data(serde_json::to_string(&job).unwrap_or_default()));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => yield Ok(Event::default().event("resync").data("{}")),
                    Err(RecvError::Closed) => break,
                },
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
