//! [`LineageStatements`](crate::engine::lineage::LineageStatements): the
//! parent → child links between credentials.

macro_rules! lineage_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::lineage::LineageStatements for $store {
            async fn revoke_token_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                hash: &[u8],
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE tokens SET revoked_at = $1 \
                     WHERE hash = $2 AND tenant_id = $3 AND revoked_at IS NULL"
                ))
                .bind(now)
                .bind(hash)
                .bind(tenant)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn live_children(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                hash: &[u8],
            ) -> $crate::StoreResult<Vec<Vec<u8>>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT hash FROM tokens WHERE tenant_id = $1 AND parent_hash = $2 \
                     AND revoked_at IS NULL ORDER BY hash"
                ))
                .bind(tenant)
                .bind(hash)
                .fetch_all(&mut **tx)
                .await?)
            }

            async fn live_tokens_of(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<Vec<Vec<u8>>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT hash FROM tokens WHERE tenant_id = $1 AND agent_id = $2 \
                     AND revoked_at IS NULL ORDER BY hash"
                ))
                .bind(tenant)
                .bind(agent)
                .fetch_all(&mut **tx)
                .await?)
            }
        }
    };
}
pub(crate) use lineage_statements;
