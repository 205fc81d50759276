//! Webhook callbacks as use cases: register one with a challenge (under the
//! request's idempotency key), list, disable, enable, re-verify, test and delete
//! them. The console hears of every change.

use super::AppState;
use crate::access::Principal;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::{
    AgentRecord, AttemptRecord, AuditNote, IdemKey, NewCallback, StoredCallback, StoredResponse,
};
use crate::webhooks::register;
use switchboard_proto::*;

pub use crate::store::StateChange;

/// Checks `req`'s target, challenges it, and registers the callback for `agent`,
/// storing the answer as `key`'s in the same transaction.
pub async fn register(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRecord,
    req: &RegisterCallback,
    key: &IdemKey,
) -> ApiResult<Callback> {
    let st = state;
    let actor = principal.actor();
    let webhooks = &st.webhooks;
    let checked = register::check(webhooks, req).await?;
    let id = CallbackId::new();
    let outcome =
        register::challenge(webhooks, id, &checked.url, &checked.secret, st.now() / 1000).await;
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
    let note = AuditNote::new(&actor, format!("callback:{id}"))
        .detail(format!("agent:{} {}", agent.name, new.url));
    st.store
        .put_callback(&new, Some((key, &stored)), &note)
        .await?;
    log_attempt(st, agent.tenant_id, id, "challenge", &outcome, now).await;
    st.hub.callbacks(agent.tenant_id);
    Ok(answer)
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
/// The callbacks of `agent`, or of the whole tenant.
pub async fn list(
    state: &AppState,
    tenant: TenantId,
    agent: Option<AgentId>,
) -> ApiResult<Vec<Callback>> {
    Ok(state.store.callbacks(tenant, agent).await?)
}

/// The stored callback `id` of `tenant`; 404 when there is none.
pub async fn found(
    state: &AppState,
    tenant: TenantId,
    id: CallbackId,
) -> ApiResult<StoredCallback> {
    state
        .store
        .callback(tenant, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format_args!("callback {id}")))
}

/// Deletes callback `id` of `agent`; 404 when it is not that agent's.
pub async fn remove_agents(
    state: &AppState,
    principal: &Principal,
    agent: &AgentRecord,
    id: CallbackId,
) -> ApiResult<()> {
    let found = state.store.callback(agent.tenant_id, id).await?;
    if found.is_none_or(|c| c.callback.agent_id != agent.id) {
        return Err(ApiError::not_found(format_args!("callback {id}")));
    }
    let note = principal
        .note(format!("callback:{id}"))
        .detail(format!("agent:{}", agent.name));
    state
        .store
        .delete_callback(agent.tenant_id, id, &note, state.now())
        .await?;
    state.hub.callbacks(agent.tenant_id);
    Ok(())
}

/// Deletes callback `id` of the principal's tenant (operators).
pub async fn delete(state: &AppState, principal: &Principal, id: CallbackId) -> ApiResult<()> {
    let note = principal.note(format!("callback:{id}"));
    if !state
        .store
        .delete_callback(principal.tenant_id, id, &note, state.now())
        .await?
    {
        return Err(ApiError::not_found(format_args!("callback {id}")));
    }
    state.hub.callbacks(principal.tenant_id);
    Ok(())
}

/// Disables or enables callback `id`.
pub async fn change(
    state: &AppState,
    principal: &Principal,
    id: CallbackId,
    change: StateChange,
) -> ApiResult<Callback> {
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
    Ok(changed)
}

/// Challenges callback `id` again; the attempt is logged either way.
pub async fn verify(
    state: &AppState,
    principal: &Principal,
    id: CallbackId,
) -> ApiResult<CallbackAttempt> {
    let (_, url, secret) = opened(state, principal.tenant_id, id).await?;
    let outcome = register::challenge(&state.webhooks, id, &url, &secret, state.now() / 1000).await;
    let attempt = log_attempt(
        state,
        principal.tenant_id,
        id,
        "challenge",
        &outcome,
        state.now(),
    )
    .await;
    state.hub.callbacks(principal.tenant_id);
    match outcome.error {
        Some(error) => Err(ApiError::new(ErrorCode::WebhookVerificationFailed, error)),
        None => Ok(attempt),
    }
}

/// Callback `id` of `tenant` with its URL and opened secret.
async fn opened(
    state: &AppState,
    tenant: TenantId,
    id: CallbackId,
) -> ApiResult<(StoredCallback, url::Url, switchboard_webhook::Secret)> {
    let stored = found(state, tenant, id).await?;
    let (url, secret) = endpoint(state, &stored)?;
    Ok((stored, url, secret))
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

/// Posts a signed `callback.test` delivery (a made-up event, not in any inbox) to
/// callback `id`; what the endpoint answered. Its schedule is not touched.
pub async fn test(
    state: &AppState,
    principal: &Principal,
    id: CallbackId,
) -> ApiResult<CallbackAttempt> {
    let (stored, url, secret) = opened(state, principal.tenant_id, id).await?;
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
    let started = std::time::Instant::now();
    let sent = state
        .webhooks
        .deliver(id, (&url, &secret), "callback.test", &event, now / 1000)
        .await;
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
    let attempt = log_attempt(state, principal.tenant_id, id, "test", &outcome, now).await;
    state.hub.callbacks(principal.tenant_id);
    Ok(attempt)
}

/// The last attempts of callback `id`.
pub async fn attempts(
    state: &AppState,
    tenant: TenantId,
    id: CallbackId,
) -> ApiResult<Vec<CallbackAttempt>> {
    found(state, tenant, id).await?;
    Ok(state.store.callback_attempts(id, 50).await?)
}
