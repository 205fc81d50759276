//! The fenced data plane: `PUT/GET/DELETE /api/v1/memories/{id}/records/{key}` with
//! the `Fencing-Token` of the memory's current lease, `ETag` / `If-Match` versions,
//! subscriptions to `memory_updated` events, and the operator's list of refusals.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ};
use super::extract::{Path, Query, RawJson, parse_json_value};
use super::leases::may_lease;
use super::limits::*;
use crate::app::memories::{self as app, RecordDone, RecordOp};
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Longest record key, in bytes.
const MAX_KEY_BYTES: usize = 200;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_record, put_record, delete_record))
        .routes(routes!(subscribe, unsubscribe))
        .routes(routes!(fencing_rejections))
}

pub(super) fn fencing_token(headers: &HeaderMap) -> ApiResult<u64> {
    let raw = headers.get(FENCING_TOKEN).ok_or_else(|| {
        ApiError::validation(
            "record calls need a Fencing-Token header: the fencing_token of your current lease on this memory",
        )
    })?;
    raw.to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            ApiError::validation(
                "Fencing-Token must be a whole number (your lease's fencing_token)",
            )
        })
}

/// The version in an `If-Match` header: `"v3"` (also `v3`, `W/"v3"`).
pub(super) fn if_match(headers: &HeaderMap) -> ApiResult<Option<u64>> {
    let Some(raw) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let v = raw.to_str().unwrap_or_default().trim();
    let v = v.trim_start_matches("W/").trim_matches('"');
    v.strip_prefix('v')
        .and_then(|n| n.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::validation(format!(
                "If-Match must be the record's ETag, like \"v3\", not {v:?}"
            ))
        })
}

pub(super) fn key_ok(key: &str) -> ApiResult<()> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || key.chars().any(char::is_control) {
        return Err(ApiError::validation(format!(
            "a record key is 1 to {MAX_KEY_BYTES} bytes without control characters"
        )));
    }
    Ok(())
}

/// 200 (read, updated) or 201 (created) with the record and its `ETag`; 204 for a
/// delete.
fn respond(done: RecordDone) -> Response {
    let (status, record) = match done {
        RecordDone::Read(r) => (StatusCode::OK, r),
        RecordDone::Written { record, created } => (
            if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            },
            record,
        ),
        RecordDone::Deleted => return StatusCode::NO_CONTENT.into_response(),
    };
    let mut resp = (status, axum::Json(&record)).into_response();
    if let Ok(v) = HeaderValue::from_str(&MemoryRecord::etag(record.version)) {
        resp.headers_mut().insert(header::ETAG, v);
    }
    resp
}

async fn call(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
    memory: MemoryId,
    key: &str,
    op: RecordOp,
) -> ApiResult<RecordDone> {
    may_lease(principal)?;
    key_ok(key)?;
    let token = fencing_token(headers)?;
    app::record(state, principal, memory, key, token, op).await
}

/// Read a record (with the current fencing token). The `ETag` is its version.
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}/records/{key}", tag = "leases",
    params(("memory_id" = MemoryId, Path), ("key" = String, Path),
           ("Fencing-Token" = u64, Header, description = "The fencing_token of your current lease")),
    responses((status = 200, body = MemoryRecord), (status = 404, body = Problem),
              (status = 409, body = Problem), (status = 410, body = Problem)))]
async fn get_record(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Path((memory, key)): Path<(MemoryId, String)>,
) -> ApiResult<Response> {
    call(&state, &principal, &headers, memory, &key, RecordOp::Get)
        .await
        .map(respond)
}

/// Write a record: 201 when new, 200 when updated (needs `If-Match` with its ETag;
/// `If-None-Match: *` creates only). 409 `stale_fence` for a token that is not the
/// memory's current one; each refusal is recorded.
#[utoipa::path(put, path = "/api/v1/memories/{memory_id}/records/{key}", tag = "leases",
    params(("memory_id" = MemoryId, Path), ("key" = String, Path),
           ("Fencing-Token" = u64, Header, description = "The fencing_token of your current lease")),
    request_body = serde_json::Value,
    responses((status = 201, body = MemoryRecord), (status = 200, body = MemoryRecord),
              (status = 409, body = Problem), (status = 410, body = Problem),
              (status = 412, body = Problem), (status = 428, body = Problem)))]
async fn put_record(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Path((memory, key)): Path<(MemoryId, String)>,
    RawJson(body): RawJson,
) -> ApiResult<Response> {
    // Any JSON value: `parse_json`'s guard against arrays is for request objects.
    let value: serde_json::Value = parse_json_value(&body)?;
    let op = RecordOp::Put {
        value: value.to_string(),
        if_match: if_match(&headers)?,
        if_none_match: headers
            .get(header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == b"*"),
    };
    call(&state, &principal, &headers, memory, &key, op)
        .await
        .map(respond)
}

/// Delete a record (`If-Match` optional): 204.
#[utoipa::path(delete, path = "/api/v1/memories/{memory_id}/records/{key}", tag = "leases",
    params(("memory_id" = MemoryId, Path), ("key" = String, Path),
           ("Fencing-Token" = u64, Header, description = "The fencing_token of your current lease")),
    responses((status = 204), (status = 404, body = Problem), (status = 409, body = Problem), (status = 412, body = Problem)))]
async fn delete_record(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Path((memory, key)): Path<(MemoryId, String)>,
) -> ApiResult<Response> {
    let op = RecordOp::Delete {
        if_match: if_match(&headers)?,
    };
    call(&state, &principal, &headers, memory, &key, op)
        .await
        .map(respond)
}

async fn set_subscription(
    state: &AppState,
    principal: &Principal,
    memory: MemoryId,
    agent: &str,
    on: bool,
) -> ApiResult<Response> {
    app::subscribe(state, principal, memory, agent, on).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Subscribe an agent to a memory: each record change puts a `memory_updated` event
/// in its inbox, in the same transaction as the change.
#[utoipa::path(put, path = "/api/v1/memories/{memory_id}/subscribers/{agent}", tag = "leases",
    params(("memory_id" = MemoryId, Path), ("agent" = String, Path)),
    responses((status = 204), (status = 404, body = Problem)))]
async fn subscribe(
    State(state): State<AppState>,
    principal: Principal,
    Path((memory, agent)): Path<(MemoryId, String)>,
) -> ApiResult<Response> {
    set_subscription(&state, &principal, memory, &agent, true).await
}

/// Unsubscribe an agent from a memory.
#[utoipa::path(delete, path = "/api/v1/memories/{memory_id}/subscribers/{agent}", tag = "leases",
    params(("memory_id" = MemoryId, Path), ("agent" = String, Path)),
    responses((status = 204), (status = 404, body = Problem)))]
async fn unsubscribe(
    State(state): State<AppState>,
    principal: Principal,
    Path((memory, agent)): Path<(MemoryId, String)>,
) -> ApiResult<Response> {
    set_subscription(&state, &principal, memory, &agent, false).await
}

/// Data-plane calls refused by the fence, newest first.
#[utoipa::path(get, path = "/api/v1/ops/fencing-rejections", tag = "ops", params(PageLimit),
    responses((status = 200, body = FencingRejectionPage)))]
async fn fencing_rejections(
    State(state): State<AppState>,
    principal: Principal,
    Query(q): Query<PageLimit>,
) -> ApiResult<axum::Json<FencingRejectionPage>> {
    principal.require(SCOPE_OPS_READ)?;
    let limit = q.get()?;
    Ok(axum::Json(FencingRejectionPage {
        rejections: app::fencing_rejections(&state, principal.tenant_id, limit).await?,
    }))
}
