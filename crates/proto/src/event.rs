//! Inbox events and the agent-side requests and responses.

use crate::{AgentId, ClaimToken, EventId, RoomId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// Where an event is in its life.
///
/// `pending → claimed → completed`, `claimed → pending` (release, lease expiry),
/// `claimed → quarantined` (attempts exhausted or terminal failure),
/// `quarantined → pending` (operator replay), `pending → expired` (`expires_at`
/// passed), any → `purged` (operator purge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    Pending,
    Claimed,
    Completed,
    Quarantined,
    Expired,
    Purged,
}

impl EventStatus {
    pub const ALL: [EventStatus; 6] = [
        Self::Pending,
        Self::Claimed,
        Self::Completed,
        Self::Quarantined,
        Self::Expired,
        Self::Purged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Claimed => "claimed",
            Self::Completed => "completed",
            Self::Quarantined => "quarantined",
            Self::Expired => "expired",
            Self::Purged => "purged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Terminal states keep no payload and are removed by retention.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Expired | Self::Purged)
    }
}

impl std::fmt::Display for EventStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Sender {
    Agent { agent_id: AgentId, name: String },
    Operator,
}

/// One event in an agent's inbox, as returned by poll, claim and the operator API.
///
/// On the wire its sequence number is written twice, as `seq` and as
/// `sequence_number` (the notifications seed's name), and either is read
/// (`event_wire.rs`).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxEvent {
    pub event_id: EventId,
    pub agent_id: AgentId,
    /// Per-agent sequence number; the cursor after this event. Also written as
    /// `sequence_number`.
    pub seq: u64,
    pub sender: Sender,
    /// Set when the event is a fan-out of a room message.
    pub room_id: Option<RoomId>,
    pub room_seq: Option<u64>,
    pub correlation_id: Option<String>,
    pub priority: i32,
    pub status: EventStatus,
    /// The message body. `null` once the event is terminal (completed, expired, purged).
    pub payload: Option<serde_json::Value>,
    pub attempts: u32,
    pub max_attempts: u32,
    pub created_at: OffsetDateTime,
    pub available_at: OffsetDateTime,
    pub expires_at: Option<OffsetDateTime>,
    pub last_error: Option<String>,
}

/// An event handed out by a claim, with the token that fences it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimedEvent {
    #[serde(flatten)]
    pub event: InboxEvent,
    pub claim_token: ClaimToken,
    #[serde(with = "time::serde::rfc3339")]
    pub lease_expires_at: OffsetDateTime,
}

/// `POST /agents/{agent}/messages`: a direct message into one agent's inbox.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// Any JSON value.
    pub payload: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Higher is claimed first (-1000..=1000, default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = -1000, maximum = 1000))]
    pub priority: Option<i32>,
    /// Not claimable before this time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub available_at: Option<OffsetDateTime>,
    /// Expires unclaimed after this time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub expires_at: Option<OffsetDateTime>,
    /// Claims allowed before the event is quarantined (1..=100, default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub max_attempts: Option<u32>,
}

/// The answer to a direct send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendReceipt {
    pub event_id: EventId,
    pub agent_id: AgentId,
    pub seq: u64,
}

/// `GET /agents/{agent}/inbox`: one page read by cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxPage {
    pub events: Vec<InboxEvent>,
    /// Pass as `after_cursor` to read on. Equals the request's cursor when empty.
    pub next_cursor: u64,
    pub has_more: bool,
}

/// `POST /agents/{agent}/inbox/claim`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// How many events to claim at most (1..=100, default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub limit: Option<u32>,
    /// Visibility lease (1..=43200 s, default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 43200))]
    pub lease_seconds: Option<u32>,
    /// Makes the claim safe to retry (as SQS's `ReceiveRequestAttemptId`): a claim
    /// whose answer was lost, sent again with the same id while its leases run,
    /// returns the events that claim took, with the same claim tokens, instead of
    /// claiming more (which would leave the first ones leased to nobody and hand
    /// out later events first). Use a new random UUID for each claim and the same
    /// one for its retries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_id: Option<uuid::Uuid>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimResponse {
    pub events: Vec<ClaimedEvent>,
    /// When the answer holds fewer events than asked for: the earliest moment a
    /// pending event of this inbox that is not available yet becomes available (a
    /// message sent with a future `available_at`, or released with a delay). No
    /// wake-up is sent at that moment: a consumer that found nothing more claims
    /// again then. Absent when no such event waits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    pub next_available_at: Option<OffsetDateTime>,
}

/// `POST /agents/{agent}/inbox/{event_id}/ack`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    pub claim_token: ClaimToken,
}

/// `POST /agents/{agent}/inbox/ack`: acks several claimed events in one
/// transaction (one commit), as SQS's `DeleteMessageBatch`. At most 100 entries,
/// each event at most once.
///
/// With `claim`, the same transaction then claims the next events, as
/// `POST …/inbox/claim` with that body would: a consumer's ack of one batch and
/// its claim of the next cost one commit. `acks` may then be empty. Give the claim
/// an `attempt_id` to make the call safe to retry as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AckBatch {
    /// 1..=100 entries (0..=100 with `claim`).
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub acks: Vec<AckEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimRequest>,
}

/// One entry of an [`AckBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AckEntry {
    pub event_id: EventId,
    pub claim_token: ClaimToken,
}

/// The answer to an [`AckBatch`]: one result per entry, in the request's order.
/// An entry that failed (a stale claim, an unknown event) does not fail the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AckBatchResult {
    pub results: Vec<AckResult>,
    /// What the request's `claim` took (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed: Option<ClaimResponse>,
}

/// One entry's outcome: its new `state`, or the `problem` a single ack would have
/// answered (`stale_claim`, `not_found`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AckResult {
    pub event_id: EventId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<EventState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<crate::Problem>,
}

/// `POST /agents/{agent}/inbox/{event_id}/release`: give the work back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    pub claim_token: ClaimToken,
    /// Keep it invisible for this long (0..=43200 s, default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(maximum = 43200))]
    pub delay_seconds: Option<u32>,
    /// Why it failed; shown to operators (at most 4096 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A terminal failure: quarantine now instead of retrying.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
}

/// `POST /agents/{agent}/inbox/{event_id}/extend`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    pub claim_token: ClaimToken,
    /// New lease from now (1..=43200 s, default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 43200))]
    pub lease_seconds: Option<u32>,
}

/// The state of one event after ack, release or extend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventState {
    pub event_id: EventId,
    pub status: EventStatus,
    pub attempts: u32,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub lease_expires_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub available_at: OffsetDateTime,
}

/// Counts of an inbox by status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusCounts {
    pub pending: u64,
    pub claimed: u64,
    pub completed: u64,
    pub quarantined: u64,
    pub expired: u64,
    pub purged: u64,
}

/// `GET /agents/{agent}/snapshot`: the baseline for a full state sync (after a 410).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Snapshot {
    pub agent_id: AgentId,
    pub name: String,
    /// The newest sequence number; poll after it to follow new events.
    pub head_cursor: u64,
    /// The low-water mark: the smallest cursor still answered.
    pub oldest_cursor: u64,
    /// Poll after this cursor to see every open (pending, claimed, quarantined)
    /// event: one less than the smallest open sequence number, or `head_cursor`.
    pub resume_cursor: u64,
    pub counts: StatusCounts,
    #[serde(with = "time::serde::rfc3339")]
    pub server_time: OffsetDateTime,
}

/// SSE `inbox_updated` data: the wake-up after commit. Carries no payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InboxUpdated {
    pub cursor_hint: u64,
}

/// Query of `GET /agents/{agent}/inbox`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct InboxQuery {
    /// Return events with `seq > after_cursor` (default 0).
    pub after_cursor: Option<u64>,
    /// 1..=1000, default 100.
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 1000))]
    pub limit: Option<u32>,
}
