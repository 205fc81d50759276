//! The scavenger's and expiry's PostgreSQL shapes ([`MaintenanceDriver`]): one
//! statement per batch, its rows taken by a `FOR UPDATE SKIP LOCKED` CTE (two
//! instances' passes split the work, neither waits) and their history written by the
//! same statement. The rules are the engine's (`engine/maintenance.rs`): I5 through
//! [`QUARANTINES`], and the same `last_error` and history texts.

use super::PgDriver;
use super::timeline::{CLEAR_STEPS, OLD_STEP_COLS, moved_then};
use crate::clock::Millis;
use crate::dialect::sql;
use crate::engine::Driver;
use crate::engine::inbox::QUARANTINES;
use crate::engine::maintenance::{EXPIRY, MaintenanceDriver, ReturnedLease, SCAVENGER};
use crate::*;
use async_trait::async_trait;
use sqlx::Row;

/// Returns expired leases, each with its history rows, in one statement; `{LOCK}` is
/// how the CTE locks its rows, which also reads the claim steps their rows hold to
/// move them (`timeline.rs`). A returned event is available from its lease's end, not
/// from this pass: a claim whose clock read came before the pass must still find it
/// first.
const RETURN_EXPIRED: &str = "WITH o AS (SELECT {OLD_STEP_COLS} FROM events \
       WHERE status = 'claimed' AND lease_expires_at <= $1 \
         AND ($2::text IS NULL OR agent_id = $2) ORDER BY lease_expires_at LIMIT $3 {LOCK}), \
     r AS ( \
       UPDATE events SET \
         status = CASE WHEN {QUARANTINES} THEN 'quarantined' ELSE 'pending' END, \
         available_at = lease_expires_at, \
         claim_token = NULL, lease_expires_at = NULL, updated_at = $1, {CLEAR_STEPS}, \
         last_error = 'lease expired on attempt ' || attempts || ' of ' || max_attempts \
           || COALESCE(' (last error: ' || last_error || ')', '') \
       WHERE id IN (SELECT id FROM o) \
       RETURNING id, tenant_id, agent_id, seq, status, attempts), \
     h AS ({MOVED_THEN}) \
     SELECT tenant_id, agent_id, seq, status FROM r";

/// Each returned lease's own step.
const LEASE_STEP: &str = "SELECT id AS event_id, $1 AS at, \
       CASE WHEN status = 'quarantined' THEN 'quarantined' ELSE 'lease_expired' END AS action, \
       $4 AS actor, CASE WHEN status = 'quarantined' \
         THEN 'lease expired on attempt ' || attempts || '; attempts exhausted' \
         ELSE 'attempt ' || attempts END AS detail FROM r";

fn return_expired(lock: &str) -> String {
    RETURN_EXPIRED
        .replace("{MOVED_THEN}", &moved_then("o", LEASE_STEP))
        .replace("{OLD_STEP_COLS}", OLD_STEP_COLS)
        .replace("{CLEAR_STEPS}", CLEAR_STEPS)
        .replace("{QUARANTINES}", QUARANTINES)
        .replace("{LOCK}", lock)
}

#[async_trait]
impl MaintenanceDriver for PgDriver {
    async fn return_expired_leases(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        agent: Option<AgentId>,
        limit: u32,
    ) -> StoreResult<Vec<ReturnedLease>> {
        // The scavenger skips rows another pass or a claim holds; a claim's own agent
        // waits for them (see `expired_leases`): a claim that skipped its agent's
        // lease while a pass returned it saw the event claimed and took the next.
        let statement = match agent {
            Some(_) => sql!(Self::DIALECT, "{}", return_expired("FOR UPDATE")),
            None => sql!(
                Self::DIALECT,
                "{}",
                return_expired("FOR UPDATE SKIP LOCKED")
            ),
        };
        let rows = sqlx::query(statement)
            .bind(now)
            .bind(agent)
            .bind(i64::from(limit))
            .bind(SCAVENGER.to_string())
            .fetch_all(&mut **tx)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ReturnedLease {
                    tenant: row.try_get("tenant_id")?,
                    agent: row.try_get("agent_id")?,
                    seq: row.try_get::<i64, _>("seq")? as u64,
                    quarantined: row.try_get::<String, _>("status")? == "quarantined",
                })
            })
            .collect()
    }

    async fn expire_events(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<TenantId>> {
        let expired = sqlx::query_scalar(sql!(
            Self::DIALECT,
            "WITH x AS (UPDATE events SET status = 'expired', payload = NULL, updated_at = $1 \
               WHERE id IN (SELECT id FROM events WHERE status = 'pending' \
                 AND expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED) \
               RETURNING id, tenant_id), \
             h AS (INSERT INTO event_history (event_id, at, action, actor) \
               SELECT id, $1, 'expired', $3 FROM x) \
             SELECT tenant_id FROM x"
        ))
        .bind(now)
        .bind(i64::from(limit))
        .bind(EXPIRY.to_string())
        .fetch_all(&mut **tx)
        .await?;
        Ok(expired)
    }
}
