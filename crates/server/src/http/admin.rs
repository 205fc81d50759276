//! The deployment admin's API: tenants. Only a token with the `admin` scope (the
//! one `switchboard serve` writes) may use it; every other token gets 403. Each
//! tenant is a world of its own: its operators, agents, events, leases, webhooks,
//! jobs and metrics series are invisible to every other tenant's tokens (I9).

use super::AppState;
use super::auth::{Principal, SCOPE_ADMIN};
use super::credentials::{SecretCreated, secret_created};
use super::extract::Json;
use super::limits::name;
use crate::app::tenants as app;
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use switchboard_proto::{CreateTenant, ErrorCode, Problem, TenantCreated, TenantSummary};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_tenant, list_tenants))
}

/// Create a tenant. The answer holds the token of its first operator, once; only a
/// hash is kept. No Idempotency-Key: a replay would have to store the token (I11),
/// so a retry after a lost answer gets 409 `conflict` for the name it took.
#[utoipa::path(post, path = "/api/v1/admin/tenants", tag = "admin", request_body = CreateTenant,
    responses((status = 201, body = TenantCreated), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<CreateTenant>,
) -> ApiResult<SecretCreated<TenantCreated>> {
    require_admin(&principal)?;
    name("name", &req.name)?;
    Ok(secret_created(
        app::create(&state, &principal, &req.name).await?,
    ))
}

/// Every tenant of the deployment with its number of agents, by name.
#[utoipa::path(get, path = "/api/v1/admin/tenants", tag = "admin",
    responses((status = 200, body = Vec<TenantSummary>)))]
async fn list_tenants(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<TenantSummary>>> {
    require_admin(&principal)?;
    Ok(axum::Json(app::list(&state).await?))
}

/// Only the deployment admin; the problem says whose token that is.
fn require_admin(principal: &Principal) -> ApiResult<()> {
    if principal.has(SCOPE_ADMIN) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::Forbidden,
        "tenants are the deployment admin's: use the operator token `switchboard serve` \
         wrote (it carries the \"admin\" scope); a tenant's own operator token does not",
    ))
}
