//! Static credentials: the tenant's bearer tokens (operators', agents', scrapers'),
//! listed without the token (only a public id derived from its hash), minted for
//! scrapers, and revoked one by one or every one of an agent. A revoked token is
//! refused at once on the instance that revoked it and within the lookup cache's
//! TTL (2 s, `app/lookups.rs`) on every other; the console sessions made from it
//! end with it.

use super::AppState;
use super::auth::{
    Principal, SCOPE_ADMIN, SCOPE_METRICS_READ, SCOPE_OPS_READ, SCOPE_OPS_WRITE, generate_token,
    hash_token,
};
use super::extract::{Json, Path};
use super::limits::*;
use crate::access::token_id;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::CredentialRow;
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

/// What a token is, for people: by its agent or its scopes.
fn kind(row: &CredentialRow) -> &'static str {
    let has = |s: &str| row.scopes.iter().any(|x| x == s);
    if row.agent_id.is_some() {
        "agent"
    } else if has(SCOPE_ADMIN) {
        "admin"
    } else if has(SCOPE_OPS_READ) {
        "operator"
    } else {
        "read-only"
    }
}

fn credential(row: CredentialRow) -> Credential {
    Credential {
        approved_by: row.parent_hash.as_deref().map(token_id),
        token_id: token_id(&row.hash),
        kind: kind(&row).to_owned(),
        label: row.label,
        agent_id: row.agent_id,
        agent_name: row.agent_name,
        scopes: row.scopes,
        created_at: to_timestamp(row.created_at),
        revoked_at: row.revoked_at.map(to_timestamp),
    }
}

/// Every token of the tenant, live and revoked, oldest first; never the token.
#[utoipa::path(get, path = "/api/v1/ops/tokens", tag = "ops",
    responses((status = 200, body = Vec<Credential>)))]
async fn list_tokens(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<Credential>>> {
    principal.require(SCOPE_OPS_READ)?;
    let rows = state.store.credentials(principal.tenant_id).await?;
    Ok(axum::Json(rows.into_iter().map(credential).collect()))
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
    let rows = state.store.credentials(principal.tenant_id).await?;
    let Some(row) = rows.iter().find(|r| token_id(&r.hash) == id) else {
        return Err(ApiError::not_found("the token"));
    };
    let note = principal
        .note(format!("token:{id}"))
        .detail(row.label.clone());
    let revoked = state
        .store
        .revoke_credential(principal.tenant_id, &row.hash, &note, state.now())
        .await?;
    // This instance refuses it from the next request; the others within the TTL.
    state.lookups.forget_tokens();
    if revoked > 0 {
        tracing::info!(token_id = %id, label = %row.label, revoked, "token revoked");
    }
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
    let agent = state.store.agent(principal.tenant_id, &agent).await?;
    let note = principal.note(format!("agent:{}", agent.name));
    let revoked = state
        .store
        .revoke_agent_credentials(principal.tenant_id, agent.id, &note, state.now())
        .await?;
    state.lookups.forget_tokens();
    tracing::info!(agent = %agent.name, agent_id = %agent.id, revoked, "agent's tokens revoked");
    Ok(axum::Json(Revoked { revoked }))
}

/// Scopes a minted token may carry: read-only machine access that names no secret.
const MINTABLE_SCOPES: &[&str] = &[SCOPE_METRICS_READ];

/// Mint a token for a machine that only reads, such as a Prometheus scraper
/// (`{"scopes": ["metrics:read"], "label": "prometheus"}`). It acts in the caller's
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
    if req.scopes.is_empty()
        || req
            .scopes
            .iter()
            .any(|s| !MINTABLE_SCOPES.contains(&s.as_str()))
    {
        return Err(ApiError::validation(format!(
            "scopes must be a non-empty list of {MINTABLE_SCOPES:?}; agent tokens come \
             from POST /api/v1/ops/agents"
        ))
        .with("field", "scopes"));
    }
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
    let mut scopes = req.scopes.clone();
    scopes.sort();
    scopes.dedup();
    let token = generate_token("sb_mt_");
    let hash = hash_token(&token);
    let note = principal
        .note(format!("token:{}", token_id(&hash)))
        .detail(format!("{label}: {}", scopes.join(" ")));
    state
        .store
        .insert_token(
            &hash,
            principal.tenant_id,
            &scopes,
            label,
            Some(&note),
            state.now(),
        )
        .await?;
    tracing::info!(label, "read-only token minted");
    Ok(secret_created(TokenCreated {
        token,
        scopes,
        label: label.to_owned(),
    }))
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
    let agent = state.store.agent(principal.tenant_id, &agent).await?;
    let note = principal.note(format!("agent:{}", agent.name));
    let deleted = state
        .store
        .delete_agent(principal.tenant_id, agent.id, &note, state.now())
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent {:?}", agent.name)))?;
    state.lookups.forget_agents();
    state.lookups.forget_tokens();
    tracing::info!(
        agent = %agent.name,
        agent_id = %agent.id,
        revoked = deleted.revoked,
        purged = deleted.purged,
        "agent deleted"
    );
    Ok(axum::Json(AgentDeleted {
        agent_id: agent.id,
        name: agent.name,
        revoked: deleted.revoked,
        purged: deleted.purged,
    }))
}
