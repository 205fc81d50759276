//! The dedup table (`inbox_seen`): each claimed event's local state, failure count
//! and last error, bounded by age and count; and the local quarantine read back.

use sqlx::Row;
use switchboard_proto::{EventId, InboxEvent};

use super::{Consumer, LocalPoison};
use crate::local::{LocalDb, LocalError, ms, now_ms};

impl Consumer {
    pub(super) async fn seen(&self, event_id: EventId) -> Result<Option<Seen>, LocalError> {
        let row =
            sqlx::query("SELECT state, failures, last_error FROM inbox_seen WHERE event_id = ?")
                .bind(event_id.to_string())
                .fetch_optional(self.db.pool())
                .await
                .map_err(|e| self.db.error(e))?;
        Ok(row.map(|r| Seen {
            state: r.get(0),
            failures: u32::try_from(r.get::<i64, _>(1)).unwrap_or(0),
            last_error: r.get(2),
        }))
    }

    pub(super) async fn mark(
        &self,
        event: &InboxEvent,
        state: &str,
        failures: u32,
        error: Option<&str>,
    ) -> Result<(), LocalError> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO inbox_seen (event_id, agent, seq, state, failures, last_error, seen_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7) \
             ON CONFLICT (event_id) DO UPDATE SET state = excluded.state, failures = excluded.failures, \
             last_error = COALESCE(excluded.last_error, last_error), updated_at = excluded.updated_at",
        )
        .bind(event.event_id.to_string())
        .bind(&self.agent)
        .bind(i64::try_from(event.seq).unwrap_or(i64::MAX))
        .bind(state)
        .bind(failures)
        .bind(error)
        .bind(now)
        .execute(self.db.pool())
        .await
        .map_err(|e| self.db.error(e))?;
        Ok(())
    }

    /// Forgets finished events past the TTL, and the oldest beyond the size bound.
    pub(super) async fn prune(&self) -> Result<(), LocalError> {
        let pool = self.db.pool();
        sqlx::query(
            "DELETE FROM inbox_seen WHERE state IN ('acked', 'poisoned') AND updated_at <= ?",
        )
        .bind(now_ms() - ms(self.config.dedup_ttl))
        .execute(pool)
        .await
        .map_err(|e| self.db.error(e))?;
        sqlx::query(
            "DELETE FROM inbox_seen WHERE event_id IN (SELECT event_id FROM inbox_seen \
             WHERE state IN ('acked', 'poisoned') ORDER BY updated_at DESC LIMIT -1 OFFSET ?)",
        )
        .bind(i64::try_from(self.config.dedup_max).unwrap_or(i64::MAX))
        .execute(pool)
        .await
        .map_err(|e| self.db.error(e))?;
        Ok(())
    }
}

/// The local state of an event seen before.
pub(super) struct Seen {
    pub(super) state: String,
    pub(super) failures: u32,
    pub(super) last_error: Option<String>,
}

/// Locally quarantined events in `db`, newest first.
pub async fn local_poison(db: &LocalDb, limit: u32) -> Result<Vec<LocalPoison>, LocalError> {
    let rows = sqlx::query(
        "SELECT event_id, seq, failures, last_error, updated_at FROM inbox_seen \
         WHERE state = 'poisoned' ORDER BY updated_at DESC LIMIT ?",
    )
    .bind(limit)
    .fetch_all(db.pool())
    .await
    .map_err(|e| db.error(e))?;
    Ok(rows
        .iter()
        .map(|r| LocalPoison {
            event_id: r.get(0),
            seq: u64::try_from(r.get::<i64, _>(1)).unwrap_or(0),
            failures: u32::try_from(r.get::<i64, _>(2)).unwrap_or(0),
            reason: r.get(3),
            at: r.get(4),
        })
        .collect())
}
