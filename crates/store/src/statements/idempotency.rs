//! [`IdemStatements`](crate::engine::idempotency::IdemStatements): a key is
//! locked `@FOR_UPDATE` after its insert-if-absent, so of two requests with the same
//! key one decides at a time (see the engine's `idempotency.rs`).

macro_rules! idem_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::idempotency::IdemStatements for $store {
            async fn insert_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                terms: $crate::engine::idempotency::KeyTerms,
            ) -> $crate::StoreResult<bool> {
                let query = sqlx::query($crate::engine::stmt!(
                    "{INSERT_KEY} @IGNORE_DUPLICATE",
                    INSERT_KEY = $crate::statements::INSERT_KEY
                ));
                let inserted = $crate::statements::bind_key!(query, key, terms)
                    .execute(&mut **tx)
                    .await
                    .map(|done| done.rows_affected());
                $crate::dialect::inserted(inserted)
            }

            async fn claim_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                terms: $crate::engine::idempotency::KeyTerms,
            ) -> $crate::StoreResult<bool> {
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                if dialect != $crate::dialect::Dialect::MySql {
                    return self.insert_key(tx, key, terms).await;
                }
                let query = sqlx::query($crate::dialect::sql!(
                    dialect,
                    "{INSERT_KEY} ON DUPLICATE KEY UPDATE key_hash = key_hash",
                    INSERT_KEY = $crate::statements::INSERT_KEY
                ));
                $crate::statements::bind_key!(query, key, terms)
                    .execute(&mut **tx)
                    .await?;
                Ok(false)
            }

            async fn lock_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
            ) -> $crate::StoreResult<
                Option<$crate::engine::idempotency::StoredKey>,
            > {
                #[allow(clippy::type_complexity)]
                let row: Option<(
                    Vec<u8>,
                    String,
                    Option<i64>,
                    Option<String>,
                    i64,
                    i64,
                    Option<Vec<u8>>,
                )> = sqlx::query_as($crate::engine::stmt!(
                    "SELECT fingerprint, state, status_code, response, locked_until, expires_at, \
                     owner FROM idempotency_keys \
                     WHERE tenant_id = $1 AND principal = $2 AND key_hash = $3 @FOR_UPDATE"
                ))
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(row.map(
                    |(fingerprint, state, status_code, response, locked_until, expires_at, owner)| {
                        $crate::engine::idempotency::StoredKey {
                            fingerprint,
                            state,
                            status_code,
                            response,
                            locked_until,
                            expires_at,
                            owner,
                        }
                    },
                ))
            }

            async fn renew_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                terms: $crate::engine::idempotency::KeyTerms,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE idempotency_keys SET fingerprint = $1, state = 'in_flight', \
                     status_code = NULL, response = NULL, created_at = $2, locked_until = $3, \
                     expires_at = $4, owner = $5 \
                     WHERE tenant_id = $6 AND principal = $7 AND key_hash = $8"
                ))
                .bind(&key.fingerprint)
                .bind(terms.now)
                .bind(terms.now + terms.lock_ms)
                .bind(terms.now + terms.ttl_ms)
                .bind(&key.owner)
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn take_over_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                locked_until: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE idempotency_keys SET locked_until = $1, owner = $2 \
                     WHERE tenant_id = $3 AND principal = $4 AND key_hash = $5"
                ))
                .bind(locked_until)
                .bind(&key.owner)
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn store_response(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
                response: &$crate::StoredResponse,
            ) -> $crate::StoreResult<bool> {
                let stored = sqlx::query($crate::engine::stmt!(
                    "UPDATE idempotency_keys SET state = 'done', status_code = $1, response = $2 \
                     WHERE tenant_id = $3 AND principal = $4 AND key_hash = $5 \
                     AND state = 'in_flight' AND owner = $6 AND fingerprint = $7"
                ))
                .bind(i64::from(response.status))
                .bind(&response.body)
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .bind(&key.owner)
                .bind(&key.fingerprint)
                .execute(&mut **tx)
                .await?
                .rows_affected();
                Ok(stored == 1)
            }

            async fn forget_key(
                &self,
                tx: &mut Self::Tx,
                key: &$crate::IdemKey,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM idempotency_keys \
                     WHERE tenant_id = $1 AND principal = $2 AND key_hash = $3 \
                     AND state = 'in_flight' AND owner = $4"
                ))
                .bind(key.tenant_id)
                .bind(&key.principal)
                .bind(&key.key_hash)
                .bind(&key.owner)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn forget_in_flight_keys(
                &self,
                tx: &mut Self::Tx,
            ) -> $crate::StoreResult<u64> {
                Ok(sqlx::query($crate::engine::stmt!(
                    "DELETE FROM idempotency_keys WHERE state = 'in_flight'"
                ))
                .execute(&mut **tx)
                .await?
                .rows_affected())
            }
        }
    };
}
pub(crate) use idem_statements;

/// A new idempotency key's row, in flight; [`bind_key!`] binds its values.
pub(crate) const INSERT_KEY: &str = "INSERT INTO idempotency_keys (tenant_id, principal, \
     key_hash, fingerprint, state, created_at, locked_until, expires_at, owner) \
     VALUES ($1, $2, $3, $4, 'in_flight', $5, $6, $7, $8)";

/// Binds [`INSERT_KEY`]'s values: `key` in flight on its `terms`
/// (`engine::idempotency::KeyTerms`).
macro_rules! bind_key {
    ($query:expr, $key:expr, $terms:expr) => {{
        let (key, terms) = ($key, $terms);
        $query
            .bind(key.tenant_id)
            .bind(&key.principal)
            .bind(&key.key_hash)
            .bind(&key.fingerprint)
            .bind(terms.now)
            .bind(terms.now + terms.lock_ms)
            .bind(terms.now + terms.ttl_ms)
            .bind(&key.owner)
    }};
}
pub(crate) use bind_key;
