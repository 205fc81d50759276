//! Request-signing keys (issue 39): an agent's own (`/api/v1/keys`: the keys of the
//! credential the request is made with) and the operators' view of every agent's
//! keys and the tenant's signature policy (`/api/v1/ops/signatures`). When a
//! request must be signed is `signatures.rs`.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Json, Path};
use crate::app::keys as app;
use crate::error::ApiResult;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_key, list_keys))
        .routes(routes!(revoke_key))
        .routes(routes!(signatures, set_policy))
}

/// Bind a public key (Ed25519, as a JWK) to the credential this request is made
/// with. From then on every request with that credential must be signed with one
/// of its keys (RFC 9421), whatever the tenant's policy: register the first key
/// right after login, and a new one with a request signed by a current key
/// (rotation). 201 for a new key, 200 for one the credential has already; audited.
#[utoipa::path(post, path = "/api/v1/keys", tag = "agent", request_body = RegisterKey,
    responses((status = 201, body = SigningKeyView), (status = 200, body = SigningKeyView),
        (status = 409, body = Problem)))]
async fn register_key(
    State(state): State<AppState>,
    principal: Principal,
    Json(body): Json<RegisterKey>,
) -> ApiResult<(StatusCode, axum::Json<SigningKeyView>)> {
    let (created, key) = app::register(&state, &principal, &body).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(key)))
}

/// The live keys of the credential this request is made with, newest first.
#[utoipa::path(get, path = "/api/v1/keys", tag = "agent",
    responses((status = 200, body = Vec<SigningKeyView>)))]
async fn list_keys(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<SigningKeyView>>> {
    Ok(axum::Json(app::own(&state, &principal).await?))
}

/// Revoke a key of the credential this request is made with (audited). Tokens
/// bound to it are refused from then on; register the next key first.
#[utoipa::path(delete, path = "/api/v1/keys/{jkt}", tag = "agent",
    params(("jkt" = String, Path, description = "the key's RFC 7638 thumbprint (its keyid)")),
    responses((status = 204), (status = 404, body = Problem)))]
async fn revoke_key(
    State(state): State<AppState>,
    principal: Principal,
    Path(jkt): Path<String>,
) -> ApiResult<StatusCode> {
    app::revoke(&state, &principal, &jkt).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The tenant's signature policy and every agent's keys.
#[utoipa::path(get, path = "/api/v1/ops/signatures", tag = "ops",
    responses((status = 200, body = SignatureOverview)))]
async fn signatures(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<SignatureOverview>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(app::overview(&state, &principal).await?))
}

/// Set the tenant's signature policy for agent credentials without a key: `off`,
/// `optional` (the default) or `required`. Audited.
#[utoipa::path(put, path = "/api/v1/ops/signatures", tag = "ops", request_body = SetSignaturePolicy,
    responses((status = 200, body = SignatureOverview), (status = 422, body = Problem)))]
async fn set_policy(
    State(state): State<AppState>,
    principal: Principal,
    Json(body): Json<SetSignaturePolicy>,
) -> ApiResult<axum::Json<SignatureOverview>> {
    principal.require(SCOPE_OPS_WRITE)?;
    Ok(axum::Json(
        app::set_policy(&state, &principal, &body).await?,
    ))
}
