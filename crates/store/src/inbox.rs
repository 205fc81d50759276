//! The agent's inbox and the background passes over every inbox, as the server calls
//! them: their records. The traits are declared with their one implementation:
//! [`InboxStore`](crate::InboxStore) in `engine/inbox_transactions.rs`,
//! [`MaintenanceStore`](crate::MaintenanceStore) in `engine/maintenance.rs`.

pub use crate::engine::inbox_transactions::ClaimArgs;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use switchboard_proto::{HistoryEntry, InboxEvent, TenantId};

/// One archived event (the archive sink's record, `--archive-dir`): the event as its inbox showed it last, and its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArchivedEvent {
    pub tenant_id: TenantId,
    /// The agent's name when the event was archived.
    pub agent: String,
    pub event: InboxEvent,
    pub history: Vec<HistoryEntry>,
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
