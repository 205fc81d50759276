//! Memory instances (`/api/v1/memories`, also at the seed's `/v1/memories`): made by
//! the server (UUIDv7), branched with their parent and its token, read with their
//! lineage. The current fencing token is shown to operators only (I7).

use super::AppState;
use super::auth::Principal;
use super::extract::{Json, Path};
use super::leases::{may_lease, note};
use crate::app::memories as app;
use crate::error::ApiResult;
use axum::extract::State;
use axum::http::StatusCode;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_memory))
        .routes(routes!(branch_memory))
        .routes(routes!(get_memory))
        .routes(routes!(lineage))
}

/// Register a memory instance: the server mints its UUIDv7 identity, or takes the
/// UUIDv7 the client holds (`memory_instance_id`). 201 for a new memory; 200 for a
/// retry of the same id in the same tenant; 409 `conflict` for an id registered
/// elsewhere (the same answer whichever tenant has it); 422 for an id that is not a
/// UUIDv7.
#[utoipa::path(post, path = "/api/v1/memories", tag = "leases", request_body = RegisterMemory,
    responses((status = 201, body = Memory), (status = 200, body = Memory, description = "Registered already"),
              (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn register_memory(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<RegisterMemory>,
) -> ApiResult<(StatusCode, axum::Json<Memory>)> {
    may_lease(&principal)?;
    let label = note("label", req.label)?;
    let (memory, new) =
        app::register(&state, &principal, req.memory_instance_id, label.as_deref()).await?;
    let status = if new {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, axum::Json(memory)))
}

/// Branch a memory: a new identity that records its parent and the parent's fencing
/// token at the branch.
#[utoipa::path(post, path = "/api/v1/memories/branch", tag = "leases", request_body = BranchMemory,
    responses((status = 201, body = Memory), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn branch_memory(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<BranchMemory>,
) -> ApiResult<(StatusCode, axum::Json<Memory>)> {
    may_lease(&principal)?;
    let label = note("label", req.label)?;
    let memory = app::branch(
        &state,
        &principal,
        req.parent_memory_instance_id,
        req.parent_fencing_token,
        label.as_deref(),
    )
    .await?;
    Ok((StatusCode::CREATED, axum::Json(memory)))
}

/// One memory instance with its current fencing token.
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}", tag = "leases",
    params(("memory_id" = MemoryId, Path)),
    responses((status = 200, body = Memory), (status = 404, body = Problem)))]
async fn get_memory(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<MemoryId>,
) -> ApiResult<axum::Json<Memory>> {
    Ok(axum::Json(app::get(&state, &principal, id).await?))
}

/// A memory's ancestors (parent first) and descendants (breadth first).
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}/lineage", tag = "leases",
    params(("memory_id" = MemoryId, Path)),
    responses((status = 200, body = Lineage), (status = 404, body = Problem)))]
async fn lineage(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<MemoryId>,
) -> ApiResult<axum::Json<Lineage>> {
    Ok(axum::Json(app::lineage(&state, &principal, id).await?))
}
