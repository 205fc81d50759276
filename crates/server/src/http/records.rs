//! The fenced data plane: `PUT/GET/DELETE /api/v1/memories/{id}/records/{key}` with
//! the `Fencing-Token` of the memory's current lease, `ETag` / `If-Match` versions,
//! subscriptions to `memory_updated` events, and the operator's list of refusals.
//!
//! `GET /api/v1/memories/{id}/records` (also the seed's `/v1/…`) lists the records by
//! pages, in key order, with an opaque cursor: the baseline memory state a reader
//! resyncs from, so it takes no `Fencing-Token` (a reader after a 410 may hold no
//! lease). Agents of the memory's tenant (the only tenant that can lease it: the
//! holder and whoever held it last) and its operators may list it: any principal
//! (a token of neither kind is refused by the extractor, 403), and another tenant
//! gets 404 (I9).

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
        .routes(routes!(list_records))
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

/// The query of a record listing: `?cursor=…&limit=…`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct RecordListQuery {
    /// A previous page's `next_cursor`, unchanged; absent for the first page.
    cursor: Option<String>,
    /// 1..=1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// What a record cursor starts with: the format's version, so a later format can
/// tell its own cursors from these.
const CURSOR_PREFIX: &str = "r1.";

/// The cursor after the record `key`: opaque to clients (base64url of the key).
pub(super) fn record_cursor(key: &str) -> String {
    use base64::Engine;
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key);
    format!("{CURSOR_PREFIX}{key}")
}

/// The key a cursor of [`record_cursor`] holds, or a 400 saying what to send.
pub(super) fn cursor_key(cursor: &str) -> ApiResult<String> {
    use base64::Engine;
    cursor
        .strip_prefix(CURSOR_PREFIX)
        .and_then(|k| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(k)
                .ok()
        })
        .and_then(|k| String::from_utf8(k).ok())
        .filter(|k| key_ok(k).is_ok())
        .ok_or_else(|| {
            ApiError::validation(
                "cursor is not one this server gave out: send a page's next_cursor \
                 unchanged, or leave cursor out to start from the first record",
            )
            .with("field", "cursor")
        })
}

/// A page of the memory's records in key order. A walk that sends each page's
/// `next_cursor` back sees every record present for the whole walk exactly once,
/// whatever is written meanwhile; `next_cursor` is absent on the last page. No
/// `Fencing-Token`: this is the baseline state to resync from.
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}/records", tag = "leases",
    params(("memory_id" = MemoryId, Path), RecordListQuery),
    responses((status = 200, body = MemoryRecordPage), (status = 400, body = Problem),
              (status = 403, body = Problem), (status = 404, body = Problem),
              (status = 422, body = Problem)))]
async fn list_records(
    State(state): State<AppState>,
    principal: Principal,
    Path(memory): Path<MemoryId>,
    Query(q): Query<RecordListQuery>,
) -> ApiResult<axum::Json<MemoryRecordPage>> {
    // Who may: any `Principal`, an agent of the tenant or its operator; the
    // extractor refuses a machine token (`metrics:read`) with 403. The tenant's
    // memories only: the use case's lookup.
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    let after = q.cursor.as_deref().map(cursor_key).transpose()?;
    let (records, more) = app::records(&state, &principal, memory, after.as_deref(), limit).await?;
    let next_cursor = match more {
        true => records.last().map(|r| record_cursor(&r.key)),
        false => None,
    };
    Ok(axum::Json(MemoryRecordPage {
        records,
        next_cursor,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_holds_its_key_and_nothing_else_passes() {
        for key in ["a", "plan/step 2", "ключ", &"k".repeat(MAX_KEY_BYTES)] {
            let cursor = record_cursor(key);
            assert!(cursor.starts_with(CURSOR_PREFIX), "{cursor}");
            assert_eq!(cursor_key(&cursor).expect("a cursor it gave"), key);
        }
        let long = record_cursor(&"k".repeat(MAX_KEY_BYTES + 1));
        for bad in [
            "",
            "r1.",
            "r1.!!!",
            "r2.YQ",
            "YQ",
            "r1.gA", // not UTF-8
            "r1.AQ", // a control character
            long.as_str(),
        ] {
            let e = cursor_key(bad).expect_err(bad);
            assert_eq!(e.problem.status, 400, "{bad}");
        }
    }
}
