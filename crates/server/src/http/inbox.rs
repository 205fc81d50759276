//! The agent's inbox: subscribe (SSE), poll, claim, ack, release, extend, snapshot.

use super::AppState;
use super::auth::Principal;
use super::extract::{Json, Path, Query};
use super::limits::*;
use crate::app::inbox::{self as app, ClaimArgs, Claimed, ReleaseArgs};
use crate::error::{ApiError, ApiResult};
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
    let agent = app::reading_agent(&state, &principal, &agent).await?;
    let mut sub = app::subscribe(&state, &agent).await?;
    let heartbeat = state.config.heartbeat;
    let shutdown = state.shutdown.clone();
    let stream = async_stream::stream! {
        yield Ok(updated(sub.head).retry(Duration::from_secs(3)));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + heartbeat, heartbeat);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = ticks.tick() => yield Ok(Event::default().event("heartbeat").data("{}")),
                // Every wake-up since the last one written (or since subscribing,
                // before the head was read), in one.
                hint = sub.wakes.next() => match hint {
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
    let agent = app::reading_agent(&state, &principal, &agent).await?;
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    let page = app::poll(&state, &agent, q.after_cursor.unwrap_or(0), limit).await?;
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
    let agent = app::inbox_agent(&state, &principal, &agent).await?;
    let args = claim_args(&req)?;
    let done = app::claim(&state, &agent, args).await?;
    Ok(axum::Json(claimed(done)))
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

/// The answer to a committed claim.
fn claimed(done: Claimed) -> ClaimResponse {
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
    let agent = app::inbox_agent(&state, &principal, &p.agent).await?;
    let state = app::ack(&state, &agent, p.event_id, req.claim_token).await?;
    Ok(axum::Json(state))
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
    let agent = app::inbox_agent(&state, &principal, &agent).await?;
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
    let claim = req.claim.as_ref().map(claim_args).transpose()?;
    let (outcomes, next) = app::ack_batch(&state, &agent, &entries, claim).await?;
    let results = entries
        .iter()
        .zip(outcomes)
        .map(|(&(event_id, _), outcome)| match outcome {
            Ok(state) => AckResult {
                event_id,
                state: Some(state),
                problem: None,
            },
            Err(e) => AckResult {
                event_id,
                state: None,
                problem: Some(*e.problem),
            },
        })
        .collect();
    let claimed = next.map(claimed);
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
    let agent = app::inbox_agent(&state, &principal, &p.agent).await?;
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
    let state = app::release(&state, &agent, p.event_id, req.claim_token, &args).await?;
    Ok(axum::Json(state))
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
    let agent = app::inbox_agent(&state, &principal, &p.agent).await?;
    let lease = bounded(
        "lease_seconds",
        req.lease_seconds,
        DEFAULT_LEASE_S,
        MIN_LEASE_S,
        MAX_LEASE_S,
    )?;
    let lease_ms = i64::from(lease) * 1000;
    let st = app::extend(&state, &agent, p.event_id, req.claim_token, lease_ms).await?;
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
    let agent = app::reading_agent(&state, &principal, &agent).await?;
    Ok(axum::Json(app::snapshot(&state, &agent).await?))
}
