//! Idempotency keys (I8), after draft-ietf-httpapi-idempotency-key-header-06.
//!
//! Phase 1 records the key as in flight in its own short transaction; a concurrent
//! duplicate then gets 409 `request_in_progress`. Phase 2 writes the response in the
//! same transaction as the business change, so a replay can never disagree with what
//! was committed. A 4xx outcome is stored and replayed too; a 5xx (transient) outcome
//! forgets the key so the retry runs. The key is hashed before storage and never
//! logged (I11). Keys are scoped to the tenant and the calling principal.
//!
//! Forgetting can fail: the database that just failed the request may still be
//! down. The in-flight record names its owner, this process ([`Running`]), which
//! runs at most one request per key at a time. So when a retry reaches this process
//! and finds the key in flight under its own name, nothing is running it any more,
//! and the retry takes it over at once instead of answering 409 until the lock
//! runs out. The same holds for a request whose client went away mid-way. A retry
//! that reaches another instance waits for the lock (`LOCK_MS`), or until the
//! owner's instance has been silent for 10 s (it died: `store/engine/instances.rs`).

use super::AppState;
use super::auth::Principal;
use crate::app::running::Busy;
use crate::error::{ApiError, ApiResult};
use crate::store::{IdemBegin, IdemKey, StoredResponse};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::future::Future;
use switchboard_proto::{ErrorCode, PROBLEM_JSON};

pub(super) const HEADER: &str = "idempotency-key";
pub(super) const REPLAYED: &str = "idempotent-replayed";
/// An in-flight record older than this was abandoned by a crashed request.
const LOCK_MS: i64 = 60_000;

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

fn reused() -> ApiError {
    ApiError::new(
        ErrorCode::IdempotencyKeyReused,
        "this Idempotency-Key was already used with a different request; use a new key \
         for a new request",
    )
}

fn in_progress() -> ApiError {
    let mut e = ApiError::new(
        ErrorCode::RequestInProgress,
        "the first request with this Idempotency-Key is still running; retry the same \
         request shortly to get its result",
    );
    e.retry_after = Some(1);
    e
}

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
    let mut fingerprint = Sha256::new();
    fingerprint.update(b"POST ");
    fingerprint.update(path.as_bytes());
    fingerprint.update(b"\n");
    fingerprint.update(body);
    let key = IdemKey {
        tenant_id: principal.tenant_id,
        principal: principal.key_scope(),
        key_hash: Sha256::digest(key.as_bytes()).to_vec(),
        fingerprint: fingerprint.finalize().to_vec(),
        owner: state.running.owner().to_vec(),
    };
    Ok(key)
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
    let _running = state.running.enter(&key).map_err(|busy| match busy {
        Busy::SameRequest => in_progress(),
        Busy::OtherRequest => reused(),
    })?;
    let ttl = state.config.idempotency_ttl.as_millis() as i64;
    match state
        .store
        .idem_begin(&key, state.now(), LOCK_MS, ttl)
        .await?
    {
        IdemBegin::Fresh => {}
        IdemBegin::Replay(mut stored) => {
            state
                .metrics
                .tenant(principal.tenant_id)
                .idempotency_cache_hits
                .inc();
            if let Some(status) = policy.replay_success.filter(|_| stored.status < 300) {
                stored.status = status.as_u16();
            }
            return Ok(replay(stored));
        }
        IdemBegin::Mismatch => return Err(reused()),
        IdemBegin::InFlight => return Err(in_progress()),
    }
    if let Some(hook) = &state.config.hooks.after_key_recorded {
        hook().await;
    }
    match work(key.clone()).await {
        Ok(value) => Ok((StatusCode::CREATED, axum::Json(value)).into_response()),
        // Another attempt took the key over (this one's lock ran out) and rolled this
        // one back: the key is that attempt's now, to complete or to forget.
        Err(e) if e.code() == Some(ErrorCode::RequestInProgress) => Err(e),
        Err(e) if e.problem.status < 500 && !policy.momentary.contains(&e.problem.status) => {
            let stored = StoredResponse {
                status: e.problem.status,
                body: serde_json::to_string(&e.problem).unwrap_or_default(),
            };
            if let Err(store_err) = state.store.idem_complete(&key, &stored).await {
                tracing::warn!(error = %store_err, "could not store the outcome of an idempotent request");
                let _ = state.store.idem_abort(&key).await;
            }
            Err(e)
        }
        Err(e) => {
            let _ = state.store.idem_abort(&key).await;
            Err(e)
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
