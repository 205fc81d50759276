//! [`EventStatements`](crate::engine::events::EventStatements).

macro_rules! event_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::events::EventStatements for $store {
            async fn take_seq(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE agents SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2 \
                     AND deleted_at IS NULL"
                ))
                .bind(agent)
                .bind(tenant)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn head_seq(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<u64> {
                let seq: i64 = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT head_seq FROM agents WHERE id = $1"
                ))
                .bind(agent)
                .fetch_one(&mut **tx)
                .await?;
                Ok(seq as u64)
            }

            async fn take_seq_returning(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<u64> {
                let seq: i64 = sqlx::query_scalar($crate::engine::stmt!(
                    "UPDATE agents SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2 \
                     AND deleted_at IS NULL \
                     RETURNING head_seq"
                ))
                .bind(agent)
                .bind(tenant)
                .fetch_one(&mut **tx)
                .await?;
                Ok(seq as u64)
            }

            async fn insert_event(
                &self,
                tx: &mut Self::Tx,
                e: &$crate::engine::events::NewEvent<'_>,
            ) -> $crate::StoreResult<()> {
                let insert = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO events (id, tenant_id, agent_id, seq, sender_agent_id, \
                     sender_name, room_id, room_seq, correlation_id, priority, status, payload, \
                     attempts, max_attempts, created_at, available_at, expires_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, 0, $12, \
                     $13, $14, $15, $16)"
                ));
                $crate::statements::bind_new_event!(insert, e)
                .bind(e.now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn history(
                &self,
                tx: &mut Self::Tx,
                event_id: &str,
                at: $crate::clock::Millis,
                action: &str,
                actor: &str,
                detail: Option<String>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO event_history (event_id, at, action, actor, detail) \
                     VALUES ($1, $2, $3, $4, $5)"
                ))
                .bind(event_id)
                .bind(at)
                .bind(action)
                .bind(actor)
                .bind(detail)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn row_steps(
                &self,
                tx: &mut Self::Tx,
                event_id: &str,
            ) -> $crate::StoreResult<Option<$crate::engine::timeline::RowSteps>> {
                use $crate::engine::timeline::STEP_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {STEP_COLS} FROM events WHERE id = $1 @FOR_UPDATE"
                ))
                .bind(event_id)
                .fetch_optional(&mut **tx)
                .await?;
                row.as_ref()
                    .map($crate::engine::timeline::RowSteps::from_row)
                    .transpose()
            }

            async fn clear_steps(
                &self,
                tx: &mut Self::Tx,
                event_id: &str,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET claimed_at = NULL, completed_at = NULL WHERE id = $1"
                ))
                .bind(event_id)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }
        }
    };
}
pub(crate) use event_statements;

/// Binds a [`NewEvent`](crate::engine::events::NewEvent)'s columns to `$1..$15`
/// of an `INSERT INTO events (id, tenant_id, agent_id, seq, sender_agent_id,
/// sender_name, room_id, room_seq, correlation_id, priority, status, payload,
/// attempts, max_attempts, created_at, available_at, expires_at, …)` whose status and
/// attempts are literals; the caller binds what follows.
macro_rules! bind_new_event {
    ($query:expr, $e:expr) => {{
        let e = $e;
        $query
            .bind(&e.id)
            .bind(&e.tenant)
            .bind(&e.agent)
            .bind(e.seq)
            .bind(&e.sender_agent_id)
            .bind(&e.sender_name)
            .bind(&e.room_id)
            .bind(e.room_seq)
            .bind(&e.msg.correlation_id)
            .bind(i64::from(e.msg.priority))
            .bind(&e.msg.payload)
            .bind(i64::from(e.msg.max_attempts))
            .bind(e.now)
            .bind(e.msg.available_at)
            .bind(e.msg.expires_at)
    }};
}
pub(crate) use bind_new_event;
