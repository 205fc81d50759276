//! [`MaintenanceStatements`](crate::engine::maintenance::MaintenanceStatements):
//! the portable scavenger and expiry (`@SKIP_LOCKED` select, then one update per
//! row) and retention's statements, the agent's row locked `@FOR_UPDATE` first.
//! Each locking read names its index for MySQL (`@FORCE_INDEX`): InnoDB locks every
//! row its plan reads, and a pass that read pending rows on the way would make a
//! claim skip them.

macro_rules! maintenance_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::maintenance::MaintenanceStatements for $store {
            async fn expired_leases(
                &self,
                tx: &mut Self::Tx,
                now: $crate::clock::Millis,
                agent: Option<switchboard_proto::AgentId>,
                limit: u32,
            ) -> $crate::StoreResult<Vec<$crate::engine::maintenance::ExpiredLease>>
            {
                use $crate::rows::Cols;
                let query = match agent {
                    // A claim's own agent: it waits for a pass returning the same
                    // lease (no SKIP LOCKED), then sees the event pending and takes
                    // it first (`InboxDriver::order_claims` keeps claims apart).
                    Some(agent) => sqlx::query($crate::engine::stmt!(
                        "SELECT id, tenant_id, agent_id, seq, attempts, max_attempts, last_error \
                         FROM events @FORCE_INDEX(events_claim) WHERE status = 'claimed' \
                         AND lease_expires_at <= $1 AND agent_id = $2 \
                         ORDER BY lease_expires_at LIMIT $3 @FOR_UPDATE"
                    ))
                    .bind(now)
                    .bind(agent),
                    None => sqlx::query($crate::engine::stmt!(
                        "SELECT id, tenant_id, agent_id, seq, attempts, max_attempts, last_error \
                         FROM events @FORCE_INDEX(events_lease) WHERE status = 'claimed' \
                         AND lease_expires_at <= $1 ORDER BY lease_expires_at LIMIT $2 @SKIP_LOCKED"
                    ))
                    .bind(now),
                };
                let rows = query.bind(i64::from(limit)).fetch_all(&mut **tx).await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::engine::maintenance::ExpiredLease {
                            id: r.id("id")?,
                            tenant: r.id("tenant_id")?,
                            agent: r.id("agent_id")?,
                            seq: r.int("seq")? as u64,
                            attempts: r.int("attempts")? as u32,
                            max_attempts: r.int("max_attempts")? as u32,
                            last_error: r.opt_text("last_error")?,
                        })
                    })
                    .collect()
            }

            async fn return_lease(
                &self,
                tx: &mut Self::Tx,
                event: switchboard_proto::EventId,
                status: switchboard_proto::EventStatus,
                last_error: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(// Available from when the lease ran out, not from this pass: a
                    // claim whose clock read came before the pass must still find it
                    // first. Assigned before `lease_expires_at` is cleared, as MySQL
                    // reads a column assigned earlier in the same SET as its new value.
                    "UPDATE events SET status = $1, \
                     available_at = COALESCE(lease_expires_at, $2), \
                     claim_token = NULL, lease_expires_at = NULL, \
                     updated_at = $3, last_error = $4 WHERE id = $5"
                ))
                .bind(status.as_str())
                .bind(now)
                .bind(now)
                .bind(last_error)
                .bind(event)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn expired_events(
                &self,
                tx: &mut Self::Tx,
                now: $crate::clock::Millis,
                limit: u32,
            ) -> $crate::StoreResult<
                Vec<(switchboard_proto::EventId, switchboard_proto::TenantId)>,
            > {
                let ids = sqlx::query_as($crate::engine::stmt!(
                    "SELECT id, tenant_id FROM events @FORCE_INDEX(events_expiry) \
                     WHERE status = 'pending' \
                     AND expires_at IS NOT NULL AND expires_at <= $1 LIMIT $2 @SKIP_LOCKED"
                ))
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut **tx)
                .await?;
                Ok(ids)
            }

            async fn expire_event(
                &self,
                tx: &mut Self::Tx,
                event: switchboard_proto::EventId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET status = 'expired', payload = NULL, updated_at = $1 \
                     WHERE id = $2"
                ))
                .bind(now)
                .bind(event)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn retention_candidates(
                &self,
                cutoff: $crate::clock::Millis,
            ) -> $crate::StoreResult<Vec<$crate::engine::maintenance::RetentionCandidate>> {
                use $crate::rows::{Cols, OPEN_STATUSES};
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT a.id, a.tenant_id, a.name FROM agents a WHERE a.low_water < COALESCE( \
                     (SELECT MIN(e.seq) FROM events e WHERE e.agent_id = a.id \
                     AND (e.status IN {OPEN_STATUSES} OR e.updated_at > $1)) - 1, a.head_seq)"
                ))
                .bind(cutoff)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::engine::maintenance::RetentionCandidate {
                            agent: r.id("id")?,
                            tenant: r.id("tenant_id")?,
                            name: r.text("name")?,
                        })
                    })
                    .collect()
            }

            async fn history_between(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                after: u64,
                through: u64,
            ) -> $crate::StoreResult<
                Vec<(switchboard_proto::EventId, switchboard_proto::HistoryEntry)>,
            > {
                use $crate::engine::timeline::{RowSteps, STEP_COLS, timelines};
                use $crate::rows::Cols;
                let events = sqlx::query($crate::engine::stmt!(
                    "SELECT {STEP_COLS} FROM events \
                     WHERE agent_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq"
                ))
                .bind(agent)
                .bind(after as i64)
                .bind(through as i64)
                .fetch_all(&mut **tx)
                .await?
                .iter()
                .map(RowSteps::from_row)
                .collect::<$crate::StoreResult<Vec<_>>>()?;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT h.event_id, h.action, h.actor, h.detail, h.at FROM event_history h \
                     JOIN events e ON e.id = h.event_id \
                     WHERE e.agent_id = $1 AND e.seq > $2 AND e.seq <= $3 ORDER BY h.id"
                ))
                .bind(agent)
                .bind(after as i64)
                .bind(through as i64)
                .fetch_all(&mut **tx)
                .await?
                .iter()
                .map(|r| {
                    Ok((
                        r.id("event_id")?,
                        $crate::rows::history_entry(r)?,
                    ))
                })
                .collect::<$crate::StoreResult<Vec<_>>>()?;
                Ok(timelines(events, rows))
            }

            async fn first_kept_seq(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                cutoff: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<u64>> {
                use $crate::rows::OPEN_STATUSES;
                let first: Option<i64> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT MIN(seq) FROM events WHERE agent_id = $1 \
                     AND (status IN {OPEN_STATUSES} OR updated_at > $2)"
                ))
                .bind(agent)
                .bind(cutoff)
                .fetch_one(&mut **tx)
                .await?;
                Ok(first.map(|s| s as u64))
            }

            async fn delete_history_through(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                through: u64,
            ) -> $crate::StoreResult<()> {
                // MariaDB (before 11.1) cannot turn a single-table DELETE's
                // `IN (SELECT …)` into a join: it scans all of event_history and
                // looks every row's event up, locking every event of every agent it
                // touches until the pass commits, so claims `SKIP LOCKED` found
                // pending work invisible (`protocol::races` caught it). The
                // multi-table form reads only this agent's prefix, by its index.
                let statement = match <Self as $crate::engine::Driver>::DIALECT {
                    $crate::dialect::Dialect::MySql => $crate::engine::stmt!(
                        "DELETE h FROM event_history h JOIN events e ON e.id = h.event_id \
                         WHERE e.agent_id = $1 AND e.seq <= $2"
                    ),
                    _ => $crate::engine::stmt!(
                        "DELETE FROM event_history WHERE event_id IN \
                         (SELECT id FROM events WHERE agent_id = $1 AND seq <= $2)"
                    ),
                };
                sqlx::query(statement)
                .bind(agent)
                .bind(through as i64)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn delete_events_through(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                through: u64,
            ) -> $crate::StoreResult<u64> {
                Ok(sqlx::query($crate::engine::stmt!(
                    "DELETE FROM events WHERE agent_id = $1 AND seq <= $2"
                ))
                .bind(agent)
                .bind(through as i64)
                .execute(&mut **tx)
                .await?
                .rows_affected())
            }

            async fn raise_low_water(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                to: u64,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE agents SET low_water = @GREATEST(low_water, $1) WHERE id = $2"
                ))
                .bind(to as i64)
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

        }
    };
}
pub(crate) use maintenance_statements;
