//! Client reports: what an agent's SDK says about its own side (the local outbox
//! and the inbox consumer), so operators see client-side poison and connection
//! modes next to the server's view. The latest report per agent is kept.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ};
use super::extract::{Json, Path};
use crate::app::clients as app;
use crate::app::inbox::inbox_agent;
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_report))
        .routes(routes!(list_reports))
}

/// Replaces the agent's client report (counts, modes and poison reasons; no
/// payloads). The SDK sends it at most every 10 s.
#[utoipa::path(put, path = "/api/v1/agents/{agent}/client-report", tag = "agent",
    params(("agent" = String, Path, description = "Agent id or name")),
    request_body = ClientReport,
    responses((status = 204), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn put_report(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    Json(report): Json<ClientReport>,
) -> ApiResult<StatusCode> {
    let agent = inbox_agent(&state, &principal, &agent).await?;
    report.check().map_err(ApiError::unprocessable)?;
    app::put_report(&state, &agent, &report).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every agent's latest client report, by agent name.
#[utoipa::path(get, path = "/api/v1/ops/client-reports", tag = "ops",
    responses((status = 200, body = Vec<ReceivedReport>)))]
async fn list_reports(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<Vec<ReceivedReport>>> {
    principal.require(SCOPE_OPS_READ)?;
    let reports = app::reports(&state, principal.tenant_id).await?;
    Ok(axum::Json(reports))
}
