//! Webhook callbacks: an agent (or an operator) registers one with a challenge;
//! operators list, disable, enable, re-verify, test and delete them.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Path, RawJson, parse_json};
use super::idempotency::{self, Policy};
use crate::app::callbacks::{self as app, StateChange};
use crate::app::inbox::inbox_agent;
use crate::error::ApiResult;
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
    let (st, me) = (state.clone(), principal.clone());
    idempotency::run(
        &state,
        &principal,
        &headers,
        &path,
        &body,
        REGISTER,
        |key| async move { app::register(&st, &me, &agent, &req, &key).await },
    )
    .await
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
        callbacks: app::list(&state, agent.tenant_id, Some(agent.id)).await?,
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
    app::remove_agents(&state, &principal, &agent, p.callback_id).await?;
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
        callbacks: app::list(&state, principal.tenant_id, None).await?,
    }))
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
struct CallbackPath {
    callback_id: CallbackId,
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
    app::delete(&state, &principal, p.callback_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn change(
    state: &AppState,
    principal: &Principal,
    id: CallbackId,
    change: StateChange,
) -> ApiResult<axum::Json<Callback>> {
    principal.require(SCOPE_OPS_WRITE)?;
    Ok(axum::Json(app::change(state, principal, id, change).await?))
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
    Ok(axum::Json(
        app::verify(&state, &principal, p.callback_id).await?,
    ))
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
    Ok(axum::Json(
        app::test(&state, &principal, p.callback_id).await?,
    ))
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
    Ok(axum::Json(CallbackAttemptList {
        attempts: app::attempts(&state, principal.tenant_id, p.callback_id).await?,
    }))
}
