//! [`AuditStatements`](crate::engine::audit::AuditStatements): the
//! operators' audit log rows of actions other than bulk actions and jobs.

macro_rules! audit_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::audit::AuditStatements for $store {
            async fn insert_audit_note(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                note: &$crate::AuditNote,
                action: &str,
                count: u64,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO audit_log (tenant_id, actor, action, target, detail, count, at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(tenant)
                .bind(&note.actor)
                .bind(action)
                .bind(&note.target)
                .bind(&note.detail)
                .bind(count as i64)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }
        }
    };
}
pub(crate) use audit_statements;
