//! Device login requests (RFC 8628) as the operators of a tenant see and decide
//! them: the list, approve (naming the agent, created when it does not exist) and
//! deny. A request belongs to the tenant the client named (the default tenant
//! when it named none); another tenant's operators see nothing of it, and its user
//! code answers them as one that does not exist (I9).

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::Path;
use super::limits::name;
use crate::app::devices as app;
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(approve))
        .routes(routes!(deny))
}

/// The tenant's device login requests that have not expired, newest first:
/// pending ones wait for approve or deny.
#[utoipa::path(get, path = "/api/v1/ops/device-requests", tag = "ops",
    responses((status = 200, body = Vec<DeviceRequest>)))]
async fn list(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<DeviceRequest>>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(app::list(&state, principal.tenant_id).await?))
}

/// The user code as the device shows it, upper case, with or without its dash.
fn normalized(code: &str) -> ApiResult<String> {
    let letters: String = code
        .chars()
        .filter(|c| *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if letters.len() == 8 && letters.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(format!("{}-{}", &letters[..4], &letters[4..]))
    } else {
        Err(
            ApiError::validation("user_code is the 8 letters the device shows, as XXXX-XXXX")
                .with("field", "user_code"),
        )
    }
}

/// Approve a pending device request: the device gets its tokens at its next poll.
/// The agent (`{"agent": name}`, or the one it asked for) is created in this
/// tenant when it does not exist; the login is a credential of that agent, listed
/// and revoked like its tokens.
#[utoipa::path(post, path = "/api/v1/ops/device-requests/{user_code}/approve", tag = "ops",
    params(("user_code" = String, Path, description = "XXXX-XXXX, as the device shows it")),
    request_body = ApproveDevice,
    responses((status = 200, body = DeviceRequest), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn approve(
    State(state): State<AppState>,
    principal: Principal,
    Path(code): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<axum::Json<DeviceRequest>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let code = normalized(&code)?;
    // The body is optional: none approves the agent the device asked for.
    let body: ApproveDevice = if body.iter().all(u8::is_ascii_whitespace) {
        ApproveDevice::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::validation(format!(
                "the body must be {{\"agent\": \"name\"}} or empty: {e}"
            ))
        })?
    };
    // The name the device asked for was checked when it asked.
    if let Some(agent) = &body.agent {
        name("agent", agent)?;
    }
    let row = app::approve(&state, &principal, &code, body.agent.as_deref()).await?;
    Ok(axum::Json(row))
}

/// Deny a pending device request: the device's next poll answers `access_denied`.
#[utoipa::path(post, path = "/api/v1/ops/device-requests/{user_code}/deny", tag = "ops",
    params(("user_code" = String, Path, description = "XXXX-XXXX, as the device shows it")),
    responses((status = 200, body = DeviceRequest), (status = 404, body = Problem)))]
async fn deny(
    State(state): State<AppState>,
    principal: Principal,
    Path(code): Path<String>,
) -> ApiResult<axum::Json<DeviceRequest>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let code = normalized(&code)?;
    Ok(axum::Json(app::deny(&state, &principal, &code).await?))
}
