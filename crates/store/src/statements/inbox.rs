//! [`InboxStatements`](crate::engine::inbox::InboxStatements): cursor reads,
//! the portable claim (`@SKIP_LOCKED` select, then one update per row), and the
//! claim-token checks of ack, release and extend (the token is current and its lease
//! runs, in the statement's own `WHERE`).

macro_rules! inbox_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::inbox::InboxStatements for $store {
            async fn marks(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                lock: bool,
            ) -> $crate::StoreResult<$crate::engine::inbox::Marks> {
                let sql = if lock {
                    $crate::engine::stmt!(
                        "SELECT head_seq, low_water FROM agents WHERE id = $1 @FOR_UPDATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT head_seq, low_water FROM agents WHERE id = $1"
                    )
                };
                let (head, low_water): (i64, i64) = sqlx::query_as(sql)
                    .bind(agent)
                    .fetch_one(&mut **tx)
                    .await?;
                Ok($crate::engine::inbox::Marks {
                    head: head as u64,
                    low_water: low_water as u64,
                })
            }

            async fn events_after(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                after: u64,
                through: u64,
                rows: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::InboxEvent>> {
                use $crate::rows::EVENT_COLS;
                let found = sqlx::query($crate::engine::stmt!(
                    "SELECT {EVENT_COLS} FROM events WHERE agent_id = $1 AND seq > $2 \
                     AND seq <= $3 ORDER BY seq LIMIT $4"
                ))
                .bind(agent)
                .bind(after as i64)
                .bind(through as i64)
                .bind(i64::from(rows))
                .fetch_all(&mut **tx)
                .await?;
                found
                    .iter()
                    .map($crate::rows::event_from_row)
                    .collect()
            }

            async fn status_counts(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<switchboard_proto::StatusCounts> {
                let rows: Vec<(String, i64)> = sqlx::query_as($crate::engine::stmt!(
                    "SELECT status, COUNT(*) FROM events WHERE agent_id = $1 GROUP BY status"
                ))
                .bind(agent)
                .fetch_all(&mut **tx)
                .await?;
                let mut counts = switchboard_proto::StatusCounts::default();
                for (status, n) in rows {
                    $crate::rows::add_count(&mut counts, &status, n as u64);
                }
                Ok(counts)
            }

            async fn first_open_seq(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<Option<u64>> {
                use $crate::rows::OPEN_STATUSES;
                let first: Option<i64> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT MIN(seq) FROM events WHERE agent_id = $1 AND status IN {OPEN_STATUSES}"
                ))
                .bind(agent)
                .fetch_one(&mut **tx)
                .await?;
                Ok(first.map(|s| s as u64))
            }

            async fn claimable(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
                limit: u32,
            ) -> $crate::StoreResult<Vec<(switchboard_proto::EventId, u32)>> {
                let ids: Vec<(switchboard_proto::EventId, i64)> = sqlx::query_as($crate::engine::stmt!(
                    "SELECT id, attempts FROM events @FORCE_INDEX(events_claim) \
                     WHERE agent_id = $1 AND status = 'pending' AND {AVAILABLE} \
                     AND (expires_at IS NULL OR expires_at > $3) \
                     ORDER BY priority DESC, seq LIMIT $4 @SKIP_LOCKED",
                    AVAILABLE = $crate::engine::inbox::available("", "$2")
                ))
                .bind(agent)
                .bind(now)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut **tx)
                .await?;
                Ok(ids
                    .into_iter()
                    .map(|(id, attempts)| (id, attempts as u32))
                    .collect())
            }

            async fn next_available(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<$crate::clock::Millis>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT MIN(available_at) FROM events @FORCE_INDEX(events_claim) \
                     WHERE agent_id = $1 AND status = 'pending' AND NOT {AVAILABLE}",
                    AVAILABLE = $crate::engine::inbox::available("", "$2")
                ))
                .bind(agent)
                .bind(now)
                .fetch_one(&mut **tx)
                .await?)
            }

            async fn claims_held(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Vec<switchboard_proto::ClaimedEvent>> {
                use $crate::rows::{Cols, EVENT_COLS};
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {EVENT_COLS} FROM events \
                     WHERE agent_id = $1 AND status = 'claimed' AND lease_expires_at > $2 \
                     ORDER BY priority DESC, seq"
                ))
                .bind(agent)
                .bind(now)
                .fetch_all(&mut **tx)
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok(switchboard_proto::ClaimedEvent {
                            event: $crate::rows::event_from_row(row)?,
                            claim_token: row.id("claim_token")?,
                            lease_expires_at: $crate::clock::to_timestamp(
                                row.int("lease_expires_at")?,
                            ),
                        })
                    })
                    .collect()
            }

            async fn take_claim(
                &self,
                tx: &mut Self::Tx,
                event: switchboard_proto::EventId,
                claimer: &str,
                token: switchboard_proto::ClaimToken,
                lease_until: $crate::clock::Millis,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<switchboard_proto::InboxEvent> {
                use $crate::rows::EVENT_COLS;
                let returning = <Self as $crate::engine::Driver>::DIALECT.update_returning();
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET status = 'claimed', attempts = attempts + 1, \
                     claim_token = $1, lease_expires_at = $2, updated_at = $3, claimed_at = $4, \
                     claimed_by = $5 WHERE id = $6{}",
                    if returning { format!(" RETURNING {EVENT_COLS}") } else { String::new() }
                ))
                .bind(token)
                .bind(lease_until)
                .bind(now)
                .bind(now)
                .bind(claimer)
                .bind(event);
                let row = if returning {
                    update.fetch_one(&mut **tx).await?
                } else {
                    // The row is locked (`claimable` took it `FOR UPDATE`).
                    update.execute(&mut **tx).await?;
                    sqlx::query($crate::engine::stmt!(
                        "SELECT {EVENT_COLS} FROM events WHERE id = $1"
                    ))
                    .bind(event)
                    .fetch_one(&mut **tx)
                    .await?
                };
                $crate::rows::event_from_row(&row)
            }

            async fn complete_claim(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                event: switchboard_proto::EventId,
                token: switchboard_proto::ClaimToken,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<switchboard_proto::EventState>> {
                use $crate::rows::STATE_COLS;
                let returning = <Self as $crate::engine::Driver>::DIALECT.update_returning();
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET status = 'completed', payload = NULL, \
                     lease_expires_at = NULL, updated_at = $1, completed_at = $2 \
                     WHERE id = $3 AND agent_id = $4 \
                     AND claim_token = $5 AND status = 'claimed' AND lease_expires_at > $6{}",
                    if returning { format!(" RETURNING {STATE_COLS}") } else { String::new() }
                ))
                .bind(now)
                .bind(now)
                .bind(event)
                .bind(agent)
                .bind(token)
                .bind(now);
                if !returning {
                    let done = update.execute(&mut **tx).await?.rows_affected() == 1;
                    return Ok(if done { Some(self.state_of(tx, event).await?.0) } else { None });
                }
                let row = update.fetch_optional(&mut **tx).await?;
                row.as_ref()
                    .map($crate::rows::state_from_row)
                    .transpose()
            }

            async fn release_claim_row(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::engine::inbox::ReleaseRow<'_>,
            ) -> $crate::StoreResult<Option<(switchboard_proto::EventState, u64)>> {
                use $crate::engine::inbox::QUARANTINES;
                use $crate::rows::STATE_COLS;
                let returning = <Self as $crate::engine::Driver>::DIALECT.update_returning();
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET status = CASE WHEN $1 OR {QUARANTINES} \
                     THEN 'quarantined' ELSE 'pending' END, claim_token = NULL, \
                     lease_expires_at = NULL, available_at = $2, \
                     last_error = COALESCE($3, last_error), updated_at = $4 \
                     WHERE id = $5 AND agent_id = $6 AND claim_token = $7 \
                     AND status = 'claimed' AND lease_expires_at > $8{}",
                    if returning { format!(" RETURNING {STATE_COLS}, seq") } else { String::new() }
                ))
                .bind(r.terminal)
                .bind(r.available_at)
                .bind(r.error)
                .bind(r.now)
                .bind(r.event)
                .bind(r.agent.id)
                .bind(r.token)
                .bind(r.now);
                if !returning {
                    let done = update.execute(&mut **tx).await?.rows_affected() == 1;
                    return Ok(if done { Some(self.state_of(tx, r.event).await?) } else { None });
                }
                let row = update.fetch_optional(&mut **tx).await?;
                let Some(row) = row else {
                    return Ok(None);
                };
                let seq: i64 = sqlx::Row::try_get(&row, "seq")?;
                Ok(Some(($crate::rows::state_from_row(&row)?, seq as u64)))
            }

            async fn extend_claim(
                &self,
                agent: switchboard_proto::AgentId,
                event: switchboard_proto::EventId,
                token: switchboard_proto::ClaimToken,
                until: $crate::clock::Millis,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<switchboard_proto::EventState>> {
                use $crate::rows::STATE_COLS;
                let returning = <Self as $crate::engine::Driver>::DIALECT.update_returning();
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET lease_expires_at = $1, updated_at = $2 WHERE id = $3 \
                     AND agent_id = $4 AND claim_token = $5 AND status = 'claimed' \
                     AND lease_expires_at > $6{}",
                    if returning { format!(" RETURNING {STATE_COLS}") } else { String::new() }
                ))
                .bind(until)
                .bind(now)
                .bind(event)
                .bind(agent)
                .bind(token)
                .bind(now);
                if !returning {
                    // The update and the read of what it wrote, in one transaction.
                    use $crate::engine::Driver;
                    let mut tx = self.begin_write().await?;
                    let done = update.execute(&mut *tx).await?.rows_affected() == 1;
                    let state = if done { Some(self.state_of(&mut tx, event).await?.0) } else { None };
                    self.commit(tx, &[]).await?;
                    return Ok(state);
                }
                let row = update.fetch_optional(self.write_pool()).await?;
                row.as_ref()
                    .map($crate::rows::state_from_row)
                    .transpose()
            }

            async fn state_of(
                &self,
                tx: &mut Self::Tx,
                event: switchboard_proto::EventId,
            ) -> $crate::StoreResult<(switchboard_proto::EventState, u64)> {
                use $crate::rows::STATE_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {STATE_COLS}, seq FROM events WHERE id = $1"
                ))
                .bind(event)
                .fetch_one(&mut **tx)
                .await?;
                let seq: i64 = sqlx::Row::try_get(&row, "seq")?;
                Ok(($crate::rows::state_from_row(&row)?, seq as u64))
            }

            async fn completed_by(
                &self,
                agent: switchboard_proto::AgentId,
                event: switchboard_proto::EventId,
                token: switchboard_proto::ClaimToken,
            ) -> $crate::StoreResult<Option<switchboard_proto::EventState>> {
                use $crate::rows::STATE_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {STATE_COLS} FROM events WHERE id = $1 AND agent_id = $2 \
                     AND claim_token = $3 AND status = 'completed'"
                ))
                .bind(event)
                .bind(agent)
                .bind(token)
                .fetch_optional(self.read_pool())
                .await?;
                row.as_ref()
                    .map($crate::rows::state_from_row)
                    .transpose()
            }

            async fn claim_hold(
                &self,
                agent: switchboard_proto::AgentId,
                event: switchboard_proto::EventId,
            ) -> $crate::StoreResult<Option<$crate::engine::inbox::ClaimHold>> {
                let row: Option<(String, Option<String>, Option<i64>)> =
                    sqlx::query_as($crate::engine::stmt!(
                        "SELECT status, claim_token, lease_expires_at FROM events \
                         WHERE id = $1 AND agent_id = $2"
                    ))
                    .bind(event)
                    .bind(agent)
                    .fetch_optional(self.read_pool())
                    .await?;
                Ok(row.map(|(status, claim_token, lease_expires_at)| {
                    $crate::engine::inbox::ClaimHold {
                        status,
                        claim_token,
                        lease_expires_at,
                    }
                }))
            }
        }
    };
}
pub(crate) use inbox_statements;
