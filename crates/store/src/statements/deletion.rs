//! [`DeletionStatements`](crate::engine::deletion::DeletionStatements):
//! deleting an agent.

macro_rules! deletion_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::deletion::DeletionStatements for $store {
            async fn mark_agent_deleted(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE agents SET deleted_at = $1, name = $2 \
                     WHERE id = $3 AND tenant_id = $4 AND deleted_at IS NULL"
                ))
                .bind(now)
                .bind(format!("deleted:{agent}"))
                .bind(agent)
                .bind(tenant)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn purge_events_of(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<u64> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE events SET status = 'purged', payload = NULL, claim_token = NULL, \
                     lease_expires_at = NULL, updated_at = $1 \
                     WHERE agent_id = $2 AND status IN ('pending', 'claimed', 'quarantined')"
                ))
                .bind(now)
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected())
            }

            async fn leave_everything(
                &self,
                tx: &mut Self::Tx,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<()> {
                for sql in [
                    $crate::engine::stmt!(
                        "DELETE FROM room_members WHERE agent_id = $1"
                    ),
                    $crate::engine::stmt!(
                        "DELETE FROM memory_subscribers WHERE agent_id = $1"
                    ),
                ] {
                    sqlx::query(sql)
                        .bind(agent)
                        .execute(&mut **tx)
                        .await?;
                }
                Ok(())
            }
        }
    };
}
pub(crate) use deletion_statements;
