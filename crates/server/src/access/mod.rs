//! Who may do what, below the HTTP layer: scopes, tokens (minting and hashing), the
//! principal a verified credential stands for, and the rate-limit buckets. `http`
//! keeps the extractors that build a [`Principal`] from a request, and the OAuth
//! endpoints; the application layer and the workers use what is here.
//!
//! A token is 32 random bytes, base64url, with a prefix that says what it is
//! (`sb_op_` operator, `sb_ag_` agent). Only its SHA-256 is stored. Scopes follow the
//! design: `ops:read`, `ops:write`, `agent:{agent_id}:inbox`, `messages:send`, and an
//! agent's least-privilege `agent:{agent_id}:read` (a token of that agent that may
//! only read: [`Principal::working_agent`] is `None` for it).

pub mod rate_limit;
pub mod replays;
pub mod sessions;

use crate::error::ApiError;
use crate::store::{Actor, AgentRecord};
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use switchboard_proto::{AgentId, ErrorCode, TenantId};

pub const SCOPE_OPS_READ: &str = "ops:read";
pub const SCOPE_OPS_WRITE: &str = "ops:write";
pub const SCOPE_SEND: &str = "messages:send";
/// `/metrics`: the scraping token's own tenant's series, nothing else.
pub const SCOPE_METRICS_READ: &str = "metrics:read";
/// The deployment admin: creates and lists tenants (`/api/v1/admin/*`). Only the
/// token `switchboard serve` writes carries it; it grants nothing in other tenants.
pub const SCOPE_ADMIN: &str = "admin";

/// Name of the console's session cookie.
pub const SESSION_COOKIE: &str = "sb_session";

pub fn operator_scopes() -> Vec<String> {
    [
        SCOPE_OPS_READ,
        SCOPE_OPS_WRITE,
        SCOPE_SEND,
        SCOPE_METRICS_READ,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Scopes of the token `switchboard serve` writes: the default tenant's operator and
/// the deployment admin.
pub fn admin_scopes() -> Vec<String> {
    let mut scopes = operator_scopes();
    scopes.push(SCOPE_ADMIN.to_owned());
    scopes
}

/// Scopes of a new agent token; `{agent_id}` is filled in by the store.
pub fn agent_scopes() -> Vec<String> {
    vec!["agent:{agent_id}:inbox".to_owned(), SCOPE_SEND.to_owned()]
}

pub fn inbox_scope(agent: AgentId) -> String {
    format!("agent:{agent}:inbox")
}

/// The least-privilege read scope of `agent` (the notifications seed's
/// `agent:project_A:read`): poll, subscribe, the snapshot, its rooms' logs and the
/// memory records it may see; no claim, ack, release, send or write.
pub fn read_scope(agent: AgentId) -> String {
    format!("agent:{agent}:read")
}

/// The agent whose read scope `scope` is, if it is one (`agent:{id}:read`).
pub fn read_scope_agent(scope: &str) -> Option<AgentId> {
    scope
        .strip_prefix("agent:")?
        .strip_suffix(":read")?
        .parse()
        .ok()
}

/// Whether a credential with `held` scopes may hand out `scope` (a token exchange,
/// and the check of the access token it made): one it has, or the read scope of an
/// agent whose inbox scope it has (reading is part of working an inbox).
pub fn grantable(held: &[String], scope: &str) -> bool {
    held.iter().any(|s| s == scope)
        || read_scope_agent(scope).is_some_and(|agent| held.contains(&inbox_scope(agent)))
}

/// A new random token with `prefix`.
pub fn generate_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!(
        "{prefix}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

pub fn hash_token(token: &str) -> Vec<u8> {
    token_digest(token).to_vec()
}

/// The SHA-256 of a token (or session id) as an array: the rate limiter's key.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Who is calling, from a verified bearer token.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant_id: TenantId,
    pub agent_id: Option<AgentId>,
    /// The agent's name (agent tokens), for history and audit rows.
    pub agent_name: Option<String>,
    pub scopes: Vec<String>,
    /// SHA-256 of the token this principal acts with (directly, or behind a session).
    pub token_hash: Vec<u8>,
    /// Set when the request was authenticated by the console's session cookie.
    pub session: Option<SessionRef>,
    /// The key an access token is bound to (its `cnf.jkt`, RFC 7638): every
    /// request with it must be signed by that key (`http/signatures.rs`).
    pub bound_key: Option<String>,
}

/// The console session behind a cookie-authenticated request.
#[derive(Debug, Clone)]
pub struct SessionRef {
    /// SHA-256 of the session id (the cookie's value is never kept).
    pub hash: Vec<u8>,
    pub expires_at: crate::clock::Millis,
}

impl Principal {
    /// The principal of the static token hashed `token_hash`, as its record says.
    pub fn of_token(record: crate::store::TokenRecord, token_hash: Vec<u8>) -> Self {
        Self {
            tenant_id: record.tenant_id,
            agent_id: record.agent_id,
            agent_name: record.agent_name,
            scopes: record.scopes,
            token_hash,
            session: None,
            bound_key: None,
        }
    }

    pub fn has(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    pub fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.has(scope) {
            Ok(())
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                if self.session.is_some() {
                    format!(
                        "this console session lacks the {scope:?} scope (it is read-only); \
                         log in with an operator token that has it"
                    )
                } else {
                    format!("this token lacks the {scope:?} scope; use a token that has it")
                },
            ))
        }
    }

    /// May this principal work `agent`'s inbox? Others get 404, not 403: they must not
    /// learn that the agent exists (I9). (An operator without `ops:write`, a read-only
    /// console session, is refused with 403 before the lookup: `inbox::inbox_agent`.)
    pub fn may_use_inbox(&self, agent: &AgentRecord) -> bool {
        agent.tenant_id == self.tenant_id
            && (self.has(&inbox_scope(agent.id)) || self.has(SCOPE_OPS_WRITE))
    }

    /// May this principal read `agent`'s inbox (poll, subscribe, the snapshot)?
    /// Whoever may work it, and a token with the agent's read scope. Others get 404.
    pub fn may_read_inbox(&self, agent: &AgentRecord) -> bool {
        self.may_use_inbox(agent)
            || (agent.tenant_id == self.tenant_id && self.has(&read_scope(agent.id)))
    }

    /// The agent this principal acts as with an agent's full rights (its inbox
    /// scope): `None` for operators and for an agent's read-only token.
    pub fn working_agent(&self) -> Option<AgentId> {
        self.agent_id.filter(|id| self.has(&inbox_scope(*id)))
    }

    /// Refuses an agent's read-only token (403: it is the agent's own, so saying so
    /// tells nothing): it may read, never change.
    pub fn refuse_read_only(&self) -> Result<(), ApiError> {
        match self.agent_id {
            Some(id) if self.working_agent().is_none() && self.has(&read_scope(id)) => {
                Err(ApiError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "this token has only the read scope {:?}: it may poll, subscribe, read \
                     the snapshot, its rooms and memory records, and change nothing; use the \
                     agent's own token (scope {:?}) to claim, ack, release, send or write",
                        read_scope(id),
                        inbox_scope(id)
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// May this principal scrape `/metrics`? A `metrics:read` token, or an operator
    /// (`ops:read`, which operator tokens minted before `metrics:read` existed carry).
    pub fn may_read_metrics(&self) -> bool {
        self.has(SCOPE_METRICS_READ) || self.has(SCOPE_OPS_READ)
    }

    /// The principal's own identity for history and audit rows.
    pub fn actor(&self) -> Actor {
        match self.agent_id {
            None => Actor::Operator,
            Some(id) => Actor::Agent {
                id,
                name: self.agent_name.clone().unwrap_or_default(),
            },
        }
    }

    /// The audit log's note of an action of this principal on `target`.
    pub fn note(&self, target: impl Into<String>) -> crate::store::AuditNote {
        crate::store::AuditNote::new(&self.actor(), target)
    }

    /// A stable name for idempotency scoping.
    pub fn key_scope(&self) -> String {
        match self.agent_id {
            Some(id) => format!("agent:{id}"),
            None => "operator".to_owned(),
        }
    }
}

/// The public id of a stored token: the first 8 bytes of its SHA-256, in hex. It
/// names the token in lists and URLs and cannot be used to authenticate.
pub fn token_id(hash: &[u8]) -> String {
    hash.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
