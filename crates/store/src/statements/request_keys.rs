//! [`RequestKeyStatements`](crate::engine::request_keys::RequestKeyStatements):
//! the keys bound to credentials, the tenants' signature policies and the replay
//! cache of signature nonces (a duplicate `(keyid, nonce)` is the primary key's
//! conflict, on every backend and every instance alike).

macro_rules! request_key_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::request_keys::RequestKeyStatements for $store {
            async fn request_key_rows(
                &self,
                parent_hash: &[u8],
            ) -> $crate::StoreResult<Vec<$crate::RequestKey>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT jkt, public_key, binds_parent, created_at FROM request_keys \
                     WHERE parent_hash = $1 AND revoked_at IS NULL \
                     ORDER BY created_at DESC, jkt"
                ))
                .bind(parent_hash)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::RequestKey {
                            jkt: r.text("jkt")?,
                            public_key: r.bytes("public_key")?,
                            binds_parent: r.int("binds_parent")? != 0,
                            created_at: r.int("created_at")?,
                        })
                    })
                    .collect()
            }

            async fn insert_request_key_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                parent_hash: &[u8],
                key: &$crate::NewRequestKey<'_>,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO request_keys \
                     (parent_hash, jkt, tenant_id, public_key, binds_parent, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) @IGNORE_DUPLICATE"
                ))
                .bind(parent_hash)
                .bind(key.jkt)
                .bind(tenant)
                .bind(key.public_key)
                .bind(i64::from(key.binds_parent))
                .bind(now)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)
            }

            async fn revoke_request_key_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                parent_hash: &[u8],
                jkt: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE request_keys SET revoked_at = $1 WHERE tenant_id = $2 \
                     AND parent_hash = $3 AND jkt = $4 AND revoked_at IS NULL"
                ))
                .bind(now)
                .bind(tenant)
                .bind(parent_hash)
                .bind(jkt)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn agent_key_rows(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::AgentKeyRow>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT a.id AS agent_id, a.name, k.jkt, k.binds_parent, k.created_at, \
                     t.label FROM request_keys k \
                     JOIN tokens t ON t.hash = k.parent_hash AND t.tenant_id = k.tenant_id \
                     JOIN agents a ON a.id = t.agent_id \
                     WHERE k.tenant_id = $1 AND k.revoked_at IS NULL \
                     AND t.revoked_at IS NULL AND a.deleted_at IS NULL \
                     ORDER BY a.name, k.created_at DESC, k.jkt"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::AgentKeyRow {
                            agent_id: r.id("agent_id")?,
                            agent_name: r.text("name")?,
                            jkt: r.text("jkt")?,
                            binds_parent: r.int("binds_parent")? != 0,
                            created_at: r.int("created_at")?,
                            credential_label: r.text("label")?,
                        })
                    })
                    .collect()
            }

            async fn signature_policy_row(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Option<String>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT signature_policy FROM tenants WHERE id = $1"
                ))
                .bind(tenant)
                .fetch_optional(self.read_pool())
                .await?)
            }

            async fn set_signature_policy_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                policy: &str,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE tenants SET signature_policy = $1 WHERE id = $2"
                ))
                .bind(policy)
                .bind(tenant)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_nonce_row(
                &self,
                tx: &mut Self::Tx,
                keyid: &str,
                nonce: &str,
                expires_at: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO signature_nonces (keyid, nonce, expires_at) \
                     VALUES ($1, $2, $3) @IGNORE_DUPLICATE"
                ))
                .bind(keyid)
                .bind(nonce)
                .bind(expires_at)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)
            }

            async fn insert_nonce_rows(
                &self,
                tx: &mut Self::Tx,
                rows: &[$crate::UsedNonce],
            ) -> $crate::StoreResult<()> {
                // One statement per 64 rows, then per 8, then per row: three texts,
                // each rendered once (a statement per row was a round trip to the
                // database's thread for every signed request).
                macro_rules! upsert {
                    ($n:literal) => {
                        $crate::engine::stmt!(
                            "INSERT INTO signature_nonces (keyid, nonce, expires_at) VALUES {} \
                             @UPSERT(keyid, nonce) expires_at = signature_nonces.expires_at",
                            $crate::dialect::value_rows($n, 3)
                        )
                    };
                }
                let mut rest = rows;
                while !rest.is_empty() {
                    let (sql, n) = match rest.len() {
                        64.. => (upsert!(64), 64),
                        8.. => (upsert!(8), 8),
                        _ => (upsert!(1), 1),
                    };
                    let (chunk, tail) = rest.split_at(n);
                    let mut query = sqlx::query(sql);
                    for row in chunk {
                        query = query
                            .bind(row.keyid.as_str())
                            .bind(row.nonce.as_str())
                            .bind(row.expires_at);
                    }
                    query.execute(&mut **tx).await?;
                    rest = tail;
                }
                Ok(())
            }

            async fn live_nonce_rows(
                &self,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Vec<$crate::UsedNonce>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT keyid, nonce, expires_at FROM signature_nonces WHERE expires_at > $1"
                ))
                .bind(now)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::UsedNonce {
                            keyid: r.text("keyid")?,
                            nonce: r.text("nonce")?,
                            expires_at: r.int("expires_at")?,
                        })
                    })
                    .collect()
            }
        }
    };
}
pub(crate) use request_key_statements;
