//! [`LeaseAuditStatements`](crate::engine::lease_audit::LeaseAuditStatements).

macro_rules! lease_audit_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::lease_audit::LeaseAuditStatements for $store {
            async fn audit_salt(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Option<Vec<u8>>> {
                let found: Option<Option<Vec<u8>>> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT audit_salt FROM tenants WHERE id = $1"
                ))
                .bind(tenant)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(found.flatten())
            }

            async fn keep_audit_salt(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                salt: &[u8],
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE tenants SET audit_salt = COALESCE(audit_salt, $1) WHERE id = $2"
                ))
                .bind(salt)
                .bind(tenant)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_audit_line(
                &self,
                tx: &mut Self::Tx,
                row: &$crate::engine::lease_audit::AuditRow<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO lease_audit (tenant_id, event, name_hash, memory_hash, \
                     fencing_token, actor, at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(row.tenant)
                .bind(row.event)
                .bind(&row.name_hash)
                .bind(&row.memory_hash)
                .bind(row.token)
                .bind(row.actor)
                .bind(row.at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn audit_lines(
                &self,
                tenant: switchboard_proto::TenantId,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::LeaseAuditEntry>> {
                use $crate::lease_rules::AUDIT_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {AUDIT_COLS} FROM lease_audit WHERE tenant_id = $1 \
                     ORDER BY id DESC LIMIT $2"
                ))
                .bind(tenant)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::lease_rules::audit_entry_from_row)
                    .collect()
            }
        }
    };
}
pub(crate) use lease_audit_statements;
