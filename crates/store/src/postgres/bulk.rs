//! PostgreSQL's shapes of the bulk actions and jobs: a batch in one statement that
//! locks its events, and the instance as the owner of the jobs it runs.

use super::PgDriver;
use super::timeline::{CLEAR_STEPS, moved_then};
use crate::clock::Millis;
use crate::engine::ops::bulk::{self, Batch, BulkStatements, Changed, Window};
use crate::rows::Cols;
use crate::{Actor, Scope, StoreResult};
use async_trait::async_trait;
use sqlx::{Postgres, QueryBuilder};
use switchboard_proto::{BulkAction, TenantId};

/// Where each event's own step goes in [`moved_then`]'s statement.
const OWN: &str = "<own step>";

#[async_trait]
impl bulk::BulkDriver for PgDriver {
    /// The batch in one statement: it locks the matching events (`FOR UPDATE OF e`,
    /// in id order), changes them and writes their history. An event changed
    /// concurrently (an ack, a claim, another job) is re-checked against the
    /// action's statuses after that commit, never changed twice.
    async fn apply_batch(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        scope: &Scope<'_>,
        window: &Window,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Batch> {
        // `picked` reads the steps the rows hold before the change, to move them
        // (`timeline.rs`): a replay resets the attempts a claim's step names.
        let mut qb = QueryBuilder::<Postgres>::new(
            "WITH picked AS (SELECT e.id, e.claimed_at, e.claimed_by, e.attempts, \
             e.max_attempts, e.completed_at",
        );
        <Self as BulkStatements>::push_scope(&mut qb, tenant, scope, window);
        // In id order, so two batches (of any instances) take their locks in one order.
        // Only the events are locked: the agents' rows stay free for senders. A locked
        // row that no longer matches once its lock is released is skipped, and the limit
        // takes the next one.
        qb.push(" ORDER BY e.id");
        if let Some(limit) = window.limit {
            qb.push(" LIMIT ")
                .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        qb.push(" FOR UPDATE OF e), done AS (UPDATE events SET ");
        match scope.action {
            BulkAction::Replay => {
                qb.push(
                    "status = 'pending', attempts = 0, claim_token = NULL, \
                     lease_expires_at = NULL, available_at = ",
                )
                .push_bind(now);
            }
            BulkAction::Release => {
                qb.push(
                    "status = 'pending', claim_token = NULL, lease_expires_at = NULL, \
                     available_at = ",
                )
                .push_bind(now);
            }
            BulkAction::Purge => {
                qb.push(
                    "status = 'purged', payload = NULL, claim_token = NULL, \
                     lease_expires_at = NULL",
                );
            }
        }
        qb.push(", ")
            .push(CLEAR_STEPS)
            .push(", updated_at = ")
            .push_bind(now);
        qb.push(" WHERE id IN (SELECT id FROM picked) RETURNING id, agent_id, seq), history AS (");
        // The moved steps, then each changed event's own (`moved_then`).
        let insert = moved_then("picked", OWN);
        let (before, after) = insert.split_once(OWN).unwrap_or((&insert, ""));
        qb.push(before)
            .push("SELECT id AS event_id, ")
            .push_bind(now);
        qb.push("::bigint AS at, ")
            .push_bind(bulk::verb(scope.action))
            .push("::text AS action, ")
            .push_bind(actor.to_string())
            .push("::text AS actor, NULL::text AS detail FROM done");
        qb.push(after).push(") SELECT id, agent_id, seq FROM done");
        let rows = qb.build().fetch_all(&mut **tx).await?;
        let changed = rows
            .iter()
            .map(|r| {
                Ok(Changed {
                    id: r.text("id")?,
                    agent: r.text("agent_id")?,
                    seq: r.int("seq")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        // Locked rows that no longer match were skipped and the limit took the next
        // ones: fewer than the limit means the window is exhausted.
        let full = window.limit.is_some_and(|l| changed.len() as u64 >= l);
        Ok(Batch { changed, full })
    }
}
