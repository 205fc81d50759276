//! The scavenger (expired leases, I5 quarantine), expiry, and retention (I6).

use super::{OPEN_STATUSES, SqliteStore, history, parse_id};
use crate::clock::Millis;
use crate::store::*;
use sqlx::AssertSqlSafe;
use sqlx::{Row, SqliteConnection};

const SCAVENGER: Actor = Actor::System("scavenger");

/// Returns expired leases (of one agent, or all) to pending, or to the quarantine when
/// their attempts are used up. Shared by the scavenger and by claim.
pub(super) async fn reap_leases(
    conn: &mut SqliteConnection,
    now: Millis,
    agent: Option<AgentId>,
) -> StoreResult<ReapStats> {
    let rows = sqlx::query(
        "UPDATE events SET \
           status = CASE WHEN attempts >= max_attempts THEN 'quarantined' ELSE 'pending' END, \
           claim_token = NULL, lease_expires_at = NULL, available_at = ?1, updated_at = ?1, \
           last_error = 'lease expired on attempt ' || attempts || ' of ' || max_attempts \
             || COALESCE(' (last error: ' || last_error || ')', '') \
         WHERE status = 'claimed' AND lease_expires_at <= ?1 AND (?2 IS NULL OR agent_id = ?2) \
         RETURNING id, tenant_id, agent_id, seq, status, attempts",
    )
    .bind(now)
    .bind(agent.map(|a| a.to_string()))
    .fetch_all(&mut *conn)
    .await?;
    let mut stats = ReapStats::default();
    for row in &rows {
        let id: String = row.try_get("id")?;
        let status: String = row.try_get("status")?;
        let attempts: i64 = row.try_get("attempts")?;
        stats.lease_expirations += 1;
        if status == "quarantined" {
            stats.quarantined += 1;
            history(
                conn,
                &id,
                now,
                "quarantined",
                &SCAVENGER,
                Some(format!(
                    "lease expired on attempt {attempts}; attempts exhausted"
                )),
            )
            .await?;
        } else {
            history(
                conn,
                &id,
                now,
                "lease_expired",
                &SCAVENGER,
                Some(format!("attempt {attempts}")),
            )
            .await?;
            stats.wakes.push(Wake {
                tenant_id: parse_id(&row.try_get::<String, _>("tenant_id")?)?,
                agent_id: parse_id(&row.try_get::<String, _>("agent_id")?)?,
                cursor_hint: row.try_get::<i64, _>("seq")? as u64,
            });
        }
    }
    Ok(stats)
}

pub(super) async fn reap(store: &SqliteStore, now: Millis) -> StoreResult<ReapStats> {
    let mut tx = store.begin_write().await?;
    let mut stats = reap_leases(&mut tx, now, None).await?;
    let expired = sqlx::query(
        "UPDATE events SET status = 'expired', payload = NULL, updated_at = ?1 \
         WHERE status = 'pending' AND expires_at IS NOT NULL AND expires_at <= ?1 RETURNING id",
    )
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    for row in &expired {
        let id: String = row.try_get(0)?;
        history(&mut tx, &id, now, "expired", &Actor::System("expiry"), None).await?;
    }
    stats.expired = expired.len() as u64;
    tx.commit().await?;
    Ok(stats)
}

/// Removes, per agent, the longest prefix of the inbox in which every event is terminal
/// and older than `cutoff`, and moves the low-water mark to its end. Only a prefix is
/// removed, so a reader at or above the mark never misses an event silently (I6).
pub(super) async fn retain(
    store: &SqliteStore,
    cutoff: Millis,
    now: Millis,
) -> StoreResult<RetentionStats> {
    let agents = sqlx::query(AssertSqlSafe(format!(
        "SELECT a.id, a.low_water, a.head_seq, \
           (SELECT MIN(e.seq) FROM events e WHERE e.agent_id = a.id \
              AND (e.status IN {OPEN_STATUSES} OR e.updated_at > ?)) AS keep_from \
         FROM agents a"
    )))
    .bind(cutoff)
    .fetch_all(store.read())
    .await?;
    let mut stats = RetentionStats::default();
    for row in &agents {
        let id: String = row.try_get("id")?;
        let low_water: i64 = row.try_get("low_water")?;
        let head: i64 = row.try_get("head_seq")?;
        let keep_from: Option<i64> = row.try_get("keep_from")?;
        let new_low = keep_from.map_or(head, |k| k - 1);
        if new_low <= low_water {
            continue;
        }
        // One short transaction per agent keeps the writer free for sends and claims.
        let mut tx = store.begin_write().await?;
        sqlx::query(
            "DELETE FROM event_history WHERE event_id IN \
             (SELECT id FROM events WHERE agent_id = ? AND seq <= ?)",
        )
        .bind(&id)
        .bind(new_low)
        .execute(&mut *tx)
        .await?;
        let removed = sqlx::query("DELETE FROM events WHERE agent_id = ? AND seq <= ?")
            .bind(&id)
            .bind(new_low)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE agents SET low_water = MAX(low_water, ?) WHERE id = ?")
            .bind(new_low)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        stats.events_removed += removed;
    }
    stats.idempotency_removed = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= ?")
        .bind(now)
        .execute(&store.write)
        .await?
        .rows_affected();
    Ok(stats)
}
