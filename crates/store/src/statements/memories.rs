//! [`MemoryStatements`](crate::engine::memories::MemoryStatements): a lock is
//! `@FOR_UPDATE`, nothing on SQLite (its single writer serializes the writes).

macro_rules! memory_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::memories::MemoryStatements for $store {
            async fn insert_memory(
                &self,
                tx: &mut Self::Tx,
                m: &$crate::engine::memories::NewMemory<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO memories (id, tenant_id, label, parent_id, branched_at_token, \
                     created_at) VALUES ($1, $2, $3, $4, $5, $6)"
                ))
                .bind(m.id)
                .bind(m.tenant)
                .bind(m.label)
                .bind(m.parent.map(|(p, _)| p))
                .bind(m.parent.map(|(_, t)| t as i64))
                .bind(m.now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn load_memory(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                id: switchboard_proto::MemoryId,
                lock: bool,
            ) -> $crate::StoreResult<Option<switchboard_proto::Memory>> {
                use $crate::lease_rules::MEMORY_COLS;
                let sql = if lock {
                    $crate::engine::stmt!(
                        "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND id = $2 \
                         @FOR_UPDATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND id = $2"
                    )
                };
                sqlx::query(sql)
                    .bind(tenant)
                    .bind(id)
                    .fetch_optional(&mut **tx)
                    .await?
                    .as_ref()
                    .map($crate::lease_rules::memory_from_row)
                    .transpose()
            }

            async fn memory_quiet(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<$crate::clock::Millis> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT quiet_until FROM memories WHERE id = $1"
                ))
                .bind(id)
                .fetch_one(&mut **tx)
                .await?)
            }

            async fn raise_memory_fence(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::MemoryId,
                fence: i64,
                quiet_until: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE memories SET fence = @GREATEST(fence, $1), \
                     quiet_until = @GREATEST(quiet_until, $2) WHERE id = $3"
                ))
                .bind(fence)
                .bind(quiet_until)
                .bind(id)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn child_memories(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                parent: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<Vec<switchboard_proto::Memory>> {
                use $crate::lease_rules::MEMORY_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND parent_id = $2 \
                     ORDER BY id"
                ))
                .bind(tenant)
                .bind(parent)
                .fetch_all(&mut **tx)
                .await?;
                rows.iter()
                    .map($crate::lease_rules::memory_from_row)
                    .collect()
            }

            async fn read_memory(
                &self,
                tenant: switchboard_proto::TenantId,
                id: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<Option<switchboard_proto::Memory>> {
                use $crate::lease_rules::MEMORY_COLS;
                sqlx::query($crate::engine::stmt!(
                    "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND id = $2"
                ))
                .bind(tenant)
                .bind(id)
                .fetch_optional(self.read_pool())
                .await?
                .as_ref()
                .map($crate::lease_rules::memory_from_row)
                .transpose()
            }
        }
    };
}
pub(crate) use memory_statements;
