//! The store's seam for who is who: tenants, bearer tokens, console grants, agents
//! (with their inbox depth) and the client reports agents send about themselves: its
//! records. The trait, [`DirectoryStore`](crate::DirectoryStore), is declared with its
//! one implementation in `engine/directory.rs`.

use super::*;

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
