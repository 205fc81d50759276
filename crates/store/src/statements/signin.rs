//! [`SignInStatements`](crate::engine::signin::SignInStatements):
//! authorization codes, by their hash.

macro_rules! signin_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::signin::SignInStatements for $store {
            async fn insert_code_row(
                &self,
                tx: &mut Self::Tx,
                c: &$crate::NewAuthorizationCode<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO authorization_codes (code_hash, tenant_id, client_id, \
                     redirect_uri, code_challenge, scopes, granted_by, created_at, expires_at, \
                     parent_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                ))
                .bind(c.code_hash)
                .bind(c.tenant)
                .bind(c.client_id)
                .bind(c.redirect_uri)
                .bind(c.code_challenge)
                .bind(c.scopes.join(" "))
                .bind(c.granted_by)
                .bind(c.created_at)
                .bind(c.expires_at)
                .bind(c.parent_hash)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn code_for_update(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
            ) -> $crate::StoreResult<Option<$crate::engine::signin::CodeRow>> {
                use $crate::rows::Cols;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT tenant_id, client_id, redirect_uri, code_challenge, scopes, \
                     expires_at, used_at, family_hash, parent_hash \
                     FROM authorization_codes WHERE code_hash = $1 @FOR_UPDATE"
                ))
                .bind(hash)
                .fetch_optional(&mut **tx)
                .await?;
                row.map(|r| {
                    Ok($crate::engine::signin::CodeRow {
                        tenant: r.id("tenant_id")?,
                        client_id: r.text("client_id")?,
                        redirect_uri: r.text("redirect_uri")?,
                        code_challenge: r.text("code_challenge")?,
                        scopes: $crate::rows::scopes(&r)?,
                        expires_at: r.int("expires_at")?,
                        used_at: r.opt_int("used_at")?,
                        family_hash: r.opt_bytes("family_hash")?,
                        parent_hash: r.opt_bytes("parent_hash")?,
                    })
                })
                .transpose()
            }

            async fn mark_code_used(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
                now: $crate::clock::Millis,
                family_hash: Option<&[u8]>,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE authorization_codes SET used_at = $1, family_hash = $2 \
                     WHERE code_hash = $3 AND used_at IS NULL"
                ))
                .bind(now)
                .bind(family_hash)
                .bind(hash)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

        }
    };
}
pub(crate) use signin_statements;
