//! [`CallbackStatements`](crate::engine::callbacks::CallbackStatements).

macro_rules! callback_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::callbacks::CallbackStatements for $store {
            async fn delete_agent_callback(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM callback_attempts WHERE callback_id IN \
                     (SELECT id FROM callbacks WHERE agent_id = $1)"
                ))
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM callbacks WHERE agent_id = $1"
                ))
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_callback(
                &self,
                tx: &mut Self::Tx,
                new: &$crate::NewCallback,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO callbacks (id, tenant_id, agent_id, url, secret_sealed, key_id, \
                     state, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'active', $7)"
                ))
                .bind(new.id)
                .bind(new.tenant)
                .bind(new.agent)
                .bind(&new.url)
                .bind(&new.sealed)
                .bind(&new.key_id)
                .bind(new.now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn select_callbacks(
                &self,
                tx: Option<&mut Self::Tx>,
                tenant: switchboard_proto::TenantId,
                which: $crate::engine::callbacks::Which,
            ) -> $crate::StoreResult<Vec<$crate::StoredCallback>> {
                use $crate::engine::callbacks::{CALLBACK_COLS, Which};
                const FROM: &str = "FROM callbacks c JOIN agents a ON a.id = c.agent_id";
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                let query = match which {
                    Which::All => sqlx::query($crate::dialect::sql!(
                        dialect,
                        "SELECT {CALLBACK_COLS} {FROM} WHERE c.tenant_id = $1 \
                         ORDER BY c.created_at, c.id"
                    ))
                    .bind(tenant),
                    Which::Agent(agent) => sqlx::query($crate::dialect::sql!(
                        dialect,
                        "SELECT {CALLBACK_COLS} {FROM} WHERE c.tenant_id = $1 \
                         AND c.agent_id = $2 ORDER BY c.created_at, c.id"
                    ))
                    .bind(tenant)
                    .bind(agent),
                    Which::One(id) => sqlx::query($crate::dialect::sql!(
                        dialect,
                        "SELECT {CALLBACK_COLS} {FROM} WHERE c.tenant_id = $1 AND c.id = $2"
                    ))
                    .bind(tenant)
                    .bind(id),
                };
                let rows = match tx {
                    Some(tx) => query.fetch_all(&mut **tx).await?,
                    None => query.fetch_all(self.read_pool()).await?,
                };
                rows.iter()
                    .map($crate::engine::callbacks::stored_from_row)
                    .collect()
            }

            async fn delete_callback_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                id: switchboard_proto::CallbackId,
            ) -> $crate::StoreResult<bool> {
                let deleted = sqlx::query($crate::engine::stmt!(
                    "DELETE FROM callbacks WHERE tenant_id = $1 AND id = $2"
                ))
                .bind(tenant)
                .bind(id)
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if deleted > 0 {
                    sqlx::query($crate::engine::stmt!(
                        "DELETE FROM callback_attempts WHERE callback_id = $1"
                    ))
                    .bind(id)
                    .execute(&mut **tx)
                    .await?;
                }
                Ok(deleted > 0)
            }

            async fn change_callback_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                id: switchboard_proto::CallbackId,
                change: &$crate::StateChange,
            ) -> $crate::StoreResult<()> {
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                match change {
                    $crate::StateChange::Enable => {
                        sqlx::query($crate::dialect::sql!(
                            dialect,
                            "UPDATE callbacks SET state = 'active', disabled_reason = NULL, \
                             failure_streak = 0, failing_since = NULL, next_attempt_at = 0 \
                             WHERE tenant_id = $1 AND id = $2"
                        ))
                        .bind(tenant)
                        .bind(id)
                        .execute(&mut **tx)
                        .await?;
                    }
                    $crate::StateChange::Disable { reason } => {
                        sqlx::query($crate::dialect::sql!(
                            dialect,
                            "UPDATE callbacks SET state = 'disabled', disabled_reason = $1 \
                             WHERE tenant_id = $2 AND id = $3"
                        ))
                        .bind(reason)
                        .bind(tenant)
                        .bind(id)
                        .execute(&mut **tx)
                        .await?;
                    }
                }
                Ok(())
            }

            async fn due_callback_rows(
                &self,
                now: $crate::clock::Millis,
                limit: u32,
            ) -> $crate::StoreResult<Vec<$crate::StoredCallback>> {
                use $crate::engine::callbacks::CALLBACK_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {CALLBACK_COLS} FROM callbacks c JOIN agents a ON a.id = c.agent_id \
                     WHERE c.state = 'active' AND c.next_attempt_at <= $1 \
                     AND (c.leased_until IS NULL OR c.leased_until <= $2) \
                     AND EXISTS (SELECT 1 FROM events e WHERE e.agent_id = c.agent_id \
                     AND e.status = 'pending' AND {AVAILABLE} \
                     AND (e.expires_at IS NULL OR e.expires_at > $4)) \
                     ORDER BY c.next_attempt_at, c.id LIMIT $5",
                    AVAILABLE = $crate::engine::inbox::available("e.", "$3")
                ))
                .bind(now)
                .bind(now)
                .bind(now)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::engine::callbacks::stored_from_row)
                    .collect()
            }

            async fn lease_callback_row(
                &self,
                id: switchboard_proto::CallbackId,
                token: uuid::Uuid,
                until: $crate::clock::Millis,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let taken = sqlx::query($crate::engine::stmt!(
                    "UPDATE callbacks SET lease_token = $1, leased_until = $2 \
                     WHERE id = $3 AND state = 'active' \
                     AND (leased_until IS NULL OR leased_until <= $4)"
                ))
                .bind(token.to_string())
                .bind(until)
                .bind(id)
                .bind(now)
                .execute(self.write_pool())
                .await?
                .rows_affected();
                Ok(taken == 1)
            }

            async fn unlease_callback_row(
                &self,
                id: switchboard_proto::CallbackId,
                token: uuid::Uuid,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE callbacks SET lease_token = NULL, leased_until = NULL \
                     WHERE id = $1 AND lease_token = $2"
                ))
                .bind(id)
                .bind(token.to_string())
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn insert_attempt(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::AttemptRecord,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO callback_attempts (callback_id, event_id, kind, at, status, \
                     error, latency_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(r.callback)
                .bind(r.attempt.event_id)
                .bind(&r.attempt.kind)
                .bind(r.at)
                .bind(r.attempt.status.map(i64::from))
                .bind(&r.attempt.error)
                .bind(i64::try_from(r.attempt.latency_ms).unwrap_or(i64::MAX))
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn update_after_attempt(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::AttemptRecord,
            ) -> $crate::StoreResult<()> {
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                let token = r.lease_token.map(|t| t.to_string());
                let status = r.attempt.status.map(i64::from);
                if r.succeeded {
                    sqlx::query($crate::dialect::sql!(
                        dialect,
                        "UPDATE callbacks SET last_delivery_at = $1, last_status = $2, \
                         last_error = NULL, failure_streak = 0, failing_since = NULL, \
                         next_attempt_at = 0, lease_token = NULL, leased_until = NULL \
                         WHERE id = $3 AND lease_token = $4"
                    ))
                    .bind(r.at)
                    .bind(status)
                    .bind(r.callback)
                    .bind(token)
                    .execute(&mut **tx)
                    .await?;
                } else {
                    // A disable keeps an operator's earlier disable (and its reason).
                    // `disabled_reason` is set before `state`: MySQL evaluates each
                    // assignment with the row as the earlier ones left it.
                    sqlx::query($crate::dialect::sql!(
                        dialect,
                        "UPDATE callbacks SET last_delivery_at = $1, last_status = $2, \
                         last_error = $3, failure_streak = failure_streak + 1, \
                         failing_since = COALESCE(failing_since, $4), next_attempt_at = $5, \
                         disabled_reason = CASE WHEN state = 'disabled' THEN disabled_reason \
                         ELSE $6 END, \
                         state = CASE WHEN $7 IS NULL THEN state ELSE 'disabled' END, \
                         lease_token = NULL, leased_until = NULL \
                         WHERE id = $8 AND lease_token = $9"
                    ))
                    .bind(r.at)
                    .bind(status)
                    .bind(&r.attempt.error)
                    .bind(r.at)
                    .bind(r.next_attempt_at)
                    .bind(&r.disable)
                    .bind(&r.disable)
                    .bind(r.callback)
                    .bind(token)
                    .execute(&mut **tx)
                    .await?;
                }
                Ok(())
            }

            async fn attempt_rows(
                &self,
                id: switchboard_proto::CallbackId,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::CallbackAttempt>> {
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT event_id, kind, at, status, error, latency_ms FROM callback_attempts \
                     WHERE callback_id = $1 ORDER BY id DESC LIMIT $2"
                ))
                .bind(id)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::engine::callbacks::attempt_from_row)
                    .collect()
            }

            async fn count_callback_rows(
                &self,
                state: switchboard_proto::CallbackState,
            ) -> $crate::StoreResult<u64> {
                let n: i64 = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT COUNT(*) FROM callbacks WHERE state = $1"
                ))
                .bind(state.as_str())
                .fetch_one(self.read_pool())
                .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            async fn count_other_key_rows(
                &self,
                key_id: &str,
            ) -> $crate::StoreResult<u64> {
                let n: i64 = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT COUNT(*) FROM callbacks WHERE key_id <> $1"
                ))
                .bind(key_id)
                .fetch_one(self.read_pool())
                .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }
        }
    };
}
pub(crate) use callback_statements;
