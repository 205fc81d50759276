//! The operator API: agents, overview, events, bulk actions, audit, live stream.

use super::AppState;
use super::auth::{
    Principal, SCOPE_ADMIN, SCOPE_OPS_READ, SCOPE_OPS_WRITE, agent_scopes, generate_token,
    hash_token,
};
use super::credentials::{SecretCreated, secret_created};
use super::extract::{Json, Path, Query};
use super::limits::*;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::hub::OpsSignal;
use crate::metrics::quantile;
use crate::store::{DepthRow, StoreError};
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
    let token = generate_token("sb_ag_");
    let agent = state
        .store
        .create_agent(
            principal.tenant_id,
            &req.name,
            &hash_token(&token),
            &agent_scopes(),
            Some(&principal.note(format!("agent:{}", req.name))),
            state.now(),
        )
        .await?;
    tracing::info!(agent = %agent.name, agent_id = %agent.id, "agent created");
    Ok(secret_created(AgentCreated {
        agent_id: agent.id,
        name: agent.name,
        token,
    }))
}

fn summaries(
    state: &AppState,
    depth: Vec<DepthRow>,
    agents: Vec<crate::store::AgentRecord>,
    now: i64,
) -> Vec<AgentSummary> {
    let mut out = Vec::with_capacity(agents.len());
    for a in agents {
        let d = depth.iter().find(|d| d.agent_id == a.id);
        out.push(AgentSummary {
            agent_id: a.id,
            name: a.name,
            counts: d.map(|d| d.counts.clone()).unwrap_or_default(),
            head_cursor: a.head_seq,
            oldest_cursor: a.low_water,
            oldest_pending_age_seconds: d
                .and_then(|d| d.oldest_pending_at)
                .map(|at| ((now - at).max(0)) as f64 / 1000.0),
            subscribers: state.hub.subscribers(a.id),
            last_seen_at: a.last_seen_at.map(to_timestamp),
            created_at: to_timestamp(a.created_at),
        });
    }
    out
}

async fn agent_summaries(state: &AppState, principal: &Principal) -> ApiResult<Vec<AgentSummary>> {
    principal.require(SCOPE_OPS_READ)?;
    let depth = state.store.depth(Some(principal.tenant_id)).await?;
    let agents = state.store.agents(principal.tenant_id).await?;
    Ok(summaries(state, depth, agents, state.now()))
}

/// Every agent of the tenant with its inbox depth by status.
#[utoipa::path(get, path = "/api/v1/ops/agents", tag = "ops", responses((status = 200, body = Vec<AgentSummary>)))]
async fn list_agents(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<AgentSummary>>> {
    Ok(axum::Json(agent_summaries(&state, &principal).await?))
}

/// Live health: per-agent depth, oldest pending age, subscribers, totals.
#[utoipa::path(get, path = "/api/v1/ops/overview", tag = "ops", responses((status = 200, body = Overview)))]
async fn overview(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Overview>> {
    let agents = agent_summaries(&state, &principal).await?;
    let mut totals = StatusCounts::default();
    for a in &agents {
        let c = &a.counts;
        totals.pending += c.pending;
        totals.claimed += c.claimed;
        totals.completed += c.completed;
        totals.quarantined += c.quarantined;
        totals.expired += c.expired;
        totals.purged += c.purged;
    }
    // The database's and retention's state: for the deployment's own tenant (its
    // console shows the queue table's tiles). Its numbers of events archived are the
    // tenant's own, every tenant's only for the deployment admin (I9).
    let (queue_table, retention) = if principal.tenant_id == state.tenant {
        (
            state.queue_health().await,
            Some(retention_health(&state, &principal)),
        )
    } else {
        (None, None)
    };
    Ok(axum::Json(Overview {
        queue_table,
        retention,
        subscribers: agents.iter().map(|a| a.subscribers).sum(),
        oldest_pending_age_seconds: agents
            .iter()
            .filter_map(|a| a.oldest_pending_age_seconds)
            .reduce(f64::max),
        totals,
        agents,
        server_time: to_timestamp(state.now()),
        counters: Some(counters(&state, principal.tenant_id)),
    }))
}

/// Retention's archive and whether it holds retention back.
fn retention_health(state: &AppState, principal: &Principal) -> switchboard_proto::RetentionHealth {
    let held = state
        .retention_held
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    switchboard_proto::RetentionHealth {
        archiving: state.archive.is_some(),
        archived_total: match principal.has(SCOPE_ADMIN) {
            true => state.metrics.archived_total(),
            false => state.metrics.tenant(principal.tenant_id).archived.get(),
        },
        held_back: held.map(|(since, why)| switchboard_proto::RetentionHeldBack {
            since: to_timestamp(since),
            reason: format!("{why}; {}", crate::archive::HELD_BACK_FIX),
        }),
    }
}

/// The overview's counters, read from the server's metrics, with the rates over the
/// last minute from the sample history.
fn counters(state: &AppState, tenant: TenantId) -> OpsCounters {
    let m = state.metrics.tenant(tenant);
    let buckets = m.latency_buckets();
    let c = m.counters();
    OpsCounters {
        lease_expirations_total: c.lease_expirations,
        stale_claim_rejections_total: c.stale_claim_rejections,
        fencing_rejections_total: c.fencing_rejections,
        quarantined_total: c.quarantined,
        delivered_total: c.delivered,
        delivery_latency_p50_seconds: quantile(&buckets, 0.5),
        delivery_latency_p99_seconds: quantile(&buckets, 0.99),
        per_minute: state.history.rates(tenant, state.now(), c),
    }
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
        state
            .store
            .list_events(principal.tenant_id, &q, limit)
            .await?,
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
    state
        .store
        .event_detail(principal.tenant_id, event_id)
        .await
        .map(axum::Json)
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(format_args!("event {event_id}")),
            e => e.into(),
        })
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
    let actor = principal.actor();
    let scope = crate::store::Scope {
        action,
        ids: req.ids.as_deref(),
        filter: req.filter.as_ref(),
    };
    let done = state
        .store
        .bulk(
            principal.tenant_id,
            &scope,
            u64::from(MAX_PAGE),
            &actor,
            state.now(),
        )
        .await?;
    let (affected, audit_id) = done.value;
    tracing::info!(
        action = action.as_str(),
        affected,
        audit_id,
        "operator bulk action"
    );
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
        entries: state.store.audit(principal.tenant_id, limit).await?,
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
