//! Idempotency keys (I8), after draft-ietf-httpapi-idempotency-key-header-06: the
//! use case that runs a piece of work at most once per key.
//!
//! Phase 1 records the key as in flight in its own short transaction; a concurrent
//! duplicate then gets 409 `request_in_progress`. Phase 2 writes the response in the
//! same transaction as the business change, so a replay can never disagree with what
//! was committed. A refusal (a problem below 500) is stored and replayed too; a 5xx
//! (transient) outcome forgets the key so the retry runs. The key is hashed before
//! storage and never logged (I11). Keys are scoped to the tenant and the calling
//! principal.
//!
//! Forgetting can fail: the database that just failed the request may still be
//! down. The in-flight record names its owner, this process ([`Running`]), which
//! runs at most one request per key at a time. So when a retry reaches this process
//! and finds the key in flight under its own name, nothing is running it any more,
//! and the retry takes it over at once instead of answering 409 until the lock
//! runs out. The same holds for a request whose client went away mid-way. A retry
//! that reaches another instance waits for the lock (`LOCK_MS`), or until the
//! owner's instance has been silent for 10 s (it died: the store's `instances`).
//!
//! [`Running`]: super::running::Running

use super::AppState;
use super::running::Busy;
use crate::access::Principal;
use crate::error::{ApiError, ApiResult};
use crate::store::IdemBegin;
use sha2::{Digest, Sha256};
use std::future::Future;
use switchboard_proto::ErrorCode;

pub use crate::store::{IdemKey, StoredResponse};

/// An in-flight record older than this was abandoned by a crashed request.
const LOCK_MS: i64 = 60_000;

/// What a run of a keyed request came to.
pub enum Once<T> {
    /// The work ran now, with this answer.
    Ran(T),
    /// It ran before with the same request: its stored answer.
    Replayed(StoredResponse),
}

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

/// The stored identity of a request's `key`: tenant, principal, key hash and the
/// fingerprint of the request (`POST`, its path and its body).
pub fn key_of(
    state: &AppState,
    principal: &Principal,
    key: &str,
    path: &str,
    body: &[u8],
) -> IdemKey {
    let mut fingerprint = Sha256::new();
    fingerprint.update(b"POST ");
    fingerprint.update(path.as_bytes());
    fingerprint.update(b"\n");
    fingerprint.update(body);
    IdemKey {
        tenant_id: principal.tenant_id,
        principal: principal.key_scope(),
        key_hash: Sha256::digest(key.as_bytes()).to_vec(),
        fingerprint: fingerprint.finalize().to_vec(),
        owner: state.running.owner().to_vec(),
    }
}

/// Runs `work` at most once per `key`; an identical retry gets the stored answer.
/// `momentary`: problem statuses that hold only for the moment (a lease held by
/// someone else): not stored, and the key is forgotten, so a retry asks again.
pub async fn once<T, F, Fut>(
    state: &AppState,
    key: IdemKey,
    momentary: &[u16],
    work: F,
) -> ApiResult<Once<T>>
where
    F: FnOnce(IdemKey) -> Fut,
    Fut: Future<Output = ApiResult<T>>,
{
    // Every keyed request, whatever it comes to: the whole of the cache hits below.
    state
        .metrics
        .tenant(key.tenant_id)
        .idempotent_requests
        .inc();
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
        IdemBegin::Replay(stored) => {
            state
                .metrics
                .tenant(key.tenant_id)
                .idempotency_cache_hits
                .inc();
            return Ok(Once::Replayed(stored));
        }
        IdemBegin::Mismatch => return Err(reused()),
        IdemBegin::InFlight => return Err(in_progress()),
    }
    if let Some(hook) = &state.config.hooks.after_key_recorded {
        hook().await;
    }
    match work(key.clone()).await {
        Ok(value) => Ok(Once::Ran(value)),
        // Another attempt took the key over (this one's lock ran out) and rolled this
        // one back: the key is that attempt's now, to complete or to forget.
        Err(e) if e.code() == Some(ErrorCode::RequestInProgress) => Err(e),
        Err(e) if e.problem.status < 500 && !momentary.contains(&e.problem.status) => {
            refused(state, &key, &e).await;
            Err(e)
        }
        Err(e) => {
            let _ = state.store.idem_abort(&key).await;
            Err(e)
        }
    }
}

/// Stores a refusal as the key's answer (or forgets the key when that fails, so a
/// retry runs again rather than finding it in flight).
pub async fn refused(state: &AppState, key: &IdemKey, e: &ApiError) {
    let stored = StoredResponse {
        status: e.problem.status,
        body: serde_json::to_string(&e.problem).unwrap_or_default(),
    };
    if let Err(store_err) = state.store.idem_complete(key, &stored).await {
        tracing::warn!(error = %store_err, "could not store the outcome of an idempotent request");
        let _ = state.store.idem_abort(key).await;
    }
}
