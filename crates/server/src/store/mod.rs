//! The storage seam. One [`Store`] trait, one implementation per backend (SQLite now;
//! PostgreSQL next), and one conformance suite in `tests/` that runs unchanged
//! against each.
//!
//! Every method takes `now` (milliseconds) from the server's [`Clock`](crate::Clock):
//! the store never reads the wall clock itself. Write methods return the wake-ups
//! ([`Wake`]) the caller sends **after** the method returned, i.e. after commit (I1).

pub(crate) mod dialect;
pub(crate) mod engine;
mod jobs;
pub(crate) mod lease_common;
mod leasing;
pub mod mysql;
pub mod postgres;
pub(crate) mod rows;
pub mod sqlite;
mod statements;

pub use jobs::*;
pub use leasing::*;

use crate::clock::Millis;
use async_trait::async_trait;
use switchboard_proto::{
    AgentId, AuditEntry, BulkAction, ClaimToken, ClaimedEvent, EventDetail, EventFilter, EventId,
    EventListQuery, EventState, InboxPage, OpsEventPage, Room, RoomId, RoomReceipt, SendReceipt,
    Snapshot, StatusCounts, TenantId,
};

pub use crate::error::StoreError;
pub type StoreResult<T> = Result<T, StoreError>;

/// A bearer token's record. The token itself is never stored, only its SHA-256.
#[derive(Debug, Clone)]
pub struct TokenRecord {
    pub tenant_id: TenantId,
    pub agent_id: Option<AgentId>,
    /// The agent's name, read with the token so no request looks it up again.
    pub agent_name: Option<String>,
    pub scopes: Vec<String>,
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

/// Who is acting, for event history and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    Operator,
    Agent { id: AgentId, name: String },
    System(&'static str),
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Operator => f.write_str("operator"),
            Self::Agent { name, .. } => write!(f, "agent:{name}"),
            Self::System(who) => write!(f, "system:{who}"),
        }
    }
}

/// A validated message, ready to be written.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// The payload's JSON text.
    pub payload: String,
    pub correlation_id: Option<String>,
    pub priority: i32,
    pub available_at: Millis,
    pub expires_at: Option<Millis>,
    pub max_attempts: u32,
}

/// An idempotency record's identity. The key is hashed before it gets here (I11).
#[derive(Debug, Clone)]
pub struct IdemKey {
    pub tenant_id: TenantId,
    pub principal: String,
    pub key_hash: Vec<u8>,
    pub fingerprint: Vec<u8>,
    /// The server process (instance) running the request. While the key is in
    /// flight under this owner, `idem_begin` of the same owner takes it over: the
    /// caller guarantees that no other request of this owner runs with the key.
    pub owner: Vec<u8>,
}

/// A stored response replayed on an identical retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: String,
}

/// What the first phase of an idempotent request found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdemBegin {
    /// No record: one was written as in flight; go ahead.
    Fresh,
    /// Done before with the same body: replay this.
    Replay(StoredResponse),
    /// Used before with a different body.
    Mismatch,
    /// The first request with this key has not finished.
    InFlight,
}

/// A wake-up to send after commit: `agent`'s inbox now reaches `cursor_hint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    pub tenant_id: TenantId,
    pub agent_id: AgentId,
    pub cursor_hint: u64,
}

/// A write's result plus its wake-ups.
#[derive(Debug)]
pub struct Committed<T> {
    pub value: T,
    pub wakes: Vec<Wake>,
}

/// How a release ended.
#[derive(Debug, Clone)]
pub struct ReleaseArgs {
    pub delay_ms: Millis,
    pub error: Option<String>,
    pub terminal: bool,
}

/// What a claim did: the events it handed out, and the agent's expired leases it
/// returned first (counted like the scavenger's in the metrics).
#[derive(Debug)]
pub struct Claimed {
    pub events: Vec<ClaimedEvent>,
    pub reaped: ReapStats,
}

/// The result of one scavenger pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReapStats {
    /// Leases that expired and went back to pending.
    pub lease_expirations: u64,
    /// Events that went to the quarantine (attempts exhausted).
    pub quarantined: u64,
    /// Pending events past `expires_at`.
    pub expired: u64,
    pub wakes: Vec<Wake>,
}

/// The result of one retention pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RetentionStats {
    pub events_removed: u64,
    pub idempotency_removed: u64,
}

/// What an ack tells the metrics.
#[derive(Debug, Clone)]
pub struct Acked {
    pub state: EventState,
    /// From `available_at` to the ack, in milliseconds; `None` when this was a
    /// repeat of an ack that had already completed the event.
    pub latency_ms: Option<Millis>,
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

#[async_trait]
pub trait Store: JobStore + LeaseStore + RecordStore + Send + Sync + 'static {
    /// A short name: `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    async fn ping(&self) -> StoreResult<()>;
    async fn close(&self);

    // --- tenants and tokens ---
    async fn ensure_tenant(&self, name: &str, now: Millis) -> StoreResult<TenantId>;
    async fn insert_token(
        &self,
        hash: &[u8],
        tenant: TenantId,
        agent: Option<AgentId>,
        scopes: &[String],
        label: &str,
        now: Millis,
    ) -> StoreResult<()>;
    async fn token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>>;

    // --- console sessions and one-time login tickets (hashes only, I11) ---
    /// Stores a grant; also forgets expired ones.
    async fn insert_grant(&self, grant: &NewGrant<'_>, now: Millis) -> StoreResult<()>;
    /// A live grant of `kind` (unexpired, its token not revoked).
    async fn grant(&self, hash: &[u8], kind: GrantKind, now: Millis) -> StoreResult<Option<Grant>>;
    /// Like [`Store::grant`], but deletes it in the same statement: single use.
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
        now: Millis,
    ) -> StoreResult<AgentRecord>;
    /// Finds an agent of `tenant` by id or by name.
    async fn agent(&self, tenant: TenantId, key: &str) -> StoreResult<AgentRecord>;
    async fn touch_agent(&self, agent: AgentId, now: Millis) -> StoreResult<()>;
    async fn depth(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>>;
    async fn agents(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>>;

    // --- idempotency (I8) ---
    async fn idem_begin(
        &self,
        key: &IdemKey,
        now: Millis,
        lock_ms: Millis,
        ttl_ms: Millis,
    ) -> StoreResult<IdemBegin>;
    /// Forgets an in-flight key whose request failed transiently, so a retry can run.
    /// Only while `key.owner` still holds it: a key taken over by another instance
    /// after its lock ran out is not this request's to forget.
    async fn idem_abort(&self, key: &IdemKey) -> StoreResult<()>;
    /// At start: forgets in-flight keys left by a process that died mid-request. Only
    /// for a backend that one process owns (SQLite); a shared backend relies on the
    /// in-flight lock expiring instead.
    async fn idem_recover(&self) -> StoreResult<u64>;
    /// Stores a final (error) response for the key, replayed on retries.
    async fn idem_complete(&self, key: &IdemKey, response: &StoredResponse) -> StoreResult<()>;

    // --- sends (business writes that fan out into inboxes, I1) ---
    async fn send_direct(
        &self,
        tenant: TenantId,
        to: AgentId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<SendReceipt>>;
    async fn send_room(
        &self,
        tenant: TenantId,
        room: RoomId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<RoomReceipt>>;

    // --- rooms ---
    async fn create_room(&self, tenant: TenantId, name: &str, now: Millis) -> StoreResult<Room>;
    async fn room(&self, tenant: TenantId, key: &str) -> StoreResult<Room>;
    async fn set_member(
        &self,
        tenant: TenantId,
        room: RoomId,
        agent: AgentId,
        member: bool,
        now: Millis,
    ) -> StoreResult<Room>;

    // --- the agent's inbox ---
    async fn poll(&self, agent: AgentId, after: u64, limit: u32) -> StoreResult<InboxPage>;
    async fn claim(
        &self,
        agent: &AgentRecord,
        limit: u32,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<Claimed>;
    async fn ack(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Acked>;
    /// Acks several events in one transaction; each entry's result as [`Store::ack`]
    /// would give it. A database error fails the whole batch (nothing of it kept).
    async fn ack_batch(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<StoreResult<Acked>>>;
    async fn release(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        args: &ReleaseArgs,
        now: Millis,
    ) -> StoreResult<Committed<EventState>>;
    async fn extend(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<EventState>;
    async fn snapshot(&self, agent: &AgentRecord, now: Millis) -> StoreResult<Snapshot>;

    // --- background work ---
    /// Expired leases back to pending (or to the quarantine at the attempt limit, I5),
    /// and pending events past `expires_at` to expired.
    async fn reap(&self, now: Millis) -> StoreResult<ReapStats>;
    /// Removes terminal events older than `cutoff` (advancing each low-water mark, I6)
    /// and idempotency records past their expiry.
    async fn retain(&self, cutoff: Millis, now: Millis) -> StoreResult<RetentionStats>;

    // --- operators ---
    async fn list_events(
        &self,
        tenant: TenantId,
        query: &EventListQuery,
        limit: u32,
    ) -> StoreResult<OpsEventPage>;
    async fn event_detail(&self, tenant: TenantId, event: EventId) -> StoreResult<EventDetail>;
    /// Applies an action at once, in one transaction: refused with
    /// [`StoreError::TooMany`] when more than `max` events match (that is a job).
    async fn bulk(
        &self,
        tenant: TenantId,
        scope: &Scope<'_>,
        max: u64,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Committed<(u64, i64)>>;
    async fn audit(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<AuditEntry>>;

    // --- client reports (the SDK's view of its outbox and consumer) ---
    /// Replaces `agent`'s stored report (`report` is its JSON).
    async fn put_client_report(&self, agent: AgentId, report: &str, now: Millis)
    -> StoreResult<()>;
    /// Every stored report of `tenant`'s agents: (agent, name, JSON, received at).
    async fn client_reports(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>>;

    // --- several instances on one database ---
    /// Delivers into `hub` the wake-ups that other server instances sharing this
    /// database committed, until `stop`. A backend that one process owns has none.
    async fn listen(&self, _hub: crate::hub::Hub, stop: tokio_util::sync::CancellationToken) {
        stop.cancelled().await;
    }
    /// The queue table's health (dead tuples, oldest open transaction), where the
    /// backend has such a thing.
    async fn health(&self) -> StoreResult<Option<switchboard_proto::QueueTableHealth>> {
        Ok(None)
    }
}

/// A stored client report.
#[derive(Debug, Clone)]
pub struct ClientReportRow {
    pub agent_id: AgentId,
    pub name: String,
    pub report: String,
    pub received_at: Millis,
}
