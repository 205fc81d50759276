//! The store's seam for who is who: tenants, bearer tokens, console grants, agents
//! (with their inbox depth) and the client reports agents send about themselves.

use super::*;
use async_trait::async_trait;

/// A bearer token's record. The token itself is never stored, only its SHA-256.
#[derive(Debug, Clone)]
pub struct TokenRecord {
    pub tenant_id: TenantId,
    pub agent_id: Option<AgentId>,
    /// The agent's name, read with the token so no request looks it up again.
    pub agent_name: Option<String>,
    pub scopes: Vec<String>,
    /// The client settings of the token's agent over its tenant's (read with the
    /// token, so cached with it: a change reaches every instance within the
    /// lookup cache's TTL).
    pub client_settings: ClientSettings,
}

/// What a console grant is: a session (cookie) or a one-time login ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantKind {
    Session,
    Ticket,
}

impl GrantKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Ticket => "ticket",
        }
    }
}

/// A console grant to store. Only hashes: the session id and ticket never are.
#[derive(Debug, Clone)]
pub struct NewGrant<'a> {
    pub hash: &'a [u8],
    pub kind: GrantKind,
    pub tenant: TenantId,
    /// The token it came from; revoking that token ends the grant.
    pub token_hash: &'a [u8],
    /// Never more than the token's scopes.
    pub scopes: &'a [String],
    pub expires_at: Millis,
}

/// A live console grant.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Who it acts as, with the grant's own scopes.
    pub record: TokenRecord,
    pub token_hash: Vec<u8>,
    pub expires_at: Millis,
}

#[derive(Debug, Clone)]
pub struct AgentRecord {
    pub id: AgentId,
    pub tenant_id: TenantId,
    pub name: String,
    pub head_seq: u64,
    pub low_water: u64,
    pub created_at: Millis,
    pub last_seen_at: Option<Millis>,
}

impl AgentRecord {
    /// This agent as the actor of history rows.
    pub fn actor(&self) -> Actor {
        Actor::Agent {
            id: self.id,
            name: self.name.clone(),
        }
    }

    /// A wake-up for this agent's inbox.
    pub fn wake(&self, cursor_hint: u64) -> Wake {
        Wake {
            tenant_id: self.tenant_id,
            agent_id: self.id,
            cursor_hint,
        }
    }
}

/// One row of the `inbox_depth` gauge.
#[derive(Debug, Clone)]
pub struct DepthRow {
    pub agent_id: AgentId,
    pub tenant_id: TenantId,
    pub agent_name: String,
    pub counts: StatusCounts,
    pub oldest_pending_at: Option<Millis>,
}

/// A stored client report.
#[derive(Debug, Clone)]
pub struct ClientReportRow {
    pub agent_id: AgentId,
    pub name: String,
    pub report: String,
    pub received_at: Millis,
}

/// A stored row of client settings: the tenant's (`agent_id` `None`) or an agent's.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSettingsRow {
    pub agent_id: Option<AgentId>,
    /// The agent's name (`None` for the tenant's row).
    pub name: Option<String>,
    pub settings: ClientSettings,
    pub updated_at: Millis,
    pub updated_by: String,
}

/// A tenant as the deployment admin lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRecord {
    pub id: TenantId,
    pub name: String,
    pub created_at: Millis,
    /// How many agents it has.
    pub agents: u64,
}

/// The first operator token of a new tenant (its hash only, I11).
#[derive(Debug, Clone, Copy)]
pub struct NewOperator<'a> {
    pub token_hash: &'a [u8],
    pub scopes: &'a [String],
    pub label: &'a str,
}

/// A stored token as operators list it: never the token, and its hash only for the
/// HTTP layer to derive a public id from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialRow {
    pub hash: Vec<u8>,
    pub agent_id: Option<AgentId>,
    pub agent_name: Option<String>,
    pub scopes: Vec<String>,
    pub label: String,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
    /// The credential that approved it (a login's), if any.
    pub parent_hash: Option<Vec<u8>>,
}

/// Tenants, tokens (hashes only, I11), console sessions and one-time login tickets,
/// agents and their client reports.
#[async_trait]
pub trait DirectoryStore: Send + Sync {
    // --- tenants and tokens ---
    async fn ensure_tenant(&self, name: &str, now: Millis) -> StoreResult<TenantId>;
    /// A new tenant with its first operator token, in one transaction;
    /// [`StoreError::Conflict`] when the name is taken.
    /// `by`: the deployment admin's tenant and note, for its audit row.
    async fn create_tenant(
        &self,
        name: &str,
        operator: &NewOperator<'_>,
        by: Option<(TenantId, &AuditNote)>,
        now: Millis,
    ) -> StoreResult<TenantRecord>;
    /// Every tenant with its number of agents, by name.
    async fn tenants(&self) -> StoreResult<Vec<TenantRecord>>;
    /// The tenant called `name`, if any.
    async fn tenant_by_name(&self, name: &str) -> StoreResult<Option<TenantId>>;
    /// Replaces a token's scopes (the start-up upgrade of the deployment admin's
    /// token, which predates the `admin` scope).
    async fn set_token_scopes(&self, hash: &[u8], scopes: &[String]) -> StoreResult<()>;
    /// A token of no agent (an operator's, a scraper's).
    async fn insert_token(
        &self,
        hash: &[u8],
        tenant: TenantId,
        scopes: &[String],
        label: &str,
        note: Option<&AuditNote>,
        now: Millis,
    ) -> StoreResult<()>;
    async fn token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>>;
    /// `tenant`'s tokens (static credentials), live and revoked, oldest first.
    async fn credentials(&self, tenant: TenantId) -> StoreResult<Vec<CredentialRow>>;
    /// Revokes `tenant`'s token with this hash and every credential it approved
    /// (its logins, theirs, …), with the audit row; how many were live (a token of
    /// another tenant is not touched). Their console sessions end with them.
    async fn revoke_credential(
        &self,
        tenant: TenantId,
        hash: &[u8],
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<u64>;
    /// Revokes every live token of `agent` and what they approved, with the audit
    /// row; how many.
    async fn revoke_agent_credentials(
        &self,
        tenant: TenantId,
        agent: AgentId,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<u64>;

    // --- console sessions and one-time login tickets (hashes only, I11) ---
    /// Stores a grant; also forgets expired ones.
    /// With `note`, the audit row of an operator's login link.
    async fn insert_grant(
        &self,
        grant: &NewGrant<'_>,
        note: Option<&AuditNote>,
        now: Millis,
    ) -> StoreResult<()>;
    /// A live grant of `kind` (unexpired, its token not revoked).
    async fn grant(&self, hash: &[u8], kind: GrantKind, now: Millis) -> StoreResult<Option<Grant>>;
    /// Like [`DirectoryStore::grant`], but deletes it at once: single use, even when
    /// two requests race for it.
    async fn take_grant(
        &self,
        hash: &[u8],
        kind: GrantKind,
        now: Millis,
    ) -> StoreResult<Option<Grant>>;
    async fn delete_grant(&self, hash: &[u8]) -> StoreResult<()>;

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
    ) -> StoreResult<AgentRecord>;
    /// Finds an agent of `tenant` by id or by name.
    async fn agent(&self, tenant: TenantId, key: &str) -> StoreResult<AgentRecord>;
    async fn touch_agent(&self, agent: AgentId, now: Millis) -> StoreResult<()>;
    /// Every agent's events by status (of `tenant`, or of all tenants), by name.
    async fn depth(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>>;
    async fn agents(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>>;

    // --- client reports (the SDK's view of its outbox and consumer) ---
    /// Replaces `agent`'s stored report (`report` is its JSON).
    async fn put_client_report(&self, agent: AgentId, report: &str, now: Millis)
    -> StoreResult<()>;
    /// Every stored report of `tenant`'s agents: (agent, name, JSON, received at).
    async fn client_reports(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>>;

    // --- remote client settings (what the agents' SDKs obey) ---
    /// Replaces the settings of `agent` (`None`: the tenant's row).
    async fn put_client_settings(
        &self,
        tenant: TenantId,
        agent: Option<AgentId>,
        settings: ClientSettings,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<()>;
    /// Removes the settings of `agent` (`None`: the tenant's); whether there were any.
    async fn delete_client_settings(
        &self,
        tenant: TenantId,
        agent: Option<AgentId>,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<bool>;
    /// `tenant`'s rows: its own first, then its agents' by name.
    async fn client_settings(&self, tenant: TenantId) -> StoreResult<Vec<ClientSettingsRow>>;
}
