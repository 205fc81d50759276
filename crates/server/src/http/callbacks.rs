//! Webhook callbacks: an agent (or an operator) registers one with a challenge;
//! operators list, disable, enable, re-verify, test and delete them.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Path, RawJson, parse_json};
use super::idempotency::{self, Policy};
use super::inbox::inbox_agent;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::{AttemptRecord, NewCallback, StateChange, StoredCallback, StoredResponse};
use crate::webhooks::register;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_callback, agent_callbacks))
        .routes(routes!(remove_agent_callback))
        .routes(routes!(list_callbacks))
        .routes(routes!(delete_callback))
        .routes(routes!(disable_callback))
        .routes(routes!(enable_callback))
        .routes(routes!(verify_callback))
        .routes(routes!(test_callback))
        .routes(routes!(callback_attempts))
}

/// A failed challenge or a refused target holds only until the endpoint is fixed:
/// the key is forgotten, so the same request may be sent again.
const REGISTER: Policy = Policy {
    replay_success: None,
    momentary: &[422],
};

/// Register the agent's webhook callback: the URL is checked (https, a public
/// address), then challenged; only an endpoint that answers with the HMAC of the
/// challenge is stored. Replaces the agent's earlier callback.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/callbacks", tag = "callbacks",
    params(("agent" = String, Path, description = "Agent id or name"),
           ("Idempotency-Key" = String, Header, description = "Required; reuse it on retries")),
    request_body = RegisterCallback,
    responses((status = 201, body = Callback, description = "Verified and registered"),
              (status = 400, body = Problem, description = "validation_failed: the secret's form"),
              (status = 404, body = Problem),
              (status = 422, body = Problem, description = "webhook_target_forbidden or webhook_verification_failed")))]
async fn register_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> ApiResult<Response> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    let req: RegisterCallback = parse_json(&body)?;
    let path = format!("/api/v1/agents/{}/callbacks", agent.id);
    let actor = principal.actor();
    let st = state.clone();
    idempotency::run(
        &state,
        &principal,
        &headers,
        &path,
        &body,
        REGISTER,
        |key| async move {
            let webhooks = &st.webhooks;
            let checked = register::check(webhooks, &req).await?;
            let id = CallbackId::new();
            let outcome =
                register::challenge(webhooks, id, &checked.url, &checked.secret, st.now() / 1000)
                    .await;
            if let Some(error) = outcome.error {
                return Err(ApiError::new(ErrorCode::WebhookVerificationFailed, error));
            }
            let now = st.now();
            let new = NewCallback {
                id,
                tenant: agent.tenant_id,
                agent: agent.id,
                url: checked.url.to_string(),
                sealed: webhooks.seal(id, &checked.secret),
                key_id: webhooks.key.id().to_owned(),
                now,
            };
            let answer = Callback {
                callback_id: id,
                agent: agent.name.clone(),
                agent_id: agent.id,
                url: new.url.clone(),
                state: CallbackState::Active,
                created_at: to_timestamp(now),
                last_delivery_at: None,
                last_status: None,
                last_error: None,
                failure_streak: 0,
                failing_since: None,
                disabled_reason: None,
            };
            let stored = StoredResponse {
                status: 201,
                body: serde_json::to_string(&answer).unwrap_or_default(),
            };
            let note = crate::store::AuditNote::new(&actor, format!("callback:{id}"))
                .detail(format!("agent:{} {}", agent.name, new.url));
            st.store
                .put_callback(&new, Some((&key, &stored)), &note)
                .await?;
            log_attempt(&st, agent.tenant_id, id, "challenge", &outcome, now).await;
            st.hub.callbacks(agent.tenant_id);
            Ok(answer)
        },
    )
    .await
}

/// Logs a challenge or a test in the callback's attempts (a failure to log is
/// only a warning: the attempt itself is over).
async fn log_attempt(
    state: &AppState,
    tenant: TenantId,
    id: CallbackId,
    kind: &str,
    outcome: &register::Outcome,
    now: i64,
) -> CallbackAttempt {
    let attempt = CallbackAttempt {
        at: to_timestamp(now),
        event_id: None,
        kind: kind.to_owned(),
        status: outcome.status,
        error: outcome.error.clone(),
        latency_ms: outcome.latency_ms,
    };
    let record = AttemptRecord {
        tenant,
        callback: id,
        lease_token: None,
        attempt: attempt.clone(),
        at: now,
        succeeded: outcome.error.is_none(),
        next_attempt_at: now,
        disable: None,
    };
    if let Err(e) = state.store.record_attempt(&record).await {
        tracing::warn!(error = %e, callback_id = %id, "could not log a webhook attempt");
    }
    attempt
}

/// The agent's callbacks (at most one).
#[utoipa::path(get, path = "/api/v1/agents/{agent}/callbacks", tag = "callbacks",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 200, body = CallbackList), (status = 404, body = Problem)))]
async fn agent_callbacks(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<CallbackList>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    Ok(axum::Json(CallbackList {
        callbacks: state
            .store
            .callbacks(agent.tenant_id, Some(agent.id))
            .await?,
    }))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct AgentCallbackPath {
    /// Agent id or name.
    agent: String,
    callback_id: CallbackId,
}

/// Remove the agent's callback: deliveries stop; its events stay in the inbox.
#[utoipa::path(delete, path = "/api/v1/agents/{agent}/callbacks/{callback_id}", tag = "callbacks",
    params(AgentCallbackPath),
    responses((status = 204), (status = 404, body = Problem)))]
async fn remove_agent_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<AgentCallbackPath>,
) -> ApiResult<StatusCode> {
    let agent = inbox_agent(&state, &principal, &p.agent).await?;
    let found = state.store.callback(agent.tenant_id, p.callback_id).await?;
    if found.is_none_or(|c| c.callback.agent_id != agent.id) {
        return Err(ApiError::not_found(format_args!(
            "callback {}",
            p.callback_id
        )));
    }
    let note = principal
        .note(format!("callback:{}", p.callback_id))
        .detail(format!("agent:{}", agent.name));
    state
        .store
        .delete_callback(agent.tenant_id, p.callback_id, &note, state.now())
        .await?;
    state.hub.callbacks(agent.tenant_id);
    Ok(StatusCode::NO_CONTENT)
}

/// Every callback of the tenant, oldest first.
#[utoipa::path(get, path = "/api/v1/ops/callbacks", tag = "callbacks",
    responses((status = 200, body = CallbackList)))]
async fn list_callbacks(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<CallbackList>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(CallbackList {
        callbacks: state.store.callbacks(principal.tenant_id, None).await?,
    }))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct CallbackPath {
    callback_id: CallbackId,
}

async fn found(state: &AppState, tenant: TenantId, id: CallbackId) -> ApiResult<StoredCallback> {
    state
        .store
        .callback(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format_args!("callback {id}")))
}

/// Delete a callback: deliveries stop; its events stay in the inbox.
#[utoipa::path(delete, path = "/api/v1/ops/callbacks/{callback_id}", tag = "callbacks",
    params(CallbackPath), responses((status = 204), (status = 404, body = Problem)))]
async fn delete_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<StatusCode> {
    principal.require(SCOPE_OPS_WRITE)?;
    let note = principal.note(format!("callback:{}", p.callback_id));
    if !state
        .store
        .delete_callback(principal.tenant_id, p.callback_id, &note, state.now())
        .await?
    {
        return Err(ApiError::not_found(format_args!(
            "callback {}",
            p.callback_id
        )));
    }
    state.hub.callbacks(principal.tenant_id);
    Ok(StatusCode::NO_CONTENT)
}

async fn change(
    state: &AppState,
    principal: &Principal,
    id: CallbackId,
    change: StateChange,
) -> ApiResult<axum::Json<Callback>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let changed = state
        .store
        .change_callback(
            principal.tenant_id,
            id,
            &change,
            &principal.note(format!("callback:{id}")),
            state.now(),
        )
        .await?
        .ok_or_else(|| ApiError::not_found(format_args!("callback {id}")))?;
    state.hub.callbacks(principal.tenant_id);
    Ok(axum::Json(changed))
}

/// Stop deliveries to a callback; its events wait in the inbox.
#[utoipa::path(post, path = "/api/v1/ops/callbacks/{callback_id}/disable", tag = "callbacks",
    params(CallbackPath), responses((status = 200, body = Callback), (status = 404, body = Problem)))]
async fn disable_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<axum::Json<Callback>> {
    let reason = "disabled by an operator".to_owned();
    change(
        &state,
        &principal,
        p.callback_id,
        StateChange::Disable { reason },
    )
    .await
}

/// Resume deliveries at once, with a clean failure record.
#[utoipa::path(post, path = "/api/v1/ops/callbacks/{callback_id}/enable", tag = "callbacks",
    params(CallbackPath), responses((status = 200, body = Callback), (status = 404, body = Problem)))]
async fn enable_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<axum::Json<Callback>> {
    change(&state, &principal, p.callback_id, StateChange::Enable).await
}

/// Challenge the endpoint again with the stored secret (it does not change the
/// callback's state): 200 when it answers right, else 422 saying what failed.
#[utoipa::path(post, path = "/api/v1/ops/callbacks/{callback_id}/verify", tag = "callbacks",
    params(CallbackPath),
    responses((status = 200, body = CallbackAttempt), (status = 404, body = Problem),
              (status = 422, body = Problem, description = "webhook_verification_failed")))]
async fn verify_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<axum::Json<CallbackAttempt>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let stored = found(&state, principal.tenant_id, p.callback_id).await?;
    let (url, secret) = endpoint(&state, &stored)?;
    let outcome = register::challenge(
        &state.webhooks,
        p.callback_id,
        &url,
        &secret,
        state.now() / 1000,
    )
    .await;
    let attempt = log_attempt(
        &state,
        principal.tenant_id,
        p.callback_id,
        "challenge",
        &outcome,
        state.now(),
    )
    .await;
    state.hub.callbacks(principal.tenant_id);
    match outcome.error {
        Some(error) => Err(ApiError::new(ErrorCode::WebhookVerificationFailed, error)),
        None => Ok(axum::Json(attempt)),
    }
}

/// The stored URL and the opened secret, or a 503 saying why this instance cannot
/// open it (another webhook key).
fn endpoint(
    state: &AppState,
    stored: &StoredCallback,
) -> ApiResult<(url::Url, switchboard_webhook::Secret)> {
    let id = stored.callback.callback_id;
    let secret = state
        .webhooks
        .secret(id, &stored.key_id, &stored.sealed)
        .map_err(|e| ApiError::new(ErrorCode::Unavailable, e))?;
    let url = url::Url::parse(&stored.callback.url).map_err(|_| {
        ApiError::new(
            ErrorCode::Internal,
            "the stored callback URL does not parse",
        )
    })?;
    Ok((url, secret))
}

/// Send a `callback.test` delivery (a made-up event, not in any inbox) and report
/// what the endpoint answered; the callback's schedule is not touched.
#[utoipa::path(post, path = "/api/v1/ops/callbacks/{callback_id}/test", tag = "callbacks",
    params(CallbackPath),
    responses((status = 200, body = CallbackAttempt, description = "What the endpoint answered"),
              (status = 404, body = Problem)))]
async fn test_callback(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<axum::Json<CallbackAttempt>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let stored = found(&state, principal.tenant_id, p.callback_id).await?;
    let (url, secret) = endpoint(&state, &stored)?;
    let now = state.now();
    let event = InboxEvent {
        event_id: EventId::new(),
        agent_id: stored.callback.agent_id,
        seq: 0,
        sender: Sender::Operator,
        room_id: None,
        room_seq: None,
        correlation_id: None,
        priority: 0,
        status: EventStatus::Claimed,
        payload: Some(serde_json::json!({ "test": true })),
        attempts: 1,
        max_attempts: 1,
        created_at: to_timestamp(now),
        available_at: to_timestamp(now),
        expires_at: None,
        last_error: None,
    };
    let body = serde_json::to_vec(&CallbackDelivery {
        kind: "callback.test".to_owned(),
        event: event.clone(),
    })
    .unwrap_or_default();
    let started = std::time::Instant::now();
    let (keyid, webhook_id) = (p.callback_id.to_string(), event.event_id.to_string());
    let post = crate::webhooks::Post {
        url: &url,
        secret: &secret,
        keyid: &keyid,
        webhook_id: &webhook_id,
        now_secs: now / 1000,
        timeout: crate::workers::deliverer::DELIVERY_TIMEOUT,
    };
    let sent = state.webhooks.post(&post, body).await;
    let outcome = match sent {
        Ok(response) => {
            let status = response.status();
            register::Outcome {
                status: Some(status.as_u16()),
                error: (!status.is_success()).then(|| format!("HTTP {}", status.as_u16())),
                latency_ms: started.elapsed().as_millis() as u64,
            }
        }
        Err(failure) => register::Outcome {
            status: None,
            error: Some(failure.to_string()),
            latency_ms: started.elapsed().as_millis() as u64,
        },
    };
    let attempt = log_attempt(
        &state,
        principal.tenant_id,
        p.callback_id,
        "test",
        &outcome,
        now,
    )
    .await;
    state.hub.callbacks(principal.tenant_id);
    Ok(axum::Json(attempt))
}

/// The callback's recent attempts (deliveries, challenges, tests), newest first.
#[utoipa::path(get, path = "/api/v1/ops/callbacks/{callback_id}/attempts", tag = "callbacks",
    params(CallbackPath),
    responses((status = 200, body = CallbackAttemptList), (status = 404, body = Problem)))]
async fn callback_attempts(
    State(state): State<AppState>,
    principal: Principal,
    Path(p): Path<CallbackPath>,
) -> ApiResult<axum::Json<CallbackAttemptList>> {
    principal.require(SCOPE_OPS_READ)?;
    found(&state, principal.tenant_id, p.callback_id).await?;
    Ok(axum::Json(CallbackAttemptList {
        attempts: state.store.callback_attempts(p.callback_id, 50).await?,
    }))
}
