//! The agent's inbox and the background passes over every inbox, as the server
//! calls them (written once, in `engine/inbox.rs` and `engine/maintenance.rs`).

use crate::clock::Millis;
pub use crate::engine::inbox_transactions::ClaimArgs;
use crate::{
    Acked, AgentRecord, Claimed, Committed, ReapStats, ReleaseArgs, RetentionStats, StoreResult,
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_proto::{
    AgentId, ClaimToken, EventId, EventState, HistoryEntry, InboxEvent, InboxPage, Snapshot,
    TenantId,
};

/// One archived event (the archive sink's record, `--archive-dir`): the event as its inbox showed it last, and its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedEvent {
    pub tenant_id: TenantId,
    /// The agent's name when the event was archived.
    pub agent: String,
    pub event: InboxEvent,
    pub history: Vec<HistoryEntry>,
}

/// The agent's inbox: poll by cursor, claim under a lease, ack, release, extend.
#[async_trait]
pub trait InboxStore: Send + Sync {
    async fn poll(&self, agent: AgentId, after: u64, limit: u32) -> StoreResult<InboxPage>;
    /// Claims up to `limit` events until `now + lease_ms`. With an `attempt` id
    /// that already claimed events whose leases still run (its answer was lost),
    /// returns those again, tokens and all, and claims nothing new.
    async fn claim(
        &self,
        agent: &AgentRecord,
        limit: u32,
        lease_ms: Millis,
        attempt: Option<uuid::Uuid>,
        now: Millis,
    ) -> StoreResult<Claimed>;
    /// Acks `entries` (as [`InboxStore::ack_batch`]) and claims (as
    /// [`InboxStore::claim`]) in one transaction: one commit for both. `entries`
    /// may be empty.
    async fn ack_and_claim(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        args: ClaimArgs,
        now: Millis,
    ) -> StoreResult<(Vec<StoreResult<Acked>>, Claimed)>;
    async fn ack(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Acked>;
    /// Acks several events in one transaction; each entry's result as
    /// [`InboxStore::ack`] would give it. A database error fails the whole batch;
    /// acks are idempotent, so the caller may send it again.
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
}

/// The background passes every instance runs.
#[async_trait]
pub trait MaintenanceStore: Send + Sync {
    /// Expired leases back to pending (or to the quarantine at the attempt limit, I5),
    /// and pending events past `expires_at` to expired.
    async fn reap(&self, now: Millis) -> StoreResult<ReapStats>;
    /// Removes terminal events older than `cutoff` (advancing each low-water mark, I6)
    /// and idempotency records past their expiry. With an `archive`, each agent's
    /// events are written to it first, in batches, and an agent whose batch could not
    /// be written keeps its events ([`RetentionStats::held_back`]).
    async fn retain(
        &self,
        cutoff: Millis,
        now: Millis,
        archive: Option<&dyn ArchiveSink>,
    ) -> StoreResult<RetentionStats>;
    /// Deletes `table`'s rows older than `before` (each table's own age: see
    /// [`Horizon`]), in batches; how many.
    async fn trim(&self, table: Horizon, before: Millis) -> StoreResult<u64>;
}

/// A table that only grows, trimmed by age (`config::Horizons`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// `audit_log` by `at` (a running job's row stays).
    AuditLog,
    /// `lease_audit` by `at`.
    LeaseAudit,
    /// `fencing_rejections` by `at`.
    FencingRejections,
    /// Revoked `tokens` by `revoked_at`.
    RevokedTokens,
    /// `refresh_tokens` by `created_at`.
    RefreshTokens,
    /// `issued_tokens` by `issued_at`, unless a live lease carries the token.
    IssuedTokens,
}

impl Horizon {
    pub const ALL: [Self; 6] = [
        Self::AuditLog,
        Self::LeaseAudit,
        Self::FencingRejections,
        Self::RevokedTokens,
        Self::RefreshTokens,
        Self::IssuedTokens,
    ];

    /// The table's name (logs, metrics, `doctor`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AuditLog => "audit_log",
            Self::LeaseAudit => "lease_audit",
            Self::FencingRejections => "fencing_rejections",
            Self::RevokedTokens => "revoked_tokens",
            Self::RefreshTokens => "refresh_tokens",
            Self::IssuedTokens => "issued_tokens",
        }
    }
}

/// Where retention writes what it removes, before it removes it (`archive.rs`).
#[async_trait]
pub trait ArchiveSink: Send + Sync {
    /// Writes one agent's batch (in sequence order) durably, or says why not.
    async fn archive(&self, batch: Vec<crate::ArchivedEvent>) -> Result<(), String>;
}
