//! [`LeaseStatements`](crate::engine::leases::LeaseStatements): a read with
//! `lock` locks its rows `@FOR_UPDATE` (nothing on SQLite, whose single writer
//! serializes the writes), in the lock order of the engine's `leases.rs`.

macro_rules! lease_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::leases::LeaseStatements for $store {
            async fn name_registration(
                &self,
                tx: &mut Self::Tx,
                skeleton: &str,
            ) -> $crate::StoreResult<Option<(String, String)>> {
                Ok(sqlx::query_as($crate::engine::stmt!(
                    "SELECT name, tenant_id FROM registered_names WHERE skeleton = $1"
                ))
                .bind(skeleton)
                .fetch_optional(&mut **tx)
                .await?)
            }

            async fn name_fence(
                &self,
                tx: &mut Self::Tx,
                skeleton: &str,
                lock: bool,
            ) -> $crate::StoreResult<Option<(i64, $crate::clock::Millis)>> {
                let sql = if lock {
                    $crate::engine::stmt!(
                        "SELECT fence, quiet_until FROM name_fences WHERE skeleton = $1 \
                         @FOR_UPDATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT fence, quiet_until FROM name_fences WHERE skeleton = $1"
                    )
                };
                Ok(sqlx::query_as(sql)
                    .bind(skeleton)
                    .fetch_optional(&mut **tx)
                    .await?)
            }

            async fn make_name_fence(
                &self,
                tx: &mut Self::Tx,
                skeleton: &str,
            ) -> $crate::StoreResult<()> {
                let done = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO name_fences (skeleton, fence) VALUES ($1, 0) @IGNORE_DUPLICATE"
                ))
                .bind(skeleton)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)?;
                Ok(())
            }

            async fn raise_name_fence(
                &self,
                tx: &mut Self::Tx,
                skeleton: &str,
                fence: i64,
                quiet_until: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO name_fences (skeleton, fence, quiet_until) VALUES ($1, $2, $3) \
                     @UPSERT(skeleton) fence = @GREATEST(name_fences.fence, @NEW(fence)), \
                     quiet_until = @GREATEST(name_fences.quiet_until, @NEW(quiet_until))"
                ))
                .bind(skeleton)
                .bind(fence)
                .bind(quiet_until)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn leases_holding(
                &self,
                tx: &mut Self::Tx,
                skeleton: &str,
                memory: switchboard_proto::MemoryId,
                lock: bool,
            ) -> $crate::StoreResult<Vec<$crate::lease_rules::Stored>> {
                use $crate::lease_rules::LEASE_COLS;
                let sql = if lock {
                    $crate::engine::stmt!(
                        "SELECT {LEASE_COLS} FROM leases WHERE skeleton = $1 OR memory_id = $2 \
                         @FOR_UPDATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT {LEASE_COLS} FROM leases WHERE skeleton = $1 OR memory_id = $2"
                    )
                };
                let rows = sqlx::query(sql)
                    .bind(skeleton)
                    .bind(memory)
                    .fetch_all(&mut **tx)
                    .await?;
                rows.iter()
                    .map($crate::lease_rules::lease_from_row)
                    .collect()
            }

            async fn load_lease(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                id: switchboard_proto::LeaseId,
                lock: bool,
            ) -> $crate::StoreResult<Option<$crate::lease_rules::Stored>> {
                use $crate::lease_rules::LEASE_COLS;
                let sql = if lock {
                    $crate::engine::stmt!(
                        "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 AND id = $2 @FOR_UPDATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 AND id = $2"
                    )
                };
                sqlx::query(sql)
                    .bind(tenant)
                    .bind(id)
                    .fetch_optional(&mut **tx)
                    .await?
                    .as_ref()
                    .map($crate::lease_rules::lease_from_row)
                    .transpose()
            }

            async fn insert_lease(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::LeaseId,
                new: &$crate::NewLease,
                fence: i64,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO leases (id, tenant_id, name, skeleton, memory_id, fence, holder, \
                     owner_client, ttl_ms, lock_delay_ms, acquired_at, expires_at, holder_key, \
                     display_name) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
                ))
                .bind(id)
                .bind(new.tenant)
                .bind(&new.name)
                .bind(&new.skeleton)
                .bind(new.memory)
                .bind(fence)
                .bind(&new.holder)
                .bind(&new.owner_client)
                .bind(new.ttl_ms)
                .bind(new.lock_delay_ms)
                .bind(now)
                .bind(now + new.ttl_ms)
                .bind(&new.holder_key)
                .bind(&new.display_name)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_issued(
                &self,
                tx: &mut Self::Tx,
                new: &$crate::NewLease,
                id: switchboard_proto::LeaseId,
                fence: i64,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO issued_tokens (memory_id, fence, lease_id, owner_client, holder, \
                     issued_at, holder_key) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(new.memory)
                .bind(fence)
                .bind(id)
                .bind(&new.owner_client)
                .bind(&new.holder)
                .bind(now)
                .bind(&new.holder_key)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn delete_lease(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::LeaseId,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM leases WHERE id = $1"
                ))
                .bind(id)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn set_lease_expiry(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::LeaseId,
                ttl_ms: $crate::clock::Millis,
                expires_at: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE leases SET ttl_ms = $1, expires_at = $2 WHERE id = $3"
                ))
                .bind(ttl_ms)
                .bind(expires_at)
                .bind(id)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn register_name(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                n: &$crate::Planned,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO registered_names (skeleton, name, original, tenant_id, \
                     created_at) VALUES ($1, $2, $3, $4, $5) @IGNORE_DUPLICATE"
                ))
                .bind(&n.skeleton)
                .bind(&n.name)
                .bind(&n.original)
                .bind(tenant)
                .bind(n.created_at)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)
            }

            async fn key_known(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let state: Option<String> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT state FROM idempotency_keys WHERE tenant_id = $1 AND principal = $2 \
                     AND key_hash = $3 AND expires_at > $4"
                ))
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(state.is_some())
            }

            async fn read_lease_on_memory(
                &self,
                tenant: switchboard_proto::TenantId,
                memory: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<Option<$crate::lease_rules::Stored>> {
                use $crate::lease_rules::LEASE_COLS;
                sqlx::query($crate::engine::stmt!(
                    "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 AND memory_id = $2"
                ))
                .bind(tenant)
                .bind(memory)
                .fetch_optional(self.read_pool())
                .await?
                .as_ref()
                .map($crate::lease_rules::lease_from_row)
                .transpose()
            }

            async fn leases_held_by(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                holder_key: &str,
            ) -> $crate::StoreResult<Vec<switchboard_proto::LeaseId>> {
                let ids = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT id FROM leases WHERE tenant_id = $1 AND holder_key = $2 ORDER BY id"
                ))
                .bind(tenant)
                .bind(holder_key)
                .fetch_all(&mut **tx)
                .await?;
                Ok(ids)
            }

            async fn read_leases(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::lease_rules::Stored>> {
                use $crate::lease_rules::LEASE_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 ORDER BY expires_at"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::lease_rules::lease_from_row)
                    .collect()
            }
        }
    };
}
pub(crate) use lease_statements;
