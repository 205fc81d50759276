//! The server instances that share a database, and their heartbeats (issue 17).
//!
//! Each instance of a shared database (PostgreSQL, MariaDB / MySQL) beats every
//! second ([`beat`]). One that has not beaten for [`INSTANCE_DEAD_MS`] is dead: the
//! idempotency keys it left in flight are taken over by the next retry, and its live
//! bulk jobs are marked interrupted, within seconds rather than after the keys' 60 s
//! lock or the jobs' 30 s heartbeat. This is a matter of liveness only: an instance
//! that is alive but stalled (a pause, a long GC-like stop) and taken for dead still
//! commits nothing, because its attempt no longer owns the key (`store_response`
//! fails, I8) and its job's next step reads the interrupted state under the row lock.
//! A backend that one process owns (SQLite) never beats: its in-flight keys and live
//! jobs at start are all a dead process's (`idem_recover`, `jobs_interrupted`).

use super::Driver;
use crate::StoreResult;
use crate::clock::Millis;
use async_trait::async_trait;

/// An instance silent this long is dead: ten heartbeats missed.
pub(crate) const INSTANCE_DEAD_MS: Millis = 10_000;

/// A dead instance's row is forgotten after a day.
const INSTANCE_FORGET_MS: Millis = 24 * 60 * 60 * 1000;

/// The statements of instances (`store/statements/instances.rs`), each in the
/// caller's transaction.
#[async_trait]
pub(crate) trait InstanceStatements: Driver {
    /// Records `instance` alive at `now`, and forgets the instances silent since
    /// `forget_before`.
    async fn beat_instance(
        &self,
        tx: &mut Self::Tx,
        instance: &str,
        now: Millis,
        forget_before: Millis,
    ) -> StoreResult<()>;
    /// When `instance` last beat; `None`: never, or so long ago it was forgotten.
    async fn last_beat(&self, tx: &mut Self::Tx, instance: &str) -> StoreResult<Option<Millis>>;
}

/// Records `instance` alive at `now`.
pub(crate) async fn beat<D: InstanceStatements>(
    d: &D,
    instance: &str,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = d.begin_write().await?;
    d.beat_instance(&mut tx, instance, now, now - INSTANCE_FORGET_MS)
        .await?;
    d.commit(tx, &[]).await
}

/// Whether the instance whose owner name (the 16 bytes of its UUID, as in-flight
/// idempotency keys carry it) is `owner` is dead at `now`. An owner that never beat
/// (an instance of an older version, or a record of no instance) is not known to be
/// dead: its record waits for its lock to run out.
pub(crate) async fn owner_dead<D: InstanceStatements>(
    d: &D,
    tx: &mut D::Tx,
    owner: Option<&[u8]>,
    now: Millis,
) -> StoreResult<bool> {
    let Some(id) = owner.and_then(|o| uuid::Uuid::from_slice(o).ok()) else {
        return Ok(false);
    };
    let last = d.last_beat(tx, &id.to_string()).await?;
    Ok(last.is_some_and(|beat| dead(beat, now)))
}

/// Whether an instance that last beat at `beat` is dead at `now`.
pub(crate) fn dead(beat: Millis, now: Millis) -> bool {
    beat <= now - INSTANCE_DEAD_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_dead_once_it_missed_ten_seconds_of_beats() {
        assert!(!dead(1_000, 1_000));
        assert!(!dead(1_000, 1_000 + INSTANCE_DEAD_MS - 1));
        assert!(dead(1_000, 1_000 + INSTANCE_DEAD_MS));
    }
}
