//! Idempotency keys (I8) on the wire: the `Idempotency-Key` header read, and a
//! stored answer replayed with `Idempotent-Replayed: true`. The use case itself
//! (phase 1 and 2, takeover, what is stored) is `app::idempotency`.

use super::AppState;
use super::auth::Principal;
use crate::app::idempotency::{self as app, IdemKey, Once, StoredResponse};
use crate::error::{ApiError, ApiResult};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::future::Future;
use switchboard_proto::{ErrorCode, PROBLEM_JSON};

pub(super) const HEADER: &str = "idempotency-key";
pub(super) const REPLAYED: &str = "idempotent-replayed";

/// Reads the key: an RFC 8941 sf-string (`"..."`); a bare token is accepted too, as
/// most APIs do. 1..=255 visible ASCII characters.
pub(super) fn read_key(headers: &HeaderMap) -> ApiResult<String> {
    let raw = headers
        .get(HEADER)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::IdempotencyKeyRequired,
                "this request needs an Idempotency-Key header, e.g. Idempotency-Key: \"<uuid>\"; \
                 reuse the same key when you retry the same request",
            )
        })?
        .to_str()
        .map_err(|_| ApiError::validation("Idempotency-Key must be visible ASCII"))?
        .trim();
    let key = raw
        .strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .unwrap_or(raw);
    let ok = !key.is_empty()
        && key.len() <= 255
        && key.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'"');
    if ok {
        Ok(key.to_owned())
    } else {
        Err(ApiError::validation(
            "Idempotency-Key must be 1 to 255 visible ASCII characters (a quoted sf-string); use a UUID",
        ))
    }
}

/// How a resource's answers are kept and replayed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    /// The status of a replayed success; `None`: the stored one (201).
    pub(super) replay_success: Option<StatusCode>,
    /// Refusals that hold only for the moment (a lease held by someone else): not
    /// stored, and the key is forgotten, so a retry with it asks again.
    pub(super) momentary: &'static [u16],
}

/// Every outcome below 500 is stored and replayed as it was.
pub(super) const REPLAY_AS_STORED: Policy = Policy {
    replay_success: None,
    momentary: &[],
};

/// A room send: a sender that is no member gets the room's 404 (as a read does),
/// which holds only until an operator adds it, so it is not stored.
pub(super) const ROOM_SEND: Policy = Policy {
    replay_success: None,
    momentary: &[404],
};

/// The stored identity of a request's key: tenant, principal, key hash and body
/// fingerprint. 400 without a valid `Idempotency-Key`.
pub(super) fn key_of(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
    path: &str,
    body: &[u8],
) -> ApiResult<IdemKey> {
    let key = read_key(headers)?;
    Ok(app::key_of(state, principal, &key, path, body))
}

/// Runs `work` at most once per key; replays its stored response on identical retries.
pub(super) async fn run<T, F, Fut>(
    state: &AppState,
    principal: &Principal,
    headers: &HeaderMap,
    path: &str,
    body: &[u8],
    policy: Policy,
    work: F,
) -> ApiResult<Response>
where
    T: Serialize,
    F: FnOnce(IdemKey) -> Fut,
    Fut: Future<Output = ApiResult<T>>,
{
    let key = key_of(state, principal, headers, path, body)?;
    match app::once(state, key, policy.momentary, work).await? {
        Once::Ran(value) => Ok((StatusCode::CREATED, axum::Json(value)).into_response()),
        Once::Replayed(mut stored) => {
            if let Some(status) = policy.replay_success.filter(|_| stored.status < 300) {
                stored.status = status.as_u16();
            }
            Ok(replay(stored))
        }
    }
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let content_type = if status.is_success() {
        "application/json"
    } else {
        PROBLEM_JSON
    };
    let mut resp = (status, stored.body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}
