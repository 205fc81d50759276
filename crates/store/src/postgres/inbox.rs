//! The inbox's PostgreSQL shapes ([`InboxDriver`]): claim, ack and release are one
//! statement each (a claim and an ack are steps in the event row, a release's CTE
//! writes its history rows, `timeline.rs`), so a drain costs one commit per claim
//! batch plus one per ack. The rules are the engine's (`engine/inbox.rs`);
//! these statements only hold them in one round trip.

use super::PgDriver;
use super::timeline::{CLEAR_STEPS, OLD_STEP_COLS, moved_then};
use crate::clock::{Millis, to_timestamp};
use crate::dialect::sql;
use crate::engine::Driver;
use crate::engine::inbox::{QUARANTINES, ReleaseRow, available};
use crate::engine::inbox_transactions::InboxDriver;
use crate::rows::*;
use crate::*;
use async_trait::async_trait;
use sqlx::Row;

/// The advisory-lock class of [`InboxDriver::order_claims`] (the two-key form, apart
/// from the one-key locks sqlx's migrator takes).
const CLAIM_LOCK_CLASS: i32 = 0x5342_434c; // "SBCL"

/// The condition that a claim token is current and its lease running: `$2` event,
/// `$3` agent, `$4` token, `$1` now.
const HOLDS: &str = "id = $2 AND agent_id = $3 AND claim_token = $4 AND status = 'claimed' \
     AND lease_expires_at > $1";

#[async_trait]
impl InboxDriver for PgDriver {
    /// A transaction-level advisory lock on the agent (`hashtext` of its id, in a
    /// class of its own): unlike the agent's row, it does not make claims wait for
    /// sends, which lock the row to number their events.
    async fn order_claims(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<()> {
        sqlx::query("SELECT pg_advisory_xact_lock($1, hashtext($2))")
            .bind(CLAIM_LOCK_CLASS)
            .bind(agent)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Last seen, at most once a second: a row rewrite per claim would be a dead
    /// tuple per claim.
    const SEEN_EVERY_MS: Millis = 1000;

    /// SKIP LOCKED: concurrent claimers (on any instance) take different rows
    /// instead of waiting for each other. The tokens are random (v4), or with an
    /// attempt id the engine's `attempt_token`, computed here in SQL (the driver
    /// suite checks that the two agree).
    async fn claim_batch(
        &self,
        tx: &mut Self::Tx,
        agent: &AgentRecord,
        limit: u32,
        lease_until: Millis,
        attempt: Option<uuid::Uuid>,
        now: Millis,
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let rows = sqlx::query(sql!(
            Self::DIALECT,
            "WITH c AS ( \
               UPDATE events SET status = 'claimed', attempts = attempts + 1, \
                 claim_token = COALESCE(left(encode(sha256(convert_to( \
                   $6::text || ':' || id || ':' || (attempts + 1), 'UTF8')), 'hex'), 32)::uuid::text, \
                   gen_random_uuid()::text), \
                 lease_expires_at = $3, updated_at = $2, claimed_at = $2, claimed_by = $5 \
               WHERE id IN ( \
                 SELECT id FROM events WHERE agent_id = $1 AND status = 'pending' \
                   AND {AVAILABLE} AND (expires_at IS NULL OR expires_at > $2) \
                 ORDER BY priority DESC, seq LIMIT $4 FOR UPDATE SKIP LOCKED) \
               RETURNING {EVENT_COLS}) \
             SELECT * FROM c ORDER BY priority DESC, seq",
            AVAILABLE = available("", "$2")
        ))
        .bind(agent.id)
        .bind(now)
        .bind(lease_until)
        .bind(i64::from(limit))
        .bind(agent.actor().to_string())
        .bind(attempt.map(|a| a.to_string()))
        .fetch_all(&mut **tx)
        .await?;
        let lease_expires_at = to_timestamp(lease_until);
        rows.iter()
            .map(|row| {
                Ok(ClaimedEvent {
                    event: event_from_row(row)?,
                    claim_token: row.try_get("claim_token")?,
                    lease_expires_at,
                })
            })
            .collect()
    }

    /// One statement for the whole batch, autocommitted: one round trip.
    async fn complete_claims(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<EventState>> {
        let rows = complete_claims(agent, entries, now)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(state_from_row).collect()
    }

    /// The same statement in the caller's transaction (an ack with a claim).
    async fn complete_claims_in(
        &self,
        tx: &mut Self::Tx,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<EventState>> {
        let rows = complete_claims(agent, entries, now)
            .fetch_all(&mut **tx)
            .await?;
        rows.iter().map(state_from_row).collect()
    }

    async fn release_claim(
        &self,
        tx: &mut Self::Tx,
        r: &ReleaseRow<'_>,
    ) -> StoreResult<Option<(EventState, u64)>> {
        let row = sqlx::query(sql!(
            Self::DIALECT,
            "WITH o AS (SELECT {OLD_STEP_COLS} FROM events WHERE {HOLDS} FOR UPDATE), \
             r AS (UPDATE events SET \
               status = CASE WHEN $5 OR {QUARANTINES} THEN 'quarantined' ELSE 'pending' END, \
               claim_token = NULL, lease_expires_at = NULL, available_at = $6, \
               last_error = COALESCE($7, last_error), updated_at = $1, {CLEAR_STEPS} \
             WHERE id IN (SELECT id FROM o) RETURNING {STATE_COLS}, seq), \
             h AS ({}) \
             SELECT * FROM r",
            moved_then(
                "o",
                "SELECT id AS event_id, $1 AS at, CASE WHEN status = 'quarantined' \
                 THEN 'quarantined' ELSE 'released' END AS action, $8 AS actor, $9 AS detail \
                 FROM r"
            )
        ))
        .bind(r.now)
        .bind(r.event)
        .bind(r.agent.id)
        .bind(r.token)
        .bind(r.terminal)
        .bind(r.available_at)
        .bind(r.error)
        .bind(r.agent.actor().to_string())
        .bind(&r.detail)
        .fetch_optional(&mut **tx)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let seq = row.try_get::<i64, _>("seq")? as u64;
        Ok(Some((state_from_row(&row)?, seq)))
    }
}

/// Completes every entry whose token holds its claim (its `acked` step is the row's
/// `completed_at`): one statement, for [`InboxDriver::complete_claims`] and its
/// in-transaction form.
fn complete_claims(
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    now: Millis,
) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let ids: Vec<String> = entries.iter().map(|(e, _)| e.to_string()).collect();
    let tokens: Vec<String> = entries.iter().map(|(_, t)| t.to_string()).collect();
    sqlx::query(sql!(
        PgDriver::DIALECT,
        "UPDATE events e SET status = 'completed', payload = NULL, \
           lease_expires_at = NULL, updated_at = $1, completed_at = $1 \
           FROM UNNEST($2::text[], $3::text[]) AS x(id, token) \
           WHERE e.id = x.id AND e.agent_id = $4 AND e.claim_token = x.token \
             AND e.status = 'claimed' AND e.lease_expires_at > $1 \
           RETURNING e.id, e.status, e.attempts, e.lease_expires_at, e.available_at"
    ))
    .bind(now)
    .bind(ids)
    .bind(tokens)
    .bind(agent.id)
}
