//! The Switchboard store: every durable state change, written once (`engine`, the
//! shared statements in `statements`) and run by one driver per backend behind a
//! feature: `sqlite` (the embedded default), `postgres` and `mysql` (MariaDB /
//! MySQL). The same conformance suite (`engine/suite`) runs on each.
//!
//! Below the server: this crate imports nothing of it. What both need (the clock,
//! the archive record, PKCE, the store's test seams) lives here.
//!
//! Every method takes `now` (milliseconds) from the server's [`Clock`]: the store
//! never reads the wall clock itself. Write methods return the wake-ups ([`Wake`])
//! the caller sends **after** the method returned, i.e. after commit (I1).

// A build with fewer drivers (the desktop app's: SQLite only) leaves the parts only
// the others use (the retry loop, the migration steps, their dialects) unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code, unused_imports, unused_macros)
)]

mod callbacks;
pub mod clock;
mod deletion;
pub(crate) mod dialect;
mod directory;
pub(crate) mod engine;
pub mod hooks;
mod identity;
mod inbox;
mod jobs;
pub mod lease_rules;
mod leasing;
pub(crate) mod migrate;
#[cfg(feature = "mysql")]
pub mod mysql;
pub mod pkce;
#[cfg(feature = "postgres")]
pub mod postgres;
mod record_rules;
mod request_keys;
mod retries;
pub(crate) mod rows;
mod signin;
#[cfg(feature = "sqlite")]
pub mod sqlite;
mod statements;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use callbacks::*;
pub use clock::{Clock, ManualClock, Millis, SystemClock};
pub use deletion::*;
pub use directory::*;
pub use engine::Engine;
pub use engine::callbacks::CallbackStore;
pub use engine::deletion::DeletionStore;
pub use engine::directory_store::DirectoryStore;
pub use engine::idempotency::IdemStore;
pub use engine::identity::IdentityStore;
pub use engine::inbox_transactions::InboxStore;
pub use engine::jobs::JobStore;
pub use engine::lease_store::LeaseStore;
pub use engine::maintenance::MaintenanceStore;
pub use engine::ops::OpsStore;
pub use engine::records::RecordStore;
pub use engine::request_keys::RequestKeyStore;
pub use engine::send::SendStore;
pub use engine::signin::SignInStore;
pub use hooks::StoreHooks;
pub use identity::*;
pub use inbox::*;
pub use jobs::*;
pub use leasing::*;
pub use request_keys::*;
pub use retries::RetryCount;
pub use signin::*;

use async_trait::async_trait;
use switchboard_proto::{
    AgentId, AuditEntry, BulkAction, ClaimToken, ClaimedEvent, ClientSettings, EventDetail,
    EventFilter, EventId, EventListQuery, EventState, InboxPage, OpsEventPage, Room, RoomId,
    RoomReceipt, SendReceipt, Snapshot, StatusCounts, TenantId,
};

mod error;
pub use error::StoreError;
pub type StoreResult<T> = Result<T, StoreError>;

/// Who is acting, for event history and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    Operator,
    Agent { id: AgentId, name: String },
    System(&'static str),
}

impl Actor {
    /// The actor's stable identity, for holder checks (leases, fencing tokens): an
    /// agent by its id, which a later agent given a deleted one's name never
    /// shares; unlike the text ([`Display`](std::fmt::Display)), which names it.
    pub fn key(&self) -> String {
        match self {
            Self::Operator => "operator".to_owned(),
            Self::Agent { id, .. } => format!("agent:{id}"),
            Self::System(who) => format!("system:{who}"),
        }
    }
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

/// An operator's action as the audit log names it: who did it and what it acted on
/// (a name or a public id, never a secret, I11). The handler makes it; the store
/// writes its row in the transaction of the change (`engine/audit.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNote {
    /// `Actor`'s text (`operator`, `agent:<name>`).
    pub actor: String,
    /// What the action is about: `agent:<name>`, `token:<token_id>`,
    /// `device:<user_code>`, `tenant:<name>`, `callback:<id>`, `lease:<id>`, …
    pub target: String,
    pub detail: Option<String>,
}

impl AuditNote {
    pub fn new(actor: &Actor, target: impl Into<String>) -> Self {
        Self {
            actor: actor.to_string(),
            target: target.into(),
            detail: None,
        }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
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

/// Where a store delivers wake-ups (the server's hub implements it): its own
/// commits' right after each commit returned (I1), and, on a database shared by
/// several instances, the others' as [`Store::listen`] hears them. The one road of
/// every wake-up; set once with [`Store::deliver_wakes_to`].
pub trait WakeSink: Send + Sync + 'static {
    /// These inboxes reach these cursors now.
    fn wake(&self, wakes: &[Wake]);
    /// The feed from the other instances was interrupted (the database was lost
    /// and is back): anything may have been missed, so every subscriber should look
    /// again.
    fn wake_all(&self);
}

/// A store's [`WakeSink`], once set; until then wake-ups go nowhere (a store used
/// alone, in its tests and the benchmarks).
#[derive(Clone, Default)]
pub(crate) struct WakeOut(std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn WakeSink>>>);

impl WakeOut {
    /// Sets the sink; a second one is refused, and logged.
    pub(crate) fn set(&self, sink: std::sync::Arc<dyn WakeSink>) {
        if self.0.set(sink).is_err() {
            tracing::warn!("the store already delivers its wake-ups elsewhere");
        }
    }

    pub(crate) fn wake(&self, wakes: &[Wake]) {
        if let (false, Some(sink)) = (wakes.is_empty(), self.0.get()) {
            sink.wake(wakes);
        }
    }

    pub(crate) fn wake_all(&self) {
        if let Some(sink) = self.0.get() {
            sink.wake_all();
        }
    }
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
    /// When fewer events than asked for were claimed: the earliest `available_at`
    /// still ahead among the agent's pending events.
    pub next_available: Option<crate::clock::Millis>,
}

/// The result of one scavenger pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReapStats {
    /// Leases that expired: back to pending, or to the quarantine on the event's
    /// last attempt (those are also in `quarantined`).
    pub lease_expirations: u64,
    /// Events that went to the quarantine (attempts exhausted).
    pub quarantined: u64,
    /// Pending events past `expires_at`.
    pub expired: u64,
    pub wakes: Vec<Wake>,
    /// The same counts per tenant, for each tenant's own metrics (I9).
    pub by_tenant: std::collections::BTreeMap<TenantId, TenantReap>,
}

/// What one scavenger pass did to one tenant's events.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TenantReap {
    pub lease_expirations: u64,
    pub quarantined: u64,
    pub expired: u64,
}

impl ReapStats {
    /// Adds what another batch did.
    pub fn add(&mut self, other: ReapStats) {
        self.lease_expirations += other.lease_expirations;
        self.quarantined += other.quarantined;
        self.expired += other.expired;
        self.wakes.extend(other.wakes);
        for (tenant, r) in other.by_tenant {
            let mine = self.by_tenant.entry(tenant).or_default();
            mine.lease_expirations += r.lease_expirations;
            mine.quarantined += r.quarantined;
            mine.expired += r.expired;
        }
    }
}

/// The result of one retention pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RetentionStats {
    pub events_removed: u64,
    /// The write transactions that removed them (each at most `RETAIN_BATCH`).
    pub batches: u64,
    pub idempotency_removed: u64,
    /// Events written to the archive before their removal.
    pub archived: u64,
    /// The same per tenant, for each tenant's own metrics (I9).
    pub archived_by_tenant: std::collections::BTreeMap<TenantId, u64>,
    /// Why an archive write failed, when one did: those agents kept their events.
    pub held_back: Option<String>,
}

/// What an ack tells the metrics.
#[derive(Debug, Clone)]
pub struct Acked {
    pub state: EventState,
    /// From `available_at` to the ack, in milliseconds; `None` when this was a
    /// repeat of an ack that had already completed the event.
    pub latency_ms: Option<Millis>,
}

#[async_trait]
pub trait Store:
    CallbackStore
    + DeletionStore
    + DirectoryStore
    + IdemStore
    + IdentityStore
    + SignInStore
    + InboxStore
    + JobStore
    + LeaseStore
    + MaintenanceStore
    + OpsStore
    + RecordStore
    + RequestKeyStore
    + SendStore
    + Send
    + Sync
    + 'static
{
    /// A short name: `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;
    async fn ping(&self) -> StoreResult<()>;
    async fn close(&self);

    // --- several instances on one database ---
    /// Where every wake-up goes from now on ([`WakeSink`]); set once (a second
    /// sink is ignored, and logged).
    fn deliver_wakes_to(&self, sink: std::sync::Arc<dyn WakeSink>);
    /// Delivers to the sink the wake-ups that other server instances sharing this
    /// database committed, until `stop`. A backend that one process owns has none.
    async fn listen(&self, stop: tokio_util::sync::CancellationToken) {
        stop.cancelled().await;
    }
    /// The queue table's health (dead tuples, oldest open transaction), where the
    /// backend has such a thing.
    async fn health(&self) -> StoreResult<Option<switchboard_proto::QueueTableHealth>> {
        Ok(None)
    }
    /// How many times this process ran a write transaction again, per backend and
    /// database code (SQLSTATE or error number), since it started: one entry per
    /// code seen, none on SQLite. For the admin metric
    /// `transaction_retries_total{backend,code}`.
    fn transaction_retries(&self) -> Vec<RetryCount> {
        Vec::new()
    }
}
