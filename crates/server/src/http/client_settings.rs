//! Remote client settings (issue 18): an operator sets, for the tenant or one agent,
//! the SDK's polling ceiling and whether its client reports are paused. Each
//! response to an agent's request carries what is in effect for it in the
//! `Switchboard-Client-Settings` header (written by `notes.rs`), so the SDK picks a
//! change up from its next response.
//!
//! The settings are read with the bearer token (one statement, see
//! `store/rows.rs`), so they cost no read of their own; the token cache holds them
//! for its TTL (2 s). A change clears this instance's cache at once; other
//! instances follow within the TTL.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Json, Path};
use crate::app::clients as app;
use crate::app::inbox::{agent as load_agent, inbox_agent};
use crate::error::ApiResult;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, put_tenant, delete_tenant))
        .routes(routes!(get_agent, put_agent, delete_agent))
        .routes(routes!(get_own))
}

/// The tenant's settings and every agent's own.
#[utoipa::path(get, path = "/api/v1/ops/client-settings", tag = "ops",
    responses((status = 200, body = ClientSettingsList)))]
async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<ClientSettingsList>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(app::list(&state, principal.tenant_id).await?))
}

/// Sets the tenant's settings, for every agent without its own (a field left null
/// leaves the SDK's own value).
#[utoipa::path(put, path = "/api/v1/ops/client-settings", tag = "ops",
    request_body = ClientSettings,
    responses((status = 200, body = StoredClientSettings), (status = 422, body = Problem)))]
async fn put_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Json(settings): Json<ClientSettings>,
) -> ApiResult<axum::Json<StoredClientSettings>> {
    principal.require(SCOPE_OPS_WRITE)?;
    Ok(axum::Json(
        app::put(&state, &principal, None, settings).await?,
    ))
}

/// Removes the tenant's settings: agents without their own obey their SDK's.
#[utoipa::path(delete, path = "/api/v1/ops/client-settings", tag = "ops",
    responses((status = 204)))]
async fn delete_tenant(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<StatusCode> {
    principal.require(SCOPE_OPS_WRITE)?;
    app::delete(&state, &principal, None).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// One agent's own settings and what its SDK obeys.
#[utoipa::path(get, path = "/api/v1/ops/agents/{agent}/client-settings", tag = "ops",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 200, body = AgentClientSettings), (status = 404, body = Problem)))]
async fn get_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<AgentClientSettings>> {
    principal.require(SCOPE_OPS_READ)?;
    let agent = load_agent(&state, principal.tenant_id, &agent).await?;
    let list = app::list(&state, principal.tenant_id).await?;
    Ok(axum::Json(AgentClientSettings {
        agent_id: agent.id,
        effective: list.effective_for(agent.id),
        own: list
            .agents
            .into_iter()
            .find(|s| s.agent_id == Some(agent.id)),
        name: agent.name,
    }))
}

/// Sets one agent's own settings (each null field inherits the tenant's).
#[utoipa::path(put, path = "/api/v1/ops/agents/{agent}/client-settings", tag = "ops",
    params(("agent" = String, Path, description = "Agent id or name")),
    request_body = ClientSettings,
    responses((status = 200, body = StoredClientSettings), (status = 404, body = Problem),
        (status = 422, body = Problem)))]
async fn put_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    Json(settings): Json<ClientSettings>,
) -> ApiResult<axum::Json<StoredClientSettings>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let agent = load_agent(&state, principal.tenant_id, &agent).await?;
    Ok(axum::Json(
        app::put(&state, &principal, Some(&agent), settings).await?,
    ))
}

/// Removes one agent's own settings: it obeys the tenant's again.
#[utoipa::path(delete, path = "/api/v1/ops/agents/{agent}/client-settings", tag = "ops",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 204), (status = 404, body = Problem)))]
async fn delete_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<StatusCode> {
    principal.require(SCOPE_OPS_WRITE)?;
    let agent = load_agent(&state, principal.tenant_id, &agent).await?;
    app::delete(&state, &principal, Some(&agent)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The settings the agent's SDK is to obey (also sent in the
/// `Switchboard-Client-Settings` header of every response to it). An SDK whose
/// reports are paused reads this now and then to learn when they resume.
#[utoipa::path(get, path = "/api/v1/agents/{agent}/client-settings", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    responses((status = 200, body = EffectiveClientSettings), (status = 404, body = Problem)))]
async fn get_own(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<EffectiveClientSettings>> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    let list = app::list(&state, principal.tenant_id).await?;
    Ok(axum::Json(list.effective_for(agent.id)))
}
