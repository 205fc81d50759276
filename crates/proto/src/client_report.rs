//! What an agent's SDK reports about its own side: the local outbox and the inbox
//! consumer (`PUT /agents/{agent}/client-report`, at most every 10 s), and what
//! operators read back (`GET /ops/client-reports`).
//!
//! It carries counts, modes and reasons only: no payloads, no keys, no tokens.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::AgentId;

/// Most entries a report may list in each poison (or expired) list.
pub const MAX_REPORTED_POISON: usize = 20;
/// Longest text field (a reason) in a report, in characters.
pub const MAX_REPORT_TEXT: usize = 1000;

/// An agent's report about its local state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClientReport {
    /// The SDK and its version, e.g. `switchboard-sdk/0.1.0`.
    pub sdk: String,
    pub outbox: OutboxSummary,
    /// The most recent poison entries of the outbox (at most 20).
    #[serde(default)]
    pub outbox_poison: Vec<ClientPoison>,
    /// The most recent expired entries of the outbox (at most 20): not sent within
    /// the server's idempotency window, so not resent (a resend could be stored
    /// twice). Each waits for a person to inspect it and resend it by hand.
    #[serde(default)]
    pub outbox_expired: Vec<ClientPoison>,
    pub inbox: InboxSummary,
    /// The most recent events quarantined locally by the consumer (at most 20).
    #[serde(default)]
    pub inbox_poison: Vec<ClientPoison>,
}

/// Outbox entries by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutboxSummary {
    pub queued: u64,
    pub sending: u64,
    pub retryable: u64,
    pub sent: u64,
    pub poison: u64,
    /// Entries kept in the terminal `expired` state: not sent within the server's
    /// idempotency window. (SDKs before the outbox horizon counted here the entries
    /// they deleted unsent after a 7-day TTL.)
    pub expired: u64,
    /// Expired entries no longer in the agent's file (removed after their
    /// retention), ever.
    #[serde(default)]
    pub expired_removed: u64,
}

/// The consumer's connection and counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxSummary {
    /// `sse`, `polling`, `starting` or `stopped`.
    pub mode: String,
    /// The polling interval while polling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_seconds: Option<f64>,
    /// The highest sequence number claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<u64>,
    pub handled: u64,
    pub acked: u64,
    pub deduplicated: u64,
    pub poisoned: u64,
}

/// One poison entry on the client side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClientPoison {
    /// The outbox entry id or the event id.
    pub id: String,
    /// The target lane (`room:ops`) for outbox entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub reason: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// A stored report, as operators read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceivedReport {
    pub agent_id: AgentId,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    pub report: ClientReport,
}

impl ClientReport {
    /// Checks the bounds; the message says what is over.
    pub fn check(&self) -> Result<(), String> {
        for (list, name) in [
            (&self.outbox_poison, "outbox_poison"),
            (&self.outbox_expired, "outbox_expired"),
            (&self.inbox_poison, "inbox_poison"),
        ] {
            if list.len() > MAX_REPORTED_POISON {
                return Err(format!(
                    "{name} lists {} entries; send at most {MAX_REPORTED_POISON}, the most recent",
                    list.len()
                ));
            }
            for (i, entry) in list.iter().enumerate() {
                for (field, text) in [
                    ("id", Some(&entry.id)),
                    ("target", entry.target.as_ref()),
                    ("reason", Some(&entry.reason)),
                ] {
                    if text.is_some_and(|t| t.chars().count() > MAX_REPORT_TEXT) {
                        return Err(format!(
                            "{name}[{i}].{field} is over {MAX_REPORT_TEXT} characters; truncate it"
                        ));
                    }
                }
            }
        }
        for (field, text) in [("sdk", &self.sdk), ("inbox.mode", &self.inbox.mode)] {
            if text.chars().count() > 100 {
                return Err(format!("{field} is over 100 characters"));
            }
        }
        Ok(())
    }
}
