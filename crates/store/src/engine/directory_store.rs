//! The directory as the store serves it (`DirectoryStore`): every backend with the
//! directory's statements (`directory.rs`) has it, over its transactions there.

use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::directory::*;
use super::lineage::LineageStatements;
use crate::clock::Millis;
use crate::*;

// Every backend with the directory's statements has the directory.
store_area! {
    /// Tenants, tokens (hashes only, I11), console sessions and one-time login tickets,
    /// agents and their client reports.
    pub trait DirectoryStore for Engine<
        D: DirectoryStatements + AuditStatements + LineageStatements,
    > {
        // --- tenants and tokens ---
        async fn ensure_tenant(&self, name: &str, now: Millis) -> StoreResult<TenantId> {
            ensure_tenant(&self.0, name, now).await
        }

        /// A new tenant with its first operator token, in one transaction;
        /// [`StoreError::Conflict`] when the name is taken.
        /// `by`: the deployment admin's tenant and note, for its audit row.
        // A new tenant and its first operator token, in one transaction: a tenant nobody
        // can operate never exists, and a name taken (on any instance) creates nothing.
        async fn create_tenant(
            &self,
            name: &str,
            operator: &NewOperator<'_>,
            by: Option<(TenantId, &AuditNote)>,
            now: Millis,
        ) -> StoreResult<TenantRecord> {
            let d = &self.0;
            d.retrying(|| async {
                let id = TenantId::new();
                let mut tx = d.begin_write().await?;
                if !d.insert_tenant(&mut tx, id, name, now).await? {
                    return Err(StoreError::Conflict(format!(
                        "a tenant named {name:?} already exists; pick another name"
                    )));
                }
                let token = NewToken {
                    hash: operator.token_hash,
                    tenant: id,
                    agent: None,
                    scopes: operator.scopes,
                    label: operator.label,
                    now,
                    parent: None,
                };
                d.insert_token_row(&mut tx, &token).await?;
                if let Some((admin_tenant, note)) = by {
                    audit::write(d, &mut tx, admin_tenant, note, "tenant_created", 1, now).await?;
                }
                d.commit(tx, &[]).await?;
                Ok(TenantRecord {
                    id,
                    name: name.to_owned(),
                    created_at: now,
                    agents: 0,
                })
            })
            .await
        }

        /// Every tenant with its number of agents, by name.
        async fn tenants(&self) -> StoreResult<Vec<TenantRecord>> {
            self.0.tenants_with_counts().await
        }

        /// The tenant called `name`, if any.
        async fn tenant_by_name(&self, name: &str) -> StoreResult<Option<TenantId>> {
            DirectoryStatements::tenant_named(&self.0, name).await
        }

        /// Replaces a token's scopes (the start-up upgrade of the deployment admin's
        /// token, which predates the `admin` scope).
        async fn set_token_scopes(&self, hash: &[u8], scopes: &[String]) -> StoreResult<()> {
            self.0.update_token_scopes(hash, scopes).await
        }

        /// A token of no agent (an operator's, a scraper's).
        async fn insert_token(
            &self,
            hash: &[u8],
            tenant: TenantId,
            scopes: &[String],
            label: &str,
            note: Option<&AuditNote>,
            now: Millis,
        ) -> StoreResult<()> {
            self.insert_token_of(hash, tenant, None, scopes, label, note, now)
                .await
        }

        /// A token of `agent` (or of none) with exactly `scopes`: an agent's
        /// read-only token is one (`agent:{id}:read`).
        #[allow(clippy::too_many_arguments)]
        async fn insert_token_of(
            &self,
            hash: &[u8],
            tenant: TenantId,
            agent: Option<AgentId>,
            scopes: &[String],
            label: &str,
            note: Option<&AuditNote>,
            now: Millis,
        ) -> StoreResult<()> {
            let token = NewToken {
                hash,
                tenant,
                agent,
                scopes,
                label,
                now,
                parent: None,
            };
            self.0
                .retrying(|| insert_token(&self.0, &token, note))
                .await
        }

        async fn token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>> {
            self.0.live_token(hash).await
        }

        /// `tenant`'s tokens (static credentials), live and revoked, oldest first.
        async fn credentials(&self, tenant: TenantId) -> StoreResult<Vec<CredentialRow>> {
            self.0.tokens_of(tenant).await
        }

        /// Revokes `tenant`'s token with this hash and every credential it approved
        /// (its logins, theirs, …), with the audit row; how many were live (a token of
        /// another tenant is not touched). Their console sessions end with them.
        async fn revoke_credential(
            &self,
            tenant: TenantId,
            hash: &[u8],
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<u64> {
            let roots = Roots::Token(hash);
            self.0
                .retrying(|| revoke(&self.0, tenant, roots, note, "credential_revoked", now))
                .await
        }

        /// Revokes every live token of `agent` and what they approved, with the audit
        /// row; how many.
        async fn revoke_agent_credentials(
            &self,
            tenant: TenantId,
            agent: AgentId,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<u64> {
            let roots = Roots::Agent(agent);
            self.0
                .retrying(|| {
                    revoke(
                        &self.0,
                        tenant,
                        roots,
                        note,
                        "agent_credentials_revoked",
                        now,
                    )
                })
                .await
        }

        // --- console sessions and one-time login tickets (hashes only, I11) ---
        /// Stores a grant; also forgets expired ones.
        /// With `note`, the audit row of an operator's login link.
        // Stores a grant, forgetting expired ones while writing anyway: they are of no use
        // to anyone.
        async fn insert_grant(
            &self,
            grant: &NewGrant<'_>,
            note: Option<&AuditNote>,
            now: Millis,
        ) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.delete_expired_grants(&mut tx, now).await?;
                d.insert_grant_row(&mut tx, grant, now).await?;
                if let Some(note) = note {
                    let action = match grant.kind {
                        GrantKind::Ticket => "login_link_created",
                        GrantKind::Session => "session_opened",
                    };
                    audit::write(d, &mut tx, grant.tenant, note, action, 1, now).await?;
                }
                d.commit(tx, &[]).await
            })
            .await
        }

        /// A live grant of `kind` (unexpired, its token not revoked).
        async fn grant(
            &self,
            hash: &[u8],
            kind: GrantKind,
            now: Millis,
        ) -> StoreResult<Option<Grant>> {
            DirectoryStatements::live_grant(&self.0, None, hash, kind, now).await
        }

        /// Like [`DirectoryStore::grant`], but deletes it at once: single use, even when
        /// two requests race for it.
        async fn take_grant(
            &self,
            hash: &[u8],
            kind: GrantKind,
            now: Millis,
        ) -> StoreResult<Option<Grant>> {
            self.0
                .retrying(|| self.0.take_live_grant(hash, kind, now))
                .await
        }

        async fn delete_grant(&self, hash: &[u8]) -> StoreResult<()> {
            self.0.delete_grant_row(hash).await
        }

        // --- agents ---
        /// Creates an agent and its token in one transaction.
        async fn create_agent(
            &self,
            tenant: TenantId,
            name: &str,
            token_hash: &[u8],
            scopes: &[String],
            note: Option<&AuditNote>,
            now: Millis,
        ) -> StoreResult<AgentRecord> {
            let d = &self.0;
            d.retrying(|| async {
                let agent = AgentRecord::created(AgentId::new(), tenant, name, now);
                let mut tx = d.begin_write().await?;
                if !d.insert_agent(&mut tx, &agent).await? {
                    return Err(StoreError::Conflict(format!(
                        "an agent named {name:?} already exists in this tenant; pick another name"
                    )));
                }
                let (scopes, label) = agent.token_grant(scopes);
                let token = NewToken {
                    hash: token_hash,
                    tenant,
                    agent: Some(agent.id),
                    scopes: &scopes,
                    label: &label,
                    now,
                    parent: None,
                };
                d.insert_token_row(&mut tx, &token).await?;
                if let Some(note) = note {
                    audit::write(d, &mut tx, tenant, note, "agent_created", 1, now).await?;
                }
                d.commit(tx, &[]).await?;
                Ok(agent)
            })
            .await
        }

        /// Finds an agent of `tenant` by id or by name.
        async fn agent(&self, tenant: TenantId, key: &str) -> StoreResult<AgentRecord> {
            agent(&self.0, tenant, key).await
        }

        async fn touch_agent(&self, agent: AgentId, now: Millis) -> StoreResult<()> {
            self.0
                .note_seen(None, agent, now, now - SEEN_RESOLUTION_MS)
                .await
        }

        /// Every agent's events by status (of `tenant`, or of all tenants), by name.
        async fn depth(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>> {
            Ok(depth_rows(self.0.depth_counts(tenant).await?))
        }

        async fn agents(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>> {
            self.0.agents_of(tenant).await
        }

        // --- client reports (the SDK's view of its outbox and consumer) ---
        /// Replaces `agent`'s stored report (`report` is its JSON).
        async fn put_client_report(
            &self,
            agent: AgentId,
            report: &str,
            now: Millis,
        ) -> StoreResult<()> {
            self.0.upsert_client_report(agent, report, now).await
        }

        /// Every stored report of `tenant`'s agents: (agent, name, JSON, received at).
        async fn client_reports(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>> {
            self.0.client_reports_of(tenant).await
        }

        // --- remote client settings (what the agents' SDKs obey) ---
        /// Replaces the settings of `agent` (`None`: the tenant's row).
        async fn put_client_settings(
            &self,
            tenant: TenantId,
            agent: Option<AgentId>,
            settings: ClientSettings,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<()> {
            let agent = agent.map(|a| a.to_string()).unwrap_or_default();
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    self.0
                        .upsert_client_settings(&mut tx, tenant, &agent, settings, &note.actor, now)
                        .await?;
                    audit::write(
                        &self.0,
                        &mut tx,
                        tenant,
                        note,
                        "client_settings_set",
                        1,
                        now,
                    )
                    .await?;
                    self.0.commit(tx, &[]).await
                })
                .await
        }

        /// Removes the settings of `agent` (`None`: the tenant's); whether there were any.
        async fn delete_client_settings(
            &self,
            tenant: TenantId,
            agent: Option<AgentId>,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<bool> {
            let agent = agent.map(|a| a.to_string()).unwrap_or_default();
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    let deleted = self
                        .0
                        .delete_client_settings_row(&mut tx, tenant, &agent)
                        .await?;
                    if deleted {
                        audit::write(
                            &self.0,
                            &mut tx,
                            tenant,
                            note,
                            "client_settings_cleared",
                            1,
                            now,
                        )
                        .await?;
                    }
                    self.0.commit(tx, &[]).await?;
                    Ok(deleted)
                })
                .await
        }

        /// `tenant`'s rows: its own first, then its agents' by name.
        async fn client_settings(&self, tenant: TenantId) -> StoreResult<Vec<ClientSettingsRow>> {
            self.0.client_settings_of(tenant).await
        }
    }
}
