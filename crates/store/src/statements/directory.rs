//! [`DirectoryStatements`](crate::engine::directory::DirectoryStatements):
//! tenants, tokens, console grants, agents, inbox depth and client reports. A name
//! already taken is told by the unique index (`dialect::inserted`), on every
//! backend alike.

macro_rules! directory_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::directory::DirectoryStatements for $store {
            async fn tenant_named(
                &self,
                name: &str,
            ) -> $crate::StoreResult<Option<switchboard_proto::TenantId>> {
                let id = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT id FROM tenants WHERE name = $1"
                ))
                .bind(name)
                .fetch_optional(self.read_pool())
                .await?;
                Ok(id)
            }

            async fn insert_tenant(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::TenantId,
                name: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let inserted = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3)"
                ))
                .bind(id)
                .bind(name)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                // A name already taken is told by the unique index.
                $crate::dialect::inserted(inserted)
            }

            async fn tenants_with_counts(
                &self,
            ) -> $crate::StoreResult<Vec<$crate::TenantRecord>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT t.id, t.name, t.created_at, COUNT(a.id) AS agents \
                     FROM tenants t LEFT JOIN agents a ON a.tenant_id = t.id AND a.deleted_at IS NULL \
                     GROUP BY t.id, t.name, t.created_at ORDER BY t.name"
                ))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::TenantRecord {
                            id: r.id("id")?,
                            name: r.text("name")?,
                            created_at: r.int("created_at")?,
                            agents: r.int("agents")? as u64,
                        })
                    })
                    .collect()
            }

            async fn update_token_scopes(
                &self,
                hash: &[u8],
                scopes: &[String],
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE tokens SET scopes = $1 WHERE hash = $2"
                ))
                .bind(scopes.join(" "))
                .bind(hash)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn insert_token_row(
                &self,
                tx: &mut Self::Tx,
                token: &$crate::engine::directory::NewToken<'_>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO tokens (hash, tenant_id, agent_id, scopes, label, created_at, \
                     parent_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(token.hash)
                .bind(token.tenant)
                .bind(token.agent)
                .bind(token.scopes.join(" "))
                .bind(token.label)
                .bind(token.now)
                .bind(token.parent)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn live_token(
                &self,
                hash: &[u8],
            ) -> $crate::StoreResult<Option<$crate::TokenRecord>> {
                use $crate::rows::TOKEN_SELECT;
                let row = sqlx::query($crate::engine::stmt!(
                    "{TOKEN_SELECT} WHERE t.hash = $1 AND t.revoked_at IS NULL \
                     AND a.deleted_at IS NULL"
                ))
                .bind(hash)
                .fetch_optional(self.read_pool())
                .await?;
                row.as_ref()
                    .map($crate::rows::token_record)
                    .transpose()
            }

            async fn revoke_agent_tokens(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<u64> {
                let done = sqlx::query($crate::engine::stmt!(
                    "UPDATE tokens SET revoked_at = $1 \
                     WHERE tenant_id = $2 AND agent_id = $3 AND revoked_at IS NULL"
                ))
                .bind(now)
                .bind(tenant)
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected())
            }

            async fn tokens_of(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::CredentialRow>> {
                use $crate::rows::Cols;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT t.hash, t.agent_id, a.name, t.scopes, t.label, t.created_at, \
                     t.revoked_at, t.parent_hash FROM tokens t \
                     LEFT JOIN agents a ON a.id = t.agent_id \
                     WHERE t.tenant_id = $1 ORDER BY t.created_at, t.label, t.hash"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok($crate::CredentialRow {
                            hash: r.bytes("hash")?,
                            agent_id: r.opt_id("agent_id")?,
                            agent_name: r.opt_text("name")?,
                            scopes: $crate::rows::scopes(r)?,
                            label: r.text("label")?,
                            created_at: r.int("created_at")?,
                            revoked_at: r.opt_int("revoked_at")?,
                            parent_hash: r.opt_bytes("parent_hash")?,
                        })
                    })
                    .collect()
            }

            async fn delete_expired_grants(
                &self,
                tx: &mut Self::Tx,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM console_grants WHERE expires_at <= $1"
                ))
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_grant_row(
                &self,
                tx: &mut Self::Tx,
                grant: &$crate::NewGrant<'_>,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO console_grants (hash, kind, tenant_id, token_hash, scopes, \
                     created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                ))
                .bind(grant.hash)
                .bind(grant.kind.as_str())
                .bind(grant.tenant)
                .bind(grant.token_hash)
                .bind(grant.scopes.join(" "))
                .bind(now)
                .bind(grant.expires_at)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn live_grant(
                &self,
                tx: Option<&mut Self::Tx>,
                hash: &[u8],
                kind: $crate::GrantKind,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<$crate::Grant>> {
                use $crate::rows::{GRANT_COLS, GRANT_JOINS, GRANT_LIVE};
                let query = sqlx::query($crate::engine::stmt!(
                    "SELECT {GRANT_COLS} FROM console_grants g {GRANT_JOINS} {GRANT_LIVE}"
                ))
                .bind(hash)
                .bind(kind.as_str())
                .bind(now);
                let row = match tx {
                    Some(tx) => query.fetch_optional(&mut **tx).await?,
                    None => query.fetch_optional(self.read_pool()).await?,
                };
                row.map(|row| {
                    $crate::rows::grant_from_row(
                        &row,
                        sqlx::Row::try_get(&row, "token_hash")?,
                    )
                })
                .transpose()
            }

            async fn take_live_grant(
                &self,
                hash: &[u8],
                kind: $crate::GrantKind,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<Option<$crate::Grant>> {
                use $crate::rows::{GRANT_COLS, GRANT_JOINS, GRANT_LIVE};
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                if dialect != $crate::dialect::Dialect::Postgres {
                    let mut tx = $crate::engine::Driver::begin_write(self).await?;
                    let grant = self.live_grant(Some(&mut tx), hash, kind, now).await?;
                    let taken = self.delete_grant_of_kind(&mut tx, hash, kind).await?;
                    $crate::engine::Driver::commit(self, tx, &[]).await?;
                    return Ok(grant.filter(|_| taken));
                }
                // The delete and the read in one statement (one round trip, no
                // transaction): `g` is the row just deleted, so of two racing
                // requests the second one's `DELETE` waits for the first one's row
                // lock, then finds nothing.
                let row = sqlx::query($crate::dialect::sql!(
                    dialect,
                    "WITH g AS (DELETE FROM console_grants WHERE hash = $1 AND kind = $2 \
                     RETURNING *) SELECT {GRANT_COLS} FROM g {GRANT_JOINS} {GRANT_LIVE}"
                ))
                .bind(hash)
                .bind(kind.as_str())
                .bind(now)
                .fetch_optional(self.write_pool())
                .await?;
                row.map(|row| {
                    $crate::rows::grant_from_row(
                        &row,
                        sqlx::Row::try_get(&row, "token_hash")?,
                    )
                })
                .transpose()
            }

            async fn delete_grant_of_kind(
                &self,
                tx: &mut Self::Tx,
                hash: &[u8],
                kind: $crate::GrantKind,
            ) -> $crate::StoreResult<bool> {
                let deleted = sqlx::query($crate::engine::stmt!(
                    "DELETE FROM console_grants WHERE hash = $1 AND kind = $2"
                ))
                .bind(hash)
                .bind(kind.as_str())
                .execute(&mut **tx)
                .await?;
                Ok(deleted.rows_affected() > 0)
            }

            async fn delete_grant_row(&self, hash: &[u8]) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM console_grants WHERE hash = $1"
                ))
                .bind(hash)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn insert_agent(
                &self,
                tx: &mut Self::Tx,
                agent: &$crate::AgentRecord,
            ) -> $crate::StoreResult<bool> {
                let inserted = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO agents (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)"
                ))
                .bind(agent.id)
                .bind(agent.tenant_id)
                .bind(&agent.name)
                .bind(agent.created_at)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                // A name already taken is told by the unique index.
                $crate::dialect::inserted(inserted)
            }

            async fn agent_by_key(
                &self,
                tenant: switchboard_proto::TenantId,
                key: &str,
            ) -> $crate::StoreResult<Option<$crate::AgentRecord>> {
                use $crate::rows::AGENT_COLS;
                let (column, key) =
                    $crate::rows::by_id_or_name::<switchboard_proto::AgentId>(key);
                let sql = if column == "id" {
                    $crate::engine::stmt!(
                        "SELECT {AGENT_COLS} FROM agents WHERE tenant_id = $1 AND id = $2 \
                         AND deleted_at IS NULL"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT {AGENT_COLS} FROM agents WHERE tenant_id = $1 AND name = $2 \
                         AND deleted_at IS NULL"
                    )
                };
                let row = sqlx::query(sql)
                    .bind(tenant)
                    .bind(key)
                    .fetch_optional(self.read_pool())
                    .await?;
                row.as_ref()
                    .map($crate::rows::agent_from_row)
                    .transpose()
            }

            async fn agents_of(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::AgentRecord>> {
                use $crate::rows::AGENT_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {AGENT_COLS} FROM agents WHERE tenant_id = $1 AND deleted_at IS NULL \
                     ORDER BY name"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::rows::agent_from_row)
                    .collect()
            }

            async fn note_seen(
                &self,
                tx: Option<&mut Self::Tx>,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
                seen_after: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE agents SET last_seen_at = $1 WHERE id = $2 \
                     AND (last_seen_at IS NULL OR last_seen_at < $3)"
                ))
                .bind(now)
                .bind(agent)
                .bind(seen_after);
                match tx {
                    Some(tx) => update.execute(&mut **tx).await?,
                    None => update.execute(self.write_pool()).await?,
                };
                Ok(())
            }

            async fn depth_counts(
                &self,
                tenant: Option<switchboard_proto::TenantId>,
            ) -> $crate::StoreResult<Vec<$crate::engine::directory::DepthCount>> {
                use $crate::rows::Cols;
                // Agents without events too (one row, no status); grouped by name as well,
                // which the id determines, for the dialects that want every column named.
                const COUNTS: &str = "SELECT a.id, a.tenant_id, a.name, e.status, \
                     COUNT(e.id) AS n, \
                     MIN(CASE WHEN e.status = 'pending' THEN e.available_at END) AS oldest \
                     FROM agents a LEFT JOIN events e ON e.agent_id = a.id \
                     WHERE a.deleted_at IS NULL";
                const GROUPS: &str = "GROUP BY a.id, a.tenant_id, a.name, e.status";
                let dialect = <Self as $crate::engine::Driver>::DIALECT;
                let rows = match tenant {
                    Some(tenant) => {
                        sqlx::query($crate::dialect::sql!(
                            dialect,
                            "{COUNTS} AND a.tenant_id = $1 {GROUPS}"
                        ))
                        .bind(tenant)
                        .fetch_all(self.read_pool())
                        .await?
                    }
                    None => {
                        sqlx::query($crate::dialect::sql!(dialect, "{COUNTS} {GROUPS}"))
                            .fetch_all(self.read_pool())
                            .await?
                    }
                };
                rows.iter()
                    .map(|r| {
                        Ok($crate::engine::directory::DepthCount {
                            agent_id: r.id("id")?,
                            tenant_id: r.id("tenant_id")?,
                            agent_name: r.text("name")?,
                            status: r.opt_text("status")?,
                            count: r.int("n")? as u64,
                            oldest_pending_at: r.opt_int("oldest")?,
                        })
                    })
                    .collect()
            }

            async fn upsert_client_report(
                &self,
                agent: switchboard_proto::AgentId,
                report: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO client_reports (agent_id, report, received_at) \
                     VALUES ($1, $2, $3) @UPSERT(agent_id) \
                     report = @NEW(report), received_at = @NEW(received_at)"
                ))
                .bind(agent)
                .bind(report)
                .bind(now)
                .execute(self.write_pool())
                .await?;
                Ok(())
            }

            async fn client_reports_of(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::ClientReportRow>> {
                use $crate::rows::CLIENT_REPORT_SELECT;
                let rows = sqlx::query($crate::engine::stmt!(
                    "{CLIENT_REPORT_SELECT} WHERE a.tenant_id = $1 ORDER BY a.name"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::rows::client_report)
                    .collect()
            }

            async fn upsert_client_settings(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: &str,
                settings: switchboard_proto::ClientSettings,
                updated_by: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO client_settings (tenant_id, agent_id, poll_ceiling_ms, \
                     reports_paused, updated_at, updated_by) VALUES ($1, $2, $3, $4, $5, $6) \
                     @UPSERT(tenant_id, agent_id) poll_ceiling_ms = @NEW(poll_ceiling_ms), \
                     reports_paused = @NEW(reports_paused), updated_at = @NEW(updated_at), \
                     updated_by = @NEW(updated_by)"
                ))
                .bind(tenant)
                .bind(agent)
                .bind(settings.poll_ceiling_ms.map(|ms| ms as i64))
                .bind(settings.reports_paused.map(i64::from))
                .bind(now)
                .bind(updated_by)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn delete_client_settings_row(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: &str,
            ) -> $crate::StoreResult<bool> {
                let done = sqlx::query($crate::engine::stmt!(
                    "DELETE FROM client_settings WHERE tenant_id = $1 AND agent_id = $2"
                ))
                .bind(tenant)
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn client_settings_of(
                &self,
                tenant: switchboard_proto::TenantId,
            ) -> $crate::StoreResult<Vec<$crate::ClientSettingsRow>> {
                use $crate::rows::CLIENT_SETTINGS_SELECT;
                // The tenant's row ('') sorts first: no agent has an empty name.
                let rows = sqlx::query($crate::engine::stmt!(
                    "{CLIENT_SETTINGS_SELECT} WHERE c.tenant_id = $1 \
                     ORDER BY c.agent_id <> '', a.name"
                ))
                .bind(tenant)
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::rows::client_settings_row)
                    .collect()
            }
        }
    };
}
pub(crate) use directory_statements;
