//! [`IdentityStatements`](crate::store::engine::identity::IdentityStatements):
//! signing keys and the record of issued access tokens. An access token's lookup
//! is the token lookup of its parent credential (`rows::TOKEN_SELECT`) joined with
//! the token's own row, so one statement says whether both are live.

macro_rules! identity_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::engine::identity::IdentityStatements for $store {
            async fn signing_key_rows(
                &self,
            ) -> $crate::store::StoreResult<Vec<$crate::store::SigningKeyRow>> {
                use $crate::store::rows::Cols;
                let rows = sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "SELECT kid, algorithm, public_key, private_key, sealed_with, created_at \
                     FROM signing_keys ORDER BY created_at, kid"
                ))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::store::SigningKeyRow {
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
                key: &$crate::store::SigningKeyRow,
            ) -> $crate::store::StoreResult<()> {
                sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
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

            async fn delete_signing_key_row(&self, kid: &str) -> $crate::store::StoreResult<()> {
                sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "DELETE FROM signing_keys WHERE kid = $1"
                ))
                .bind(kid)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn insert_access_token_row(
                &self,
                token: &$crate::store::NewAccessToken<'_>,
            ) -> $crate::store::StoreResult<()> {
                sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "INSERT INTO access_tokens \
                     (jti, tenant_id, parent_hash, issued_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5)"
                ))
                .bind(token.jti)
                .bind(token.tenant.to_string())
                .bind(token.parent_hash)
                .bind(token.issued_at)
                .bind(token.expires_at)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn live_access_token(
                &self,
                jti: &str,
                now: $crate::clock::Millis,
            ) -> $crate::store::StoreResult<Option<$crate::store::AccessGrant>> {
                use $crate::store::rows::{Cols, TOKEN_SELECT};
                let row = sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "SELECT t.hash AS parent_hash, {} \
                     JOIN access_tokens x ON x.parent_hash = t.hash \
                     WHERE x.jti = $1 AND x.revoked_at IS NULL AND x.expires_at > $2 \
                     AND x.tenant_id = t.tenant_id AND t.revoked_at IS NULL",
                    TOKEN_SELECT.trim_start_matches("SELECT ")
                ))
                .bind(jti)
                .bind(now)
                .fetch_optional(self.read_pool())
                .await?;
                row.as_ref()
                    .map(|r| {
                        Ok($crate::store::AccessGrant {
                            record: $crate::store::rows::token_record(r)?,
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
            ) -> $crate::store::StoreResult<bool> {
                let done = sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "UPDATE access_tokens SET revoked_at = $1 \
                     WHERE tenant_id = $2 AND jti = $3 AND revoked_at IS NULL"
                ))
                .bind(now)
                .bind(tenant.to_string())
                .bind(jti)
                .execute(self.write_pool())
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn delete_access_tokens_before(
                &self,
                before: $crate::clock::Millis,
            ) -> $crate::store::StoreResult<u64> {
                let done = sqlx::query($crate::store::dialect::sql!(
                    <Self as $crate::store::engine::Driver>::DIALECT,
                    "DELETE FROM access_tokens WHERE expires_at < $1"
                ))
                .bind(before)
                .execute(self.write_pool())
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use identity_statements;
