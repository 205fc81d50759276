//! The scavenger (expired leases, I5 quarantine), expiry, and retention (I6).
//!
//! Every instance runs these passes. They are safe together: each batch locks the
//! rows it changes with `FOR UPDATE SKIP LOCKED` (two scavengers split the work,
//! neither waits), and retention takes the agent's row lock before it moves the
//! low-water mark.

use super::{PgStore, parse_id};
use crate::clock::Millis;
use crate::store::rows::OPEN_STATUSES;
use crate::store::*;
use sqlx::{AssertSqlSafe, PgConnection, Row};

const SCAVENGER: Actor = Actor::System("scavenger");
const EXPIRY: Actor = Actor::System("expiry");
/// Rows one scavenger statement changes; a pass repeats until less remain.
const BATCH: i64 = 1_000;

/// Returns expired leases (of one agent, or all) to pending, or to the quarantine when
/// their attempts are used up; at most [`BATCH`]. Shared by the scavenger and claim.
pub(super) async fn reap_leases(
    conn: &mut PgConnection,
    now: Millis,
    agent: Option<AgentId>,
) -> StoreResult<ReapStats> {
    let rows = sqlx::query(
        "WITH r AS ( \
           UPDATE events SET \
             status = CASE WHEN attempts >= max_attempts THEN 'quarantined' ELSE 'pending' END, \
             claim_token = NULL, lease_expires_at = NULL, available_at = $1, updated_at = $1, \
             last_error = 'lease expired on attempt ' || attempts || ' of ' || max_attempts \
               || COALESCE(' (last error: ' || last_error || ')', '') \
           WHERE id IN (SELECT id FROM events WHERE status = 'claimed' AND lease_expires_at <= $1 \
             AND ($2::text IS NULL OR agent_id = $2) ORDER BY lease_expires_at LIMIT $3 \
             FOR UPDATE SKIP LOCKED) \
           RETURNING id, tenant_id, agent_id, seq, status, attempts), \
         h AS (INSERT INTO event_history (event_id, at, action, actor, detail) \
           SELECT id, $1, CASE WHEN status = 'quarantined' THEN 'quarantined' ELSE 'lease_expired' END, \
             $4, CASE WHEN status = 'quarantined' \
               THEN 'lease expired on attempt ' || attempts || '; attempts exhausted' \
               ELSE 'attempt ' || attempts END FROM r) \
         SELECT tenant_id, agent_id, seq, status FROM r",
    )
    .bind(now)
    .bind(agent.map(|a| a.to_string()))
    .bind(BATCH)
    .bind(SCAVENGER.to_string())
    .fetch_all(&mut *conn)
    .await?;
    let mut stats = ReapStats::default();
    for row in &rows {
        stats.lease_expirations += 1;
        if row.try_get::<String, _>("status")? == "quarantined" {
            stats.quarantined += 1;
        } else {
            stats.wakes.push(Wake {
                tenant_id: parse_id(&row.try_get::<String, _>("tenant_id")?)?,
                agent_id: parse_id(&row.try_get::<String, _>("agent_id")?)?,
                cursor_hint: row.try_get::<i64, _>("seq")? as u64,
            });
        }
    }
    Ok(stats)
}

pub(super) async fn reap(store: &PgStore, now: Millis) -> StoreResult<ReapStats> {
    let mut stats = ReapStats::default();
    loop {
        let mut tx = store.begin().await?;
        let batch = reap_leases(&mut tx, now, None).await?;
        let expired = sqlx::query(
            "WITH x AS (UPDATE events SET status = 'expired', payload = NULL, updated_at = $1 \
               WHERE id IN (SELECT id FROM events WHERE status = 'pending' \
                 AND expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) \
               RETURNING id), \
             h AS (INSERT INTO event_history (event_id, at, action, actor) \
               SELECT id, $1, 'expired', $3 FROM x) \
             SELECT count(*) FROM x",
        )
        .bind(now)
        .bind(BATCH)
        .bind(EXPIRY.to_string())
        .fetch_one(&mut *tx)
        .await?
        .try_get::<i64, _>(0)? as u64;
        store.commit(tx, &batch.wakes).await?;
        let more = batch.lease_expirations as i64 == BATCH || expired as i64 == BATCH;
        stats.lease_expirations += batch.lease_expirations;
        stats.quarantined += batch.quarantined;
        stats.expired += expired;
        stats.wakes.extend(batch.wakes);
        if !more {
            return Ok(stats);
        }
    }
}

/// Removes, per agent, the longest prefix of the inbox in which every event is terminal
/// and older than `cutoff`, and moves the low-water mark to its end. Only a prefix is
/// removed, so a reader at or above the mark never misses an event silently (I6).
pub(super) async fn retain(
    store: &PgStore,
    cutoff: Millis,
    now: Millis,
) -> StoreResult<RetentionStats> {
    // The first removable-prefix test, without locks, only picks the candidates.
    let agents = sqlx::query(AssertSqlSafe(format!(
        "SELECT a.id FROM agents a WHERE a.low_water < COALESCE( \
           (SELECT MIN(e.seq) FROM events e WHERE e.agent_id = a.id \
              AND (e.status IN {OPEN_STATUSES} OR e.updated_at > $1)) - 1, a.head_seq)"
    )))
    .bind(cutoff)
    .fetch_all(store.pool())
    .await?;
    let mut stats = RetentionStats::default();
    for row in &agents {
        let id: String = row.try_get("id")?;
        // One short transaction per agent. The agent's row lock orders this against
        // sends and another instance's retention.
        //
        // Lock first, compute second, in two statements (I3, I6). At READ COMMITTED a
        // `SELECT … FOR UPDATE` that waited for a sender returns the sender's new row
        // (`head_seq = N+1`), but any subquery of that same statement still reads the
        // statement's old snapshot, where event N+1 does not exist: a prefix computed
        // there would end at N+1 and the DELETE below (a new snapshot) would remove
        // the pending event. The statement after the lock takes a snapshot in which
        // every send that held the row has committed, and the prefix is capped at the
        // `head_seq` read under the lock, so it covers only events that snapshot sees.
        let mut tx = store.begin().await?;
        let marks = sqlx::query("SELECT low_water, head_seq FROM agents WHERE id = $1 FOR UPDATE")
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
        let low_water: i64 = marks.try_get("low_water")?;
        let head_seq: i64 = marks.try_get("head_seq")?;
        let new_low: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT LEAST(COALESCE(MIN(seq) - 1, $3), $3) FROM events \
             WHERE agent_id = $2 AND (status IN {OPEN_STATUSES} OR updated_at > $1)"
        )))
        .bind(cutoff)
        .bind(&id)
        .bind(head_seq)
        .fetch_one(&mut *tx)
        .await?;
        if new_low <= low_water {
            continue;
        }
        sqlx::query(
            "DELETE FROM event_history WHERE event_id IN \
             (SELECT id FROM events WHERE agent_id = $1 AND seq <= $2)",
        )
        .bind(&id)
        .bind(new_low)
        .execute(&mut *tx)
        .await?;
        let removed = sqlx::query("DELETE FROM events WHERE agent_id = $1 AND seq <= $2")
            .bind(&id)
            .bind(new_low)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query("UPDATE agents SET low_water = GREATEST(low_water, $1) WHERE id = $2")
            .bind(new_low)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        stats.events_removed += removed;
    }
    stats.idempotency_removed = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= $1")
        .bind(now)
        .execute(store.pool())
        .await?
        .rows_affected();
    Ok(stats)
}
