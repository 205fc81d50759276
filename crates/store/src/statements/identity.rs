//! [`IdentityStatements`](crate::engine::identity::IdentityStatements):
//! signing keys and the record of issued access tokens. An access token's lookup
//! is the token lookup of its parent credential (`rows::TOKEN_SELECT`) joined with
//! the token's own row, so one statement says whether both are live.

macro_rules! identity_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::identity::IdentityStatements for $store {
            async fn signing_key_rows(
                &self,
            ) -> $crate::StoreResult<Vec<$crate::SigningKeyRow>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT kid, algorithm, public_key, private_key, sealed_with, created_at \
                     FROM signing_keys ORDER BY created_at, kid"
                ))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::SigningKeyRow {
                            kid: r.text("kid")?,
                            algorithm: r.text("algorithm")?,
                            public_key: r.bytes("public_key")?,
                            private_key: r.bytes("private_key")?,
                            sealed_with: r.text("sealed_with")?,
                            created_at: r.int("created_at")?,
                        })
                    })
                    .collect()
            }

            async fn insert_signing_key_row(
                &self,
                key: &$crate::SigningKeyRow,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO signing_keys \
                     (kid, algorithm, public_key, private_key, sealed_with, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)"
                ))
                .bind(&key.kid)
                .bind(&key.algorithm)
                .bind(&key.public_key)
                .bind(&key.private_key)
                .bind(&key.sealed_with)
                .bind(key.created_at)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn delete_signing_key_row(&self, kid: &str) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM signing_keys WHERE kid = $1"
                ))
                .bind(kid)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn insert_access_token_row(
                &self,
                tx: &mut Self::Tx,
                token: &$crate::NewAccessToken<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO access_tokens \
                     (jti, tenant_id, parent_hash, issued_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5)"
                ))
                .bind(token.jti)
                .bind(token.tenant)
                .bind(token.parent_hash)
                .bind(token.issued_at)
                .bind(token.expires_at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn live_access_token(
                &self,
                jti: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<$crate::AccessGrant>> {
                use $crate::rows::{Cols, TOKEN_SELECT};
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT t.hash AS parent_hash, {} \
                     JOIN access_tokens x ON x.parent_hash = t.hash \
                     WHERE x.jti = $1 AND x.revoked_at IS NULL AND x.expires_at > $2 \
                     AND x.tenant_id = t.tenant_id AND t.revoked_at IS NULL \
                     AND a.deleted_at IS NULL",
                    TOKEN_SELECT.trim_start_matches("SELECT ")
                ))
                .bind(jti)
                .bind(now)
                .fetch_optional(self.read_pool())
                .await?;
                row.as_ref()
                    .map(|r| {
                        Ok($crate::AccessGrant {
                            record: $crate::rows::token_record(r)?,
                            parent_hash: r.bytes("parent_hash")?,
                        })
                    })
                    .transpose()
            }

            async fn revoke_access_token_row(
                &self,
                tenant: switchboard_proto::TenantId,
                jti: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE access_tokens SET revoked_at = $1 \
                     WHERE tenant_id = $2 AND jti = $3 AND revoked_at IS NULL"
                ))
                .bind(now)
                .bind(tenant)
                .bind(jti)
                .execute(self.write_pool())
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn insert_device_row(
                &self,
                tx: &mut Self::Tx,
                r: &$crate::NewDeviceRequest<'_>,
            ) -> $crate::StoreResult<bool> {
                let inserted = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO device_requests (device_hash, user_code, tenant_id, client_id, \
                     agent_name, source, user_agent, created_at, expires_at, interval_ms, status) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending')"
                ))
                .bind(r.device_hash)
                .bind(r.user_code)
                .bind(r.tenant)
                .bind(r.client_id)
                .bind(r.agent_name)
                .bind(r.source)
                .bind(r.user_agent)
                .bind(r.created_at)
                .bind(r.expires_at)
                .bind(r.interval_ms)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                // A user code already taken is told by the unique index.
                $crate::dialect::inserted(inserted)
            }

            async fn device_rows(
                &self,
                tenant: switchboard_proto::TenantId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Vec<$crate::DeviceRequestRow>> {
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {DEVICE_COLS} FROM device_requests \
                     WHERE tenant_id = $1 AND expires_at > $2 \
                     ORDER BY created_at DESC, user_code",
                    DEVICE_COLS = $crate::rows::DEVICE_COLS
                ))
                .bind(tenant)
                .bind(now)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter().map($crate::rows::device_request).collect()
            }

            async fn pending_device_for_update(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                user_code: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<(String, String)>> {
                use $crate::rows::Cols;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT device_hash, agent_name FROM device_requests \
                     WHERE tenant_id = $1 AND user_code = $2 AND status = 'pending' \
                     AND expires_at > $3 @FOR_UPDATE"
                ))
                .bind(tenant)
                .bind(user_code)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?;
                row.map(|r| Ok((r.text("device_hash")?, r.text("agent_name")?)))
                    .transpose()
            }

            async fn device_for_update(
                &self,
                tx: &mut Self::Tx,
                device_hash: &str,
            ) -> $crate::StoreResult<Option<$crate::engine::identity::DeviceRow>>
            {
                use $crate::rows::Cols;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT client_id, expires_at, interval_ms, polled_at, status, family_hash \
                     FROM device_requests WHERE device_hash = $1 @FOR_UPDATE"
                ))
                .bind(device_hash)
                .fetch_optional(&mut **tx)
                .await?;
                row.map(|r| {
                    Ok($crate::engine::identity::DeviceRow {
                        client_id: r.text("client_id")?,
                        expires_at: r.int("expires_at")?,
                        interval_ms: r.int("interval_ms")?,
                        polled_at: r.opt_int("polled_at")?,
                        status: r.text("status")?,
                        family_hash: r.opt_bytes("family_hash")?,
                    })
                })
                .transpose()
            }

            async fn device_by_code(
                &self,
                tx: &mut Self::Tx,
                user_code: &str,
            ) -> $crate::StoreResult<Option<$crate::DeviceRequestRow>> {
                let row = sqlx::query($crate::engine::stmt!(
                   "SELECT {DEVICE_COLS} FROM device_requests WHERE user_code = $1",
                    DEVICE_COLS = $crate::rows::DEVICE_COLS
                ))
                .bind(user_code)
                .fetch_optional(&mut **tx)
                .await?;
                row.as_ref().map($crate::rows::device_request).transpose()
            }

            async fn set_device_polled(
                &self,
                tx: &mut Self::Tx,
                device_hash: &str,
                polled_at: $crate::clock::Millis,
                interval_ms: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE device_requests SET polled_at = $1, interval_ms = $2 \
                     WHERE device_hash = $3"
                ))
                .bind(polled_at)
                .bind(interval_ms)
                .bind(device_hash)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn set_device_status(
                &self,
                tx: &mut Self::Tx,
                device_hash: &str,
                change: &$crate::engine::identity::DeviceStatus<'_>,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE device_requests SET status = $1, \
                     decided_by = COALESCE($2, decided_by), decided_at = COALESCE($3, decided_at), \
                     agent_id = COALESCE($4, agent_id), family_hash = COALESCE($5, family_hash) \
                     WHERE device_hash = $6 AND status = $7"
                ))
                .bind(change.to)
                .bind(change.decided.map(|(by, _)| by))
                .bind(change.decided.map(|(_, at)| at))
                .bind(change.agent)
                .bind(change.family_hash)
                .bind(device_hash)
                .bind(change.from)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn refresh_for_update(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
            ) -> $crate::StoreResult<Option<$crate::engine::identity::RefreshRow>> {
                use $crate::rows::Cols;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT family_hash, used_at, created_at FROM refresh_tokens \
                     WHERE hash = $1 @FOR_UPDATE"
                ))
                .bind(hash)
                .fetch_optional(&mut **tx)
                .await?;
                row.map(|r| {
                    Ok($crate::engine::identity::RefreshRow {
                        family: r.bytes("family_hash")?,
                        used_at: r.opt_int("used_at")?,
                        created_at: r.int("created_at")?,
                    })
                })
                .transpose()
            }

            async fn insert_refresh_row(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
                family_hash: &[u8],
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO refresh_tokens (hash, family_hash, created_at) VALUES ($1, $2, $3)"
                ))
                .bind(hash)
                .bind(family_hash)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn mark_refresh_used(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE refresh_tokens SET used_at = $1 WHERE hash = $2 AND used_at IS NULL"
                ))
                .bind(now)
                .bind(hash)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn family_tenant(
                &self,
                tx: &mut Self::Tx,
                family_hash: &[u8],
            ) -> $crate::StoreResult<
                Option<(switchboard_proto::TenantId, $crate::clock::Millis)>,
            > {
                let row = sqlx::query_as($crate::engine::stmt!(
                    "SELECT tenant_id, created_at FROM tokens WHERE hash = $1 AND revoked_at IS NULL"
                ))
                .bind(family_hash)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(row)
            }
        }
    };
}
pub(crate) use identity_statements;
