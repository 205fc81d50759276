//! Static credentials: the tenant's bearer tokens (operators', agents', scrapers'),
//! listed without the token (only a public id derived from its hash), minted for
//! scrapers, and revoked one by one or every one of an agent. A revoked token is
//! refused at once on the instance that revoked it and within the lookup cache's
//! TTL (2 s, `app/lookups.rs`) on every other; the console sessions made from it
//! end with it.

use super::AppState;
use super::auth::{Principal, SCOPE_METRICS_READ, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Json, Path};
use super::limits::*;
use crate::app::credentials as app;
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_token, list_tokens))
        .routes(routes!(revoke_token))
        .routes(routes!(revoke_agent))
        .routes(routes!(delete_agent))
}

/// Every token of the tenant, live and revoked, oldest first; never the token.
#[utoipa::path(get, path = "/api/v1/ops/tokens", tag = "ops",
    responses((status = 200, body = Vec<Credential>)))]
async fn list_tokens(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<Credential>>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(app::list(&state, principal.tenant_id).await?))
}

/// Revoke one token of the tenant by its id (from `GET /api/v1/ops/tokens`).
/// Revoking a revoked token changes nothing (`revoked: 0`).
#[utoipa::path(post, path = "/api/v1/ops/tokens/{token_id}/revoke", tag = "ops",
    params(("token_id" = String, Path, description = "16 hex digits, from GET /api/v1/ops/tokens")),
    responses((status = 200, body = Revoked), (status = 404, body = Problem)))]
async fn revoke_token(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<Revoked>> {
    principal.require(SCOPE_OPS_WRITE)?;
    if id.len() != 16
        || !id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(ApiError::validation(
            "token_id is the 16 lowercase hex digits GET /api/v1/ops/tokens shows for the token",
        )
        .with("field", "token_id"));
    }
    let revoked = app::revoke(&state, &principal, &id).await?;
    Ok(axum::Json(Revoked { revoked }))
}

/// Revoke every live token of an agent (its static tokens; it can log in again only
/// with a new one). The agent, its inbox and its work stay.
#[utoipa::path(post, path = "/api/v1/ops/agents/{agent}/revoke", tag = "ops",
    params(("agent" = String, Path, description = "agent id or name")),
    responses((status = 200, body = Revoked), (status = 404, body = Problem)))]
async fn revoke_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<Revoked>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let revoked = app::revoke_agent(&state, &principal, &agent).await?;
    Ok(axum::Json(Revoked { revoked }))
}

/// Scopes a minted token may carry: read-only machine access that names no secret.
const MINTABLE_SCOPES: &[&str] = &[SCOPE_METRICS_READ];

/// Mint a token that only reads: for a machine, such as a Prometheus scraper
/// (`{"scopes": ["metrics:read"], "label": "prometheus"}`), or an agent's
/// least-privilege read token (`{"scopes": ["agent:build-bot:read"], "label":
/// "dashboard"}`: poll, subscribe, snapshot, its rooms and memory records; stored as
/// `agent:{agent_id}:read`). It acts in the caller's
/// tenant and can do nothing but what its scopes say. The token is in the answer,
/// once; only a hash is kept. No Idempotency-Key: a replay would have to store the
/// token itself (I11); a retry mints another, and an unused token grants only reads.
#[utoipa::path(post, path = "/api/v1/ops/tokens", tag = "ops", request_body = CreateToken,
    responses((status = 201, body = TokenCreated), (status = 403, body = Problem), (status = 422, body = Problem)))]
async fn create_token(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<CreateToken>,
) -> ApiResult<SecretCreated<TokenCreated>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let reader = match req.scopes.as_slice() {
        [one] => one
            .strip_prefix("agent:")
            .and_then(|s| s.strip_suffix(":read"))
            .filter(|agent| !agent.is_empty()),
        _ => None,
    };
    let minted = match reader {
        Some(agent) => app::Minted::AgentReader(agent.to_owned()),
        None if !req.scopes.is_empty()
            && req
                .scopes
                .iter()
                .all(|s| MINTABLE_SCOPES.contains(&s.as_str())) =>
        {
            app::Minted::Machine(req.scopes.clone())
        }
        None => {
            return Err(ApiError::validation(format!(
                "scopes must be a non-empty list of {MINTABLE_SCOPES:?}, or the one scope \
                 \"agent:<agent id or name>:read\" (an agent's read-only token); agent \
                 tokens come from POST /api/v1/ops/agents"
            ))
            .with("field", "scopes"));
        }
    };
    let label = req.label.trim();
    if label.is_empty()
        || label.chars().count() > MAX_NAME_CHARS
        || label.chars().any(char::is_control)
    {
        return Err(ApiError::validation(format!(
            "label must be 1 to {MAX_NAME_CHARS} printable characters saying what the token is \
             for, e.g. \"prometheus\""
        ))
        .with("field", "label"));
    }
    let created = app::mint(&state, &principal, minted, label).await?;
    Ok(secret_created(created))
}

/// A 201 whose body holds a secret shown once (a token): no cache may keep it.
pub(super) type SecretCreated<T> = (
    StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    axum::Json<T>,
);

pub(super) fn secret_created<T>(body: T) -> SecretCreated<T> {
    (
        StatusCode::CREATED,
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        axum::Json(body),
    )
}

/// Delete an agent: its credentials are revoked, its open events purged, it leaves
/// its rooms and memory subscriptions, its webhook callback goes, and its name is
/// free for a new agent. Sends to it answer 404 from then on; nothing is delivered
/// to it after this answer. Its history (completed and purged events, audit) stays.
#[utoipa::path(delete, path = "/api/v1/ops/agents/{agent}", tag = "ops",
    params(("agent" = String, Path, description = "agent id or name")),
    responses((status = 200, body = AgentDeleted), (status = 404, body = Problem)))]
async fn delete_agent(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
) -> ApiResult<axum::Json<AgentDeleted>> {
    principal.require(SCOPE_OPS_WRITE)?;
    Ok(axum::Json(
        app::delete_agent(&state, &principal, &agent).await?,
    ))
}
