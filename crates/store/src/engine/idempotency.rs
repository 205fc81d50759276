//! Idempotency keys (I8), once for every backend.
//!
//! Phase 1 ([`begin`]) records a key as in flight in its own short transaction
//! (on SQLite, committed with the writer's next group, usually the business
//! change's: [`Driver::commit_later`](super::Driver::commit_later)).
//! Insert first: of two requests with the same key (on any instance), exactly one
//! inserts, and the other waits on the row and then reads it, locked. A key that
//! vanished in between (a failed attempt's release) is free again and phase 1 starts
//! over. Phase 2 ([`finish`]) stores the response in the business change's own
//! transaction, only while this attempt still owns the in-flight key.

use super::area::store_area;
use super::instances::{InstanceStatements, owner_dead};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;

/// An idempotency record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredKey {
    pub(crate) fingerprint: Vec<u8>,
    /// `in_flight` or `done`.
    pub(crate) state: String,
    pub(crate) status_code: Option<i64>,
    pub(crate) response: Option<String>,
    pub(crate) locked_until: Millis,
    pub(crate) expires_at: Millis,
    pub(crate) owner: Option<Vec<u8>>,
}

impl StoredKey {
    /// Whether the request that holds this in-flight key is gone, so `key`'s request
    /// may take it over: its lock ran out, or it was this very process's
    /// (`key.owner`), which runs one request per key at a time and so is not running
    /// it any more. That one failed and could not release the key, e.g. because the
    /// database was unreachable. (An owner whose instance stopped beating is gone
    /// too; phase 1 asks the `instances` table about that, see [`begin_once`].)
    fn abandoned(&self, key: &IdemKey, now: Millis) -> bool {
        self.owner.as_ref() == Some(&key.owner) || self.locked_until <= now
    }

    /// The stored response of a `done` key.
    fn replay(&self) -> StoreResult<StoredResponse> {
        match (self.status_code, &self.response) {
            (Some(status), Some(body)) => Ok(StoredResponse {
                status: status as u16,
                body: body.clone(),
            }),
            _ => Err(StoreError::Database(sqlx::Error::Decode(
                "a done idempotency key has no stored response".into(),
            ))),
        }
    }
}

/// What phase 1 does with a key it found.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// Expired (retention has not removed it yet): the key is new again.
    Expired,
    /// In flight under a request that is gone: this one takes it over.
    Abandoned,
    /// Answered as it is.
    Answer(IdemBegin),
}

fn found(row: &StoredKey, key: &IdemKey, now: Millis) -> StoreResult<Found> {
    Ok(if row.expires_at <= now {
        Found::Expired
    } else if row.fingerprint != key.fingerprint {
        Found::Answer(IdemBegin::Mismatch)
    } else if row.state == "done" {
        Found::Answer(IdemBegin::Replay(row.replay()?))
    } else if !row.abandoned(key, now) {
        Found::Answer(IdemBegin::InFlight)
    } else {
        Found::Abandoned
    })
}

/// When a request takes its key: `now`, the key locked to it for `lock_ms` and
/// kept for `ttl_ms` (phase 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyTerms {
    pub(crate) now: Millis,
    pub(crate) lock_ms: Millis,
    pub(crate) ttl_ms: Millis,
}

/// The statements of idempotency keys (`store/statements/idempotency.rs`), each in
/// the caller's transaction. A key is `(tenant_id, principal, key_hash)`.
#[async_trait]
pub(crate) trait IdemStatements: InstanceStatements {
    /// Inserts `key` in flight under `key.owner`, locked until `now + lock_ms`,
    /// unless the key exists; whether it was inserted. A concurrent insert of the
    /// same key waits for the other transaction to end.
    async fn insert_key(
        &self,
        tx: &mut Self::Tx,
        key: &IdemKey,
        terms: KeyTerms,
    ) -> StoreResult<bool>;
    /// The key's record, its row locked until the transaction ends.
    async fn lock_key(&self, tx: &mut Self::Tx, key: &IdemKey) -> StoreResult<Option<StoredKey>>;
    /// Makes an expired record new: `key`'s fingerprint, in flight under its owner.
    async fn renew_key(&self, tx: &mut Self::Tx, key: &IdemKey, terms: KeyTerms)
    -> StoreResult<()>;
    /// Gives the in-flight record to `key.owner`, locked until `locked_until`.
    async fn take_over_key(
        &self,
        tx: &mut Self::Tx,
        key: &IdemKey,
        locked_until: Millis,
    ) -> StoreResult<()>;
    /// Stores `response` and marks the key done, only while it is in flight under
    /// `key.owner` with `key`'s fingerprint; whether it did.
    async fn store_response(
        &self,
        tx: &mut Self::Tx,
        key: &IdemKey,
        response: &StoredResponse,
    ) -> StoreResult<bool>;
    /// Deletes the key while it is in flight under `key.owner`.
    async fn forget_key(&self, tx: &mut Self::Tx, key: &IdemKey) -> StoreResult<()>;
    /// Deletes every in-flight key; how many.
    async fn forget_in_flight_keys(&self, tx: &mut Self::Tx) -> StoreResult<u64>;

    /// Records `key` as in flight if it is new; whether it was. Portable:
    /// [`insert_key`](Self::insert_key), an insert that leaves an existing row
    /// alone. MySQL: there a duplicate insert leaves a *shared* lock on the row, and
    /// two requests racing with one key would each hold one and then both ask for
    /// the exclusive lock (a deadlock); so an upsert that changes nothing on a
    /// duplicate takes the row's exclusive lock at once (as `lock_name` does for
    /// name fences), and racing requests queue on it. MySQL cannot tell an insert
    /// from a duplicate there (`CLIENT_FOUND_ROWS`), so it always answers "not
    /// new": the engine then reads the locked row, and a row this very attempt made
    /// (its owner, in flight) is taken as its own.
    async fn claim_key(
        &self,
        tx: &mut Self::Tx,
        key: &IdemKey,
        terms: KeyTerms,
    ) -> StoreResult<bool>;
}

/// One attempt of phase 1; `None`: the key was forgotten between the insert and
/// the read, and is free again.
async fn begin_once<D: IdemStatements>(
    d: &D,
    key: &IdemKey,
    terms: KeyTerms,
) -> StoreResult<Option<IdemBegin>> {
    let KeyTerms { now, lock_ms, .. } = terms;
    let mut tx = d.begin_write().await?;
    let outcome = if d.claim_key(&mut tx, key, terms).await? {
        IdemBegin::Fresh
    } else {
        let Some(row) = d.lock_key(&mut tx, key).await? else {
            return Ok(None);
        };
        let mut found = found(&row, key, now)?;
        // Held by another instance's request within its lock: gone all the same if
        // that instance stopped beating (it died), so a retry need not wait out the
        // lock. A live instance taken for dead commits nothing (`store_response`).
        if found == Found::Answer(IdemBegin::InFlight)
            && owner_dead(d, &mut tx, row.owner.as_deref(), now).await?
        {
            found = Found::Abandoned;
        }
        match found {
            Found::Expired => {
                d.renew_key(&mut tx, key, terms).await?;
                IdemBegin::Fresh
            }
            Found::Abandoned => {
                d.take_over_key(&mut tx, key, now + lock_ms).await?;
                IdemBegin::Fresh
            }
            Found::Answer(answer) => answer,
        }
    };
    // Only the business change's commit answers the request; phase 1 need not wait
    // for its own where one process owns the database (SQLite: the key and the
    // change share one commit).
    d.commit_later(tx).await?;
    Ok(Some(outcome))
}

/// Phase 1: records `key` as in flight, or says why the request must not run.
pub(crate) async fn begin<D: IdemStatements>(
    d: &D,
    key: &IdemKey,
    terms: KeyTerms,
) -> StoreResult<IdemBegin> {
    // A key forgotten between the insert and the read is free again: start over
    // (twice at most: each time another request had to release it meanwhile).
    for _ in 0..3 {
        if let Some(begun) = d.retrying(|| begin_once(d, key, terms)).await? {
            return Ok(begun);
        }
    }
    Ok(IdemBegin::InFlight)
}

/// Phase 2, in the business change's transaction `tx`: stores `body` with `status`
/// as the key's response (nothing without a key).
pub(crate) async fn finish<D: IdemStatements>(
    d: &D,
    tx: &mut D::Tx,
    key: Option<&IdemKey>,
    status: u16,
    body: &impl serde::Serialize,
) -> StoreResult<()> {
    let Some(key) = key else { return Ok(()) };
    let body = serde_json::to_string(body)
        .map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))?;
    store_response(d, tx, key, &StoredResponse { status, body }).await
}

/// Stores the response, only while this attempt still owns the in-flight key: an
/// attempt whose lock ran out and was taken over by another instance must not commit
/// its business change beside the one that took over (I8). The caller's transaction
/// then rolls back on [`StoreError::KeyTakenOver`]. (One process owns a SQLite file,
/// so there the attempt always owns it, unless the key was forgotten meanwhile.)
pub(crate) async fn store_response<D: IdemStatements>(
    d: &D,
    tx: &mut D::Tx,
    key: &IdemKey,
    response: &StoredResponse,
) -> StoreResult<()> {
    if d.store_response(tx, key, response).await? {
        Ok(())
    } else {
        Err(StoreError::KeyTakenOver)
    }
}

// Every backend with the key statements has idempotency keys.
store_area! {
    /// Idempotency keys (I8): recorded as in flight before the work runs, completed
    /// with the response in the work's own transaction.
    pub trait IdemStore for Engine<D: IdemStatements> {
        async fn idem_begin(
            &self,
            key: &IdemKey,
            now: Millis,
            lock_ms: Millis,
            ttl_ms: Millis,
        ) -> StoreResult<IdemBegin> {
            let terms = KeyTerms {
                now,
                lock_ms,
                ttl_ms,
            };
            begin(&self.0, key, terms).await
        }

        /// Forgets an in-flight key whose request failed transiently, so a retry can run.
        /// Only while `key.owner` still holds it: a key taken over by another instance
        /// after its lock ran out is not this request's to forget.
        async fn idem_abort(&self, key: &IdemKey) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.forget_key(&mut tx, key).await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// At start: forgets in-flight keys left by a process that died mid-request. Only
        /// for a backend that one process owns (SQLite); a shared backend relies on the
        /// in-flight lock expiring instead.
        async fn idem_recover(&self) -> StoreResult<u64> {
            let d = &self.0;
            d.retrying(|| async {
                if !D::DIALECT.sole_owner() {
                    return Ok(0);
                }
                let mut tx = d.begin_write().await?;
                let forgotten = d.forget_in_flight_keys(&mut tx).await?;
                d.commit(tx, &[]).await?;
                Ok(forgotten)
            })
            .await
        }

        /// Stores a final (error) response for the key, replayed on retries.
        async fn idem_complete(&self, key: &IdemKey, response: &StoredResponse) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                store_response(d, &mut tx, key, response).await?;
                d.commit(tx, &[]).await
            })
            .await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(owner: u8) -> IdemKey {
        IdemKey {
            tenant_id: TenantId::new(),
            principal: "agent:a".into(),
            key_hash: vec![1],
            fingerprint: vec![2],
            owner: vec![owner],
        }
    }

    fn row(state: &str, locked_until: Millis, expires_at: Millis) -> StoredKey {
        StoredKey {
            fingerprint: vec![2],
            state: state.into(),
            status_code: (state == "done").then_some(201),
            response: (state == "done").then(|| "{}".into()),
            locked_until,
            expires_at,
            owner: Some(vec![7]),
        }
    }

    #[test]
    fn what_phase_one_does_with_a_key_it_found() {
        let other = key(8);
        assert_eq!(
            found(&row("done", 0, 10), &other, 10).unwrap(),
            Found::Expired
        );
        let mut changed = row("done", 0, 10);
        changed.fingerprint = vec![3];
        assert_eq!(
            found(&changed, &other, 5).unwrap(),
            Found::Answer(IdemBegin::Mismatch)
        );
        assert_eq!(
            found(&row("done", 0, 10), &other, 5).unwrap(),
            Found::Answer(IdemBegin::Replay(StoredResponse {
                status: 201,
                body: "{}".into()
            }))
        );
        // In flight: another owner's until its lock runs out; this owner's at once.
        assert_eq!(
            found(&row("in_flight", 6, 10), &other, 5).unwrap(),
            Found::Answer(IdemBegin::InFlight)
        );
        assert_eq!(
            found(&row("in_flight", 6, 10), &other, 6).unwrap(),
            Found::Abandoned
        );
        assert_eq!(
            found(&row("in_flight", 6, 10), &key(7), 5).unwrap(),
            Found::Abandoned
        );
    }
}
