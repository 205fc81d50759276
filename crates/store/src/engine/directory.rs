//! Who is who, once for every backend: tenants, bearer tokens, console grants,
//! agents with their inbox depth, client reports and client settings.
//!
//! Only hashes are stored: a token, a session id and a login ticket never are (I11).
//! Names are unique per tenant (agents) or overall (tenants) by the schema; a second
//! writer of the same name, on any instance, meets the unique index, which answers
//! for it where a read-then-insert could not (two readers both find the name free).

use super::Driver;
use super::audit::{self, AuditStatements};
use super::lineage::{self, LineageStatements};
use crate::clock::Millis;
use crate::rows::add_count;
use crate::*;
use async_trait::async_trait;
use std::collections::BTreeMap;

/// A token row to insert.
pub(crate) struct NewToken<'a> {
    pub(crate) hash: &'a [u8],
    pub(crate) tenant: TenantId,
    pub(crate) agent: Option<AgentId>,
    pub(crate) scopes: &'a [String],
    pub(crate) label: &'a str,
    pub(crate) now: Millis,
    /// The credential that approved this one (a login's), whose revocation ends it
    /// (`lineage.rs`).
    pub(crate) parent: Option<&'a [u8]>,
}

/// One agent's events of one status (`None`, with `count` 0: an agent without
/// events), as the depth statement groups them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DepthCount {
    pub(crate) agent_id: AgentId,
    pub(crate) tenant_id: TenantId,
    pub(crate) agent_name: String,
    pub(crate) status: Option<String>,
    pub(crate) count: u64,
    /// The earliest `available_at` of the group's pending events.
    pub(crate) oldest_pending_at: Option<Millis>,
}

/// `touch_agent` leaves a `last_seen_at` this recent alone: a busy agent would
/// otherwise rewrite its row (and, on PostgreSQL, make a dead tuple) on every request.
pub(crate) const SEEN_RESOLUTION_MS: Millis = 1000;

/// The statements of the directory (`store/statements/directory.rs`). Each is one
/// statement: in `tx`, or, where it says so, alone on the read or the write pool.
#[async_trait]
pub(crate) trait DirectoryStatements: Driver {
    /// The tenant called `name` (read pool).
    async fn tenant_named(&self, name: &str) -> StoreResult<Option<TenantId>>;
    /// Inserts a tenant; `false`: the name is taken (the transaction is then to be
    /// abandoned: PostgreSQL has ended it).
    async fn insert_tenant(
        &self,
        tx: &mut Self::Tx,
        id: TenantId,
        name: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Every tenant with its number of agents, by name (read pool).
    async fn tenants_with_counts(&self) -> StoreResult<Vec<TenantRecord>>;
    /// Replaces a token's scopes (write pool).
    async fn update_token_scopes(&self, hash: &[u8], scopes: &[String]) -> StoreResult<()>;

    async fn insert_token_row(&self, tx: &mut Self::Tx, token: &NewToken<'_>) -> StoreResult<()>;
    /// The token with this hash, unless revoked, with its agent's name (read pool).
    async fn live_token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>>;
    /// Revokes every live token of `agent`; how many.
    async fn revoke_agent_tokens(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<u64>;
    /// `tenant`'s tokens, live and revoked, oldest first (read pool).
    async fn tokens_of(&self, tenant: TenantId) -> StoreResult<Vec<CredentialRow>>;

    /// Forgets the grants expired at `now`.
    async fn delete_expired_grants(&self, tx: &mut Self::Tx, now: Millis) -> StoreResult<()>;
    async fn insert_grant_row(
        &self,
        tx: &mut Self::Tx,
        grant: &NewGrant<'_>,
        now: Millis,
    ) -> StoreResult<()>;
    /// The grant with this hash and kind, unexpired at `now`, its token not revoked,
    /// read in `tx` or else on the read pool.
    async fn live_grant(
        &self,
        tx: Option<&mut Self::Tx>,
        hash: &[u8],
        kind: GrantKind,
        now: Millis,
    ) -> StoreResult<Option<Grant>>;
    /// Deletes the grant with this hash and kind, live or not; whether there was one.
    async fn delete_grant_of_kind(
        &self,
        tx: &mut Self::Tx,
        hash: &[u8],
        kind: GrantKind,
    ) -> StoreResult<bool>;
    /// Deletes the grant with this hash, of any kind (write pool).
    async fn delete_grant_row(&self, hash: &[u8]) -> StoreResult<()>;

    /// Inserts an agent; `false`: its name is taken in the tenant (the transaction
    /// is then to be abandoned: PostgreSQL has ended it).
    async fn insert_agent(&self, tx: &mut Self::Tx, agent: &AgentRecord) -> StoreResult<bool>;
    /// An agent of `tenant` by id (its canonical form) or else by name, read
    /// outside a write transaction (read pool).
    async fn agent_by_key(&self, tenant: TenantId, key: &str) -> StoreResult<Option<AgentRecord>>;
    /// `tenant`'s agents by name (read pool).
    async fn agents_of(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>>;
    /// Sets the agent's `last_seen_at` to `now` unless it is `seen_after` or later,
    /// in `tx` or else on its own (write pool).
    async fn note_seen(
        &self,
        tx: Option<&mut Self::Tx>,
        agent: AgentId,
        now: Millis,
        seen_after: Millis,
    ) -> StoreResult<()>;
    /// Every agent (of `tenant`, or all) with its events grouped by status, in one
    /// statement, so one snapshot (read pool).
    async fn depth_counts(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthCount>>;

    /// Inserts or replaces `agent`'s report (write pool).
    async fn upsert_client_report(
        &self,
        agent: AgentId,
        report: &str,
        now: Millis,
    ) -> StoreResult<()>;
    /// `tenant`'s reports by agent name (read pool).
    async fn client_reports_of(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>>;

    /// Inserts or replaces a row of client settings (write pool); `agent` `""` is
    /// the tenant's row.
    async fn upsert_client_settings(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: &str,
        settings: ClientSettings,
        updated_by: &str,
        now: Millis,
    ) -> StoreResult<()>;
    /// Deletes a row of client settings; whether there was one.
    async fn delete_client_settings_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: &str,
    ) -> StoreResult<bool>;
    /// `tenant`'s rows of client settings, its own first (read pool).
    async fn client_settings_of(&self, tenant: TenantId) -> StoreResult<Vec<ClientSettingsRow>>;

    /// Reads a live grant and deletes it (used or not, valid or not: a presented
    /// ticket is gone), so a ticket works once even when two requests, on any
    /// instances, race for it: the second `DELETE` waits for the first one's row
    /// lock and then deletes nothing, and only the request whose delete took the row
    /// gets the grant. Its own transaction (PostgreSQL: one statement,
    /// `DELETE … RETURNING`).
    async fn take_live_grant(
        &self,
        hash: &[u8],
        kind: GrantKind,
        now: Millis,
    ) -> StoreResult<Option<Grant>>;
}

/// The tenant called `name`, created if missing. Several instances may start at
/// once: when another one inserts the name first, its tenant is the one.
pub(super) async fn ensure_tenant<D: DirectoryStatements>(
    d: &D,
    name: &str,
    now: Millis,
) -> StoreResult<TenantId> {
    if let Some(id) = d.tenant_named(name).await? {
        return Ok(id);
    }
    let mut tx = d.begin_write().await?;
    if d.insert_tenant(&mut tx, TenantId::new(), name, now).await? {
        d.commit(tx, &[]).await?;
    }
    d.tenant_named(name).await?.ok_or(StoreError::NotFound)
}

pub(super) async fn insert_token<D: DirectoryStatements + AuditStatements>(
    d: &D,
    token: &NewToken<'_>,
    note: Option<&AuditNote>,
) -> StoreResult<()> {
    let mut tx = d.begin_write().await?;
    d.insert_token_row(&mut tx, token).await?;
    if let Some(note) = note {
        audit::write(
            d,
            &mut tx,
            token.tenant,
            note,
            "token_created",
            1,
            token.now,
        )
        .await?;
    }
    d.commit(tx, &[]).await
}

/// Revokes `tenant`'s live tokens `roots` and every credential they approved
/// (`lineage.rs`), with the audit row of `action`, in one transaction; how many
/// were live (no row when none was).
pub(super) async fn revoke<D: DirectoryStatements + AuditStatements + LineageStatements>(
    d: &D,
    tenant: TenantId,
    roots: Roots<'_>,
    note: &AuditNote,
    action: &str,
    now: Millis,
) -> StoreResult<u64> {
    let mut tx = d.begin_write().await?;
    let roots = match roots {
        Roots::Token(hash) => vec![hash.to_vec()],
        Roots::Agent(agent) => d.live_tokens_of(&mut tx, tenant, agent).await?,
    };
    let revoked = lineage::revoke_tree(d, &mut tx, tenant, &roots, now).await?;
    if revoked > 0 {
        audit::write(d, &mut tx, tenant, note, action, revoked, now).await?;
    }
    d.commit(tx, &[]).await?;
    Ok(revoked)
}

/// What a revocation starts from.
#[derive(Clone, Copy)]
pub(super) enum Roots<'a> {
    Token(&'a [u8]),
    /// Every live token of the agent.
    Agent(AgentId),
}

/// An agent of `tenant` by id (its canonical form) or else by name.
pub(super) async fn agent<D: DirectoryStatements>(
    d: &D,
    tenant: TenantId,
    key: &str,
) -> StoreResult<AgentRecord> {
    d.agent_by_key(tenant, key)
        .await?
        .ok_or(StoreError::NotFound)
}

/// The `inbox_depth` rows from the grouped counts: one per agent, by name (agents of
/// one name in several tenants by id).
pub(crate) fn depth_rows(counts: Vec<DepthCount>) -> Vec<DepthRow> {
    let mut by_agent: BTreeMap<String, DepthRow> = BTreeMap::new();
    for c in counts {
        let d = by_agent
            .entry(c.agent_id.to_string())
            .or_insert_with(|| DepthRow {
                agent_id: c.agent_id,
                tenant_id: c.tenant_id,
                agent_name: c.agent_name.clone(),
                counts: StatusCounts::default(),
                oldest_pending_at: None,
            });
        if let Some(status) = &c.status {
            add_count(&mut d.counts, status, c.count);
        }
        if let Some(at) = c.oldest_pending_at {
            d.oldest_pending_at = Some(d.oldest_pending_at.map_or(at, |o| o.min(at)));
        }
    }
    let mut out: Vec<DepthRow> = by_agent.into_values().collect();
    out.sort_by(|a, b| a.agent_name.cmp(&b.agent_name));
    out
}
