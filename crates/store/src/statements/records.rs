//! [`RecordStatements`](crate::engine::records::RecordStatements): the
//! memory's row is locked `@FOR_UPDATE` before its fence is read and the live lease
//! `@FOR_SHARE`, in the acquisition's lock order (see the engine's `records.rs`).

macro_rules! record_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::records::RecordStatements for $store {
            async fn lock_memory_fence(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                memory: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<Option<i64>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT fence FROM memories WHERE tenant_id = $1 AND id = $2 @FOR_UPDATE"
                ))
                .bind(tenant)
                .bind(memory)
                .fetch_optional(&mut **tx)
                .await?)
            }

            async fn issued(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                token: u64,
            ) -> $crate::StoreResult<Option<$crate::engine::records::Issued>> {
                let row: Option<(String, String, Option<String>)> =
                    sqlx::query_as($crate::engine::stmt!(
                        "SELECT holder_key, holder, owner_client FROM issued_tokens \
                         WHERE memory_id = $1 AND fence = $2"
                    ))
                    .bind(memory)
                    .bind(token as i64)
                    .fetch_optional(&mut **tx)
                    .await?;
                Ok(row.map(|(key, holder, owner_client)| {
                    $crate::engine::records::Issued {
                        holder: match key.is_empty() {
                            true => $crate::record_rules::IssuedTo::Text(holder),
                            false => $crate::record_rules::IssuedTo::Key(key),
                        },
                        owner_client,
                    }
                }))
            }

            async fn lock_live_lease(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                token: u64,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let live: Option<i64> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT expires_at FROM leases WHERE memory_id = $1 AND fence = $2 \
                     AND expires_at > $3 @FOR_SHARE"
                ))
                .bind(memory)
                .bind(token as i64)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(live.is_some())
            }

            async fn see_fence(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                token: u64,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE memories SET fence_seen = @GREATEST(fence_seen, $1) WHERE id = $2"
                ))
                .bind(token as i64)
                .bind(memory)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_rejection(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::engine::records::Rejection<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO fencing_rejections (tenant_id, memory_id, presented, current, \
                     owner_client, actor, operation, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                ))
                .bind(r.tenant)
                .bind(r.memory)
                .bind(r.presented)
                .bind(r.current)
                .bind(r.owner_client)
                .bind(r.actor)
                .bind(r.operation)
                .bind(r.at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn load_record(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                key: &str,
            ) -> $crate::StoreResult<Option<switchboard_proto::MemoryRecord>> {
                use $crate::lease_rules::RECORD_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {RECORD_COLS} FROM memory_records WHERE memory_id = $1 AND \"key\" = $2"
                ))
                .bind(memory)
                .bind(key)
                .fetch_optional(&mut **tx)
                .await?;
                row.map(|r| $crate::lease_rules::record_from_row(&r, memory, key))
                    .transpose()
            }

            async fn page_records(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                after: Option<&str>,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::MemoryRecord>> {
                use $crate::lease_rules::RECORD_COLS;
                use $crate::rows::Cols;
                // Strictly after the last key seen (`>`, never `>=` nor an offset): the
                // next page starts where the keys do, whatever was deleted before it.
                let query = match after {
                    Some(after) => sqlx::query($crate::engine::stmt!(
                        "SELECT \"key\", {RECORD_COLS} FROM memory_records \
                         WHERE memory_id = $1 AND \"key\" > $2 ORDER BY \"key\" LIMIT $3"
                    ))
                    .bind(memory)
                    .bind(after.to_owned()),
                    None => sqlx::query($crate::engine::stmt!(
                        "SELECT \"key\", {RECORD_COLS} FROM memory_records \
                         WHERE memory_id = $1 ORDER BY \"key\" LIMIT $2"
                    ))
                    .bind(memory),
                };
                let rows = query
                    .bind(i64::from(limit))
                    .fetch_all(&mut **tx)
                    .await?;
                rows.iter()
                    .map(|r| $crate::lease_rules::record_from_row(r, memory, &r.text("key")?))
                    .collect()
            }

            async fn insert_record(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::engine::records::RecordWrite<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO memory_records (memory_id, \"key\", value, version, \
                     fencing_token, updated_at) VALUES ($1, $2, $3, $4, $5, $6)"
                ))
                .bind(r.memory)
                .bind(r.key)
                .bind(r.value)
                .bind(r.version)
                .bind(r.token as i64)
                .bind(r.now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn update_record(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::engine::records::RecordWrite<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE memory_records SET value = $1, version = $2, fencing_token = $3, \
                     updated_at = $4 WHERE memory_id = $5 AND \"key\" = $6"
                ))
                .bind(r.value)
                .bind(r.version)
                .bind(r.token as i64)
                .bind(r.now)
                .bind(r.memory)
                .bind(r.key)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn delete_record(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                key: &str,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM memory_records WHERE memory_id = $1 AND \"key\" = $2"
                ))
                .bind(memory)
                .bind(key)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn subscribers(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<Vec<switchboard_proto::AgentId>> {
                let agents = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT agent_id FROM memory_subscribers WHERE memory_id = $1 \
                     ORDER BY agent_id"
                ))
                .bind(memory)
                .fetch_all(&mut **tx)
                .await?;
                Ok(agents)
            }

            async fn memory_exists(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                memory: switchboard_proto::MemoryId,
            ) -> $crate::StoreResult<bool> {
                let found: Option<String> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT id FROM memories WHERE tenant_id = $1 AND id = $2"
                ))
                .bind(tenant)
                .bind(memory)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(found.is_some())
            }

            async fn set_subscribed(
                &self,
                tx: &mut Self::Tx,
                memory: switchboard_proto::MemoryId,
                agent: switchboard_proto::AgentId,
                on: bool,
            ) -> $crate::StoreResult<()> {
                let sql = if on {
                    $crate::engine::stmt!(
                        "INSERT INTO memory_subscribers (memory_id, agent_id) VALUES ($1, $2) \
                         @IGNORE_DUPLICATE"
                    )
                } else {
                    $crate::engine::stmt!(
                        "DELETE FROM memory_subscribers WHERE memory_id = $1 AND agent_id = $2"
                    )
                };
                let done = sqlx::query(sql)
                    .bind(memory)
                    .bind(agent)
                    .execute(&mut **tx)
                    .await
                    .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)?;
                Ok(())
            }

            async fn fencing_rejections(
                &self,
                tenant: switchboard_proto::TenantId,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::FencingRejection>> {
                use $crate::lease_rules::REJECTION_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {REJECTION_COLS} FROM fencing_rejections WHERE tenant_id = $1 \
                     ORDER BY id DESC LIMIT $2"
                ))
                .bind(tenant)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::lease_rules::rejection_from_row)
                    .collect()
            }
        }
    };
}
pub(crate) use record_statements;
