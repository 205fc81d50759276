//! The agent's inbox: subscribe (SSE), poll, claim, ack, release, extend, snapshot.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_WRITE};
use super::extract::{Json, Path, Query};
use super::limits::*;
use crate::error::{ApiError, ApiResult};
use crate::store::{AgentRecord, ClaimArgs, Claimed, ReleaseArgs, StoreError};
use axum::response::sse::{Event, Sse};
use futures::Stream;
use std::convert::Infallible;
use std::time::Duration;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(subscribe))
        .routes(routes!(poll))
        .routes(routes!(claim))
        .routes(routes!(ack))
        .routes(routes!(ack_batch))
        .routes(routes!(release))
        .routes(routes!(extend))
        .routes(routes!(snapshot))
}

/// Loads the agent named in the path if `principal` may use its inbox; 404 otherwise,
/// the same answer for "foreign" and "unknown" (I9).
/// Loads an agent of `tenant` by id or name; 404 names it when it is not there.
pub(super) async fn load_agent(
    state: &AppState,
    tenant: TenantId,
    key: &str,
) -> ApiResult<AgentRecord> {
    state.store.agent(tenant, key).await.map_err(|e| match e {
        StoreError::NotFound => ApiError::not_found(format_args!("agent {key:?}")),
        e => e.into(),
    })
}

pub(super) async fn inbox_agent(
    state: &AppState,
    principal: &Principal,
    key: &str,
) -> ApiResult<AgentRecord> {
    // An operator who may not work inboxes (a read-only console session) is refused
    // before any lookup: 403 for every name alike tells it nothing.
    if principal.agent_id.is_none() {
        principal.require(SCOPE_OPS_WRITE)?;
    }
    let agent = match state.lookups.agent(principal.tenant_id, key) {
        Some(agent) => agent,
        None => {
            let agent = load_agent(state, principal.tenant_id, key).await?;
            state.lookups.put_agent(principal.tenant_id, key, &agent);
            agent
        }
    };
    if !principal.may_use_inbox(&agent) {
        return Err(ApiError::not_found(format_args!("agent {key:?}")));
    }
    Ok(agent)
}

/// Maps store errors of claim-token operations, counting stale claims (I4).
fn claim_error(state: &AppState, tenant: TenantId, e: StoreError, event: EventId) -> ApiError {
    match e {
        StoreError::StaleClaim(_) => {
            state.metrics.tenant(tenant).stale_claim_rejections.inc();
            e.into()
        }
        StoreError::NotFound => ApiError::not_found(format_args!("event {event}")),
        e => e.into(),
    }
}

/// Subscribe to wake-ups: `inbox_updated {"cursor_hint"}` after each commit that
/// touches the inbox, `heartbeat` at the configured interval. No payloads. The first
/// event is always an `inbox_updated` with the current head, so a reconnecting
/// subscriber catches up on what it missed.
#[utoipa::path(get, path = "/api/v1/agents/{agent}/subscribe", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 200, description = "text/event-stream", content_type = "text/event-stream"),
              (status = 404, body = Problem)))]
async fn subscribe(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    // Register first, then read the head: a send that commits in between is then
    // either in the head or delivered on the channel, never lost.
    let mut sub = state.hub.subscribe(agent.id);
    let agent = state
        .store
        .agent(agent.tenant_id, &agent.id.to_string())
        .await?;
    let metrics = state.metrics.tenant(agent.tenant_id);
    metrics.sse_subscribers.inc();
    let _ = state.store.touch_agent(agent.id, state.now()).await;
    let heartbeat = state.config.heartbeat;
    let shutdown = state.shutdown.clone();
    let head = agent.head_seq;
    let stream = async_stream::stream! {
        let _guard = SubscriberGauge(metrics);
        yield Ok(updated(head).retry(Duration::from_secs(3)));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => yield Ok(Event::default().event("heartbeat").data("{}")),
                // Every wake-up since the last one written (or since subscribing,
                // before the head was read), in one.
                hint = sub.next() => match hint {
                    Some(hint) => yield Ok(updated(hint)),
                    None => break,
                },
            }
        }
    };
    // No `KeepAlive`: the heartbeat events above already come every `heartbeat`, so
    // its timer (at least as long, and reset by every event) could never fire.
    Ok(Sse::new(stream))
}

fn updated(hint: u64) -> Event {
    Event::default()
        .event("inbox_updated")
        .id(hint.to_string())
        .data(serde_json::to_string(&InboxUpdated { cursor_hint: hint }).unwrap_or_default())
}

struct SubscriberGauge(std::sync::Arc<crate::metrics::TenantMetrics>);

impl Drop for SubscriberGauge {
    fn drop(&mut self) {
        self.0.sse_subscribers.dec();
    }
}

/// Read a page of the inbox after a cursor (read-only; use claim to take work).
#[utoipa::path(get, path = "/api/v1/agents/{agent}/inbox", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name"), InboxQuery),
    responses((status = 200, body = InboxPage),
              (status = 410, body = Problem, description = "cursor_gone: below the low-water mark; see oldest_cursor"),
              (status = 404, body = Problem)))]
async fn poll(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    Query(q): Query<InboxQuery>,
) -> ApiResult<axum::Json<InboxPage>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    let page = state
        .store
        .poll(agent.id, q.after_cursor.unwrap_or(0), limit)
        .await?;
    Ok(axum::Json(page))
}

/// Claim pending events under a visibility lease: highest priority first, then
/// sequence. Each claim mints a new claim token and counts an attempt.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/inbox/claim", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    request_body = ClaimRequest,
    responses((status = 200, body = ClaimResponse), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn claim(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    Json(req): Json<ClaimRequest>,
) -> ApiResult<axum::Json<ClaimResponse>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    let args = claim_args(&req)?;
    let done = state
        .store
        .claim(&agent, args.limit, args.lease_ms, args.attempt, state.now())
        .await?;
    Ok(axum::Json(claimed(&state, &agent, done)))
}

/// A claim request's bounds checked.
fn claim_args(req: &ClaimRequest) -> ApiResult<ClaimArgs> {
    let limit = bounded("limit", req.limit, 1, 1, MAX_CLAIM)?;
    let lease = bounded(
        "lease_seconds",
        req.lease_seconds,
        DEFAULT_LEASE_S,
        MIN_LEASE_S,
        MAX_LEASE_S,
    )?;
    Ok(ClaimArgs {
        limit,
        lease_ms: i64::from(lease) * 1000,
        attempt: req.attempt_id,
    })
}

/// The answer to a committed claim; its expired leases count as the scavenger's
/// would, and the console hears of it.
fn claimed(state: &AppState, agent: &AgentRecord, done: Claimed) -> ClaimResponse {
    state.reaped(&done.reaped);
    state.hub.changed(agent.wake(agent.head_seq));
    ClaimResponse {
        events: done.events,
        next_available_at: done.next_available.map(crate::clock::to_timestamp),
    }
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct EventPath {
    /// Agent id or name.
    agent: String,
    event_id: EventId,
}

/// Acknowledge a claimed event: it is done. A retry of the same ack succeeds again.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/inbox/{event_id}/ack", tag = "agent",
    params(EventPath), request_body = AckRequest,
    responses((status = 200, body = EventState),
              (status = 409, body = Problem, description = "stale_claim"),
              (status = 404, body = Problem)))]
async fn ack(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(p): Path<EventPath>,
    Json(req): Json<AckRequest>,
) -> ApiResult<axum::Json<EventState>> {
    let agent = inbox_agent(&state, &principal, &p.agent).await?;
    let acked = state
        .store
        .ack(&agent, p.event_id, req.claim_token, state.now())
        .await
        .map_err(|e| claim_error(&state, agent.tenant_id, e, p.event_id))?;
    state.acked(agent.tenant_id, &acked);
    state.hub.changed(agent.wake(agent.head_seq));
    Ok(axum::Json(acked.state))
}

/// Acknowledge several claimed events in one transaction (at most 100, each once).
/// Every entry gets its own result, in order: the event's state, or the problem a
/// single ack would have answered. A stale entry does not fail the others. With
/// `claim`, the same transaction then claims the next events (one commit for a
/// consumer's ack and its next claim); `acks` may then be empty.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/inbox/ack", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    request_body = AckBatch,
    responses((status = 200, body = AckBatchResult),
              (status = 422, body = Problem, description = "empty, too many, or an event twice"),
              (status = 404, body = Problem)))]
async fn ack_batch(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    Json(req): Json<AckBatch>,
) -> ApiResult<axum::Json<AckBatchResult>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    let n = req.acks.len();
    let least = usize::from(req.claim.is_none());
    if n < least || n > MAX_CLAIM as usize {
        return Err(ApiError::unprocessable(format!(
            "acks must have {least} to {MAX_CLAIM} entries, not {n}; split a larger batch"
        )));
    }
    let mut seen = std::collections::HashSet::with_capacity(n);
    if let Some(twice) = req.acks.iter().find(|a| !seen.insert(a.event_id)) {
        return Err(ApiError::unprocessable(format!(
            "event {} is in acks twice; list each event once",
            twice.event_id
        )));
    }
    let entries: Vec<(EventId, ClaimToken)> = req
        .acks
        .iter()
        .map(|a| (a.event_id, a.claim_token))
        .collect();
    let (outcomes, next) = match &req.claim {
        Some(claim) => {
            let args = claim_args(claim)?;
            let (outcomes, done) = state
                .store
                .ack_and_claim(&agent, &entries, args, state.now())
                .await?;
            (outcomes, Some(done))
        }
        None => (
            state.store.ack_batch(&agent, &entries, state.now()).await?,
            None,
        ),
    };
    let results = entries
        .iter()
        .zip(outcomes)
        .map(|(&(event_id, _), outcome)| match outcome {
            Ok(acked) => {
                state.acked(agent.tenant_id, &acked);
                AckResult {
                    event_id,
                    state: Some(acked.state),
                    problem: None,
                }
            }
            Err(e) => AckResult {
                event_id,
                state: None,
                problem: Some(*claim_error(&state, agent.tenant_id, e, event_id).problem),
            },
        })
        .collect();
    let claimed = match next {
        Some(done) => Some(claimed(&state, &agent, done)),
        None => {
            state.hub.changed(agent.wake(agent.head_seq));
            None
        }
    };
    Ok(axum::Json(AckBatchResult { results, claimed }))
}

/// Give a claimed event back: pending again after `delay_seconds`, or quarantined when
/// `terminal` is set or its attempts are used up.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/inbox/{event_id}/release", tag = "agent",
    params(EventPath), request_body = ReleaseRequest,
    responses((status = 200, body = EventState),
              (status = 409, body = Problem, description = "stale_claim"),
              (status = 404, body = Problem)))]
async fn release(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(p): Path<EventPath>,
    Json(req): Json<ReleaseRequest>,
) -> ApiResult<axum::Json<EventState>> {
    let agent = inbox_agent(&state, &principal, &p.agent).await?;
    let delay = bounded("delay_seconds", req.delay_seconds, 0, 0, MAX_DELAY_S)?;
    if req
        .error
        .as_ref()
        .is_some_and(|e| e.len() > MAX_ERROR_BYTES)
    {
        return Err(ApiError::unprocessable(format!(
            "error must be at most {MAX_ERROR_BYTES} bytes; shorten it"
        )));
    }
    let args = ReleaseArgs {
        delay_ms: i64::from(delay) * 1000,
        error: req.error,
        terminal: req.terminal,
    };
    let done = state
        .store
        .release(&agent, p.event_id, req.claim_token, &args, state.now())
        .await
        .map_err(|e| claim_error(&state, agent.tenant_id, e, p.event_id))?;
    state.released(agent.tenant_id, &done);
    Ok(axum::Json(done.value))
}

/// Extend the lease of a claimed event from now.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/inbox/{event_id}/extend", tag = "agent",
    params(EventPath), request_body = ExtendRequest,
    responses((status = 200, body = EventState),
              (status = 409, body = Problem, description = "stale_claim"),
              (status = 404, body = Problem)))]
async fn extend(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(p): Path<EventPath>,
    Json(req): Json<ExtendRequest>,
) -> ApiResult<axum::Json<EventState>> {
    let agent = inbox_agent(&state, &principal, &p.agent).await?;
    let lease = bounded(
        "lease_seconds",
        req.lease_seconds,
        DEFAULT_LEASE_S,
        MIN_LEASE_S,
        MAX_LEASE_S,
    )?;
    let st = state
        .store
        .extend(
            &agent,
            p.event_id,
            req.claim_token,
            i64::from(lease) * 1000,
            state.now(),
        )
        .await
        .map_err(|e| claim_error(&state, agent.tenant_id, e, p.event_id))?;
    Ok(axum::Json(st))
}

/// The baseline for a full state sync: head, low-water mark, where open work starts.
#[utoipa::path(get, path = "/api/v1/agents/{agent}/snapshot", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 200, body = Snapshot), (status = 404, body = Problem)))]
async fn snapshot(
    state: axum::extract::State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<Snapshot>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    Ok(axum::Json(state.store.snapshot(&agent, state.now()).await?))
}
