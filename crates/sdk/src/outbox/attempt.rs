//! One attempt for a lane head: pick the due heads, take one (checking the horizon
//! in the same statement), send it with its stored key, and record how it ended
//! (`SENT`, `POISON`, or `RETRYABLE` on its schedule).

use std::time::Duration;

use sqlx::{AssertSqlSafe, Row};
use switchboard_proto::SendMessage;

use super::judge::{Judged, judge};
use super::{EntryState, OPEN, Outbox, OutboxError, Target};
use crate::Error;
use crate::local::{ms, now_ms};
use crate::retry::DecorrelatedJitter;

impl Outbox {
    /// The head of every lane that is due: the oldest open entry of the lane, when
    /// it is not in flight and its time has come.
    pub(super) async fn due_heads(&self, now: i64) -> Result<Vec<Head>, OutboxError> {
        let db = &self.inner.db;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT id, target_kind, target, body, idempotency_key, last_delay_ms, \
             first_attempt_at FROM outbox \
             WHERE id IN (SELECT MIN(id) FROM outbox WHERE state IN {OPEN} GROUP BY lane) \
             AND state IN ('queued', 'retryable') AND next_attempt_at <= ? ORDER BY id"
        )))
        .bind(now)
        .fetch_all(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(rows
            .iter()
            .map(|row| Head {
                id: row.get(0),
                target: Target::from_row(row.get::<&str, _>(1), row.get(2)),
                body: row.get(3),
                key: row.get(4),
                last_delay: row
                    .get::<Option<i64>, _>(5)
                    .map(|d| Duration::from_millis(u64::try_from(d).unwrap_or(0))),
                first_attempt_at: row.get(6),
            })
            .collect())
    }

    /// When the next lane head is due.
    pub(super) async fn next_due(&self) -> Result<Option<i64>, OutboxError> {
        let db = &self.inner.db;
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT MIN(next_attempt_at) FROM outbox \
             WHERE id IN (SELECT MIN(id) FROM outbox WHERE state IN {OPEN} GROUP BY lane) \
             AND state IN ('queued', 'retryable')"
        )))
        .fetch_one(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(row.get(0))
    }

    /// One attempt for a lane head; the state it ended in (`None` when another
    /// process took it first, or it is past the horizon: first tried at or before
    /// `cutoff`).
    pub(super) async fn attempt(
        &self,
        head: Head,
        now: i64,
        cutoff: i64,
    ) -> Result<Option<EntryState>, OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        // The horizon is checked in the statement that takes the entry, so no
        // attempt starts past it, whatever another process did meanwhile. The clock
        // starts here, before any byte leaves: the earliest the server can record
        // the key.
        let taken = sqlx::query(
            "UPDATE outbox SET state = 'sending', attempts = attempts + 1, updated_at = ?1, \
             first_attempt_at = COALESCE(first_attempt_at, ?1) \
             WHERE id = ?2 AND state IN ('queued', 'retryable') \
             AND (first_attempt_at IS NULL OR first_attempt_at > ?3)",
        )
        .bind(now)
        .bind(head.id)
        .bind(cutoff)
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?
        .rows_affected();
        if taken == 0 {
            return Ok(None);
        }
        let result = self.send(&head).await;
        let outcome = judge(result);
        let after = now_ms().max(now);
        let state = match outcome {
            Judged::Sent(receipt) => {
                sqlx::query(
                    "UPDATE outbox SET state = 'sent', receipt = ?, last_error = NULL, \
                     updated_at = ? WHERE id = ?",
                )
                .bind(receipt.to_string())
                .bind(after)
                .bind(head.id)
                .execute(db.pool())
                .await
                .map_err(|e| db.error(e))?;
                EntryState::Sent
            }
            Judged::Poison(reason) => {
                tracing::warn!(entry = head.id, %reason, "outbox entry is poison");
                sqlx::query(
                    "UPDATE outbox SET state = 'poison', last_error = ?, updated_at = ? \
                     WHERE id = ?",
                )
                .bind(reason)
                .bind(after)
                .bind(head.id)
                .execute(db.pool())
                .await
                .map_err(|e| db.error(e))?;
                EntryState::Poison
            }
            Judged::Retry {
                retry_after,
                reason,
                never_left,
            } => {
                // A first attempt that could not connect sent nothing: the server has
                // no key to forget, and the horizon's clock has not started.
                let unstarted = never_left && head.first_attempt_at.is_none();
                self.schedule(&head, now, retry_after, reason, unstarted)
                    .await?
            }
            Judged::Unauthorized(reason) => {
                self.schedule(&head, now, Some(config.max_delay), reason, false)
                    .await?
            }
        };
        Ok(Some(state))
    }

    /// Makes a head `RETRYABLE`, due after `retry_after` (exactly) or else the next
    /// jittered delay. The schedule counts from `now`, when the attempt started, so
    /// a `Retry-After: 30` answer means 30 s after `now`. With `unstarted`, no
    /// attempt so far has reached the server: `first_attempt_at` is cleared again.
    async fn schedule(
        &self,
        head: &Head,
        now: i64,
        retry_after: Option<Duration>,
        reason: String,
        unstarted: bool,
    ) -> Result<EntryState, OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        let jitter =
            DecorrelatedJitter::with_uniform(config.base_delay, config.max_delay, config.uniform);
        let jittered = match head.last_delay {
            Some(previous) => jitter.after(previous),
            None => jitter,
        }
        .next_delay();
        let delay = retry_after.unwrap_or(jittered);
        sqlx::query(
            "UPDATE outbox SET state = 'retryable', last_error = ?, next_attempt_at = ?, \
             last_delay_ms = ?, updated_at = ?, \
             first_attempt_at = CASE WHEN ? THEN NULL ELSE first_attempt_at END WHERE id = ?",
        )
        .bind(reason)
        .bind(now.saturating_add(ms(delay)))
        .bind(ms(jittered))
        .bind(now_ms().max(now))
        .bind(unstarted)
        .bind(head.id)
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(EntryState::Retryable)
    }

    /// Sends a head once; the receipt as JSON.
    async fn send(&self, head: &Head) -> Result<serde_json::Value, Error> {
        let message: SendMessage = serde_json::from_slice(&head.body)
            .map_err(|e| Error::InvalidInput(format!("stored message is unreadable: {e}")))?;
        let client = &self.inner.client;
        let receipt = match &head.target {
            Target::Agent(agent) => {
                serde_json::to_value(client.send_message(agent, &message, &head.key).await?)
            }
            Target::Room(room) => {
                serde_json::to_value(client.send_room_message(room, &message, &head.key).await?)
            }
        };
        receipt.map_err(|e| Error::Decode(e.to_string()))
    }
}

/// A lane head about to be attempted.
pub(super) struct Head {
    id: i64,
    target: Target,
    body: Vec<u8>,
    key: String,
    last_delay: Option<Duration>,
    /// Before this attempt.
    first_attempt_at: Option<i64>,
}
