//! The operator API: agents, overview, event listing, bulk actions, audit.

use crate::{AgentId, EventId, EventStatus, InboxEvent, StatusCounts};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/ops/agents`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateAgent {
    /// 1..=64 characters of `[A-Za-z0-9._-]`, unique per tenant.
    pub name: String,
}

/// The answer to agent creation. The token is shown once; the server keeps only a hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentCreated {
    pub agent_id: AgentId,
    pub name: String,
    /// Bearer token scoped to this agent's inbox. Store it now; it cannot be read again.
    pub token: String,
}

/// `POST /api/v1/ops/tokens`: a token for a machine that only reads, such as a
/// Prometheus scraper. The only scope it may carry today is `metrics:read`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// `["metrics:read"]`.
    pub scopes: Vec<String>,
    /// What the token is for, shown to operators (`prometheus`); 1..=64 characters.
    pub label: String,
}

/// The answer to token creation. The token is shown once; the server keeps a hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCreated {
    /// Bearer token with exactly `scopes`. Store it now; it cannot be read again.
    pub token: String,
    pub scopes: Vec<String>,
    pub label: String,
}

/// One agent's line in the overview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentSummary {
    pub agent_id: AgentId,
    pub name: String,
    pub counts: StatusCounts,
    pub head_cursor: u64,
    pub oldest_cursor: u64,
    /// Age of the oldest claimable pending event, in seconds.
    pub oldest_pending_age_seconds: Option<f64>,
    /// Open SSE subscriptions on this server.
    pub subscribers: u64,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_seen_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// `GET /api/v1/ops/overview`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Overview {
    pub agents: Vec<AgentSummary>,
    pub totals: StatusCounts,
    pub subscribers: u64,
    pub oldest_pending_age_seconds: Option<f64>,
    #[serde(with = "time::serde::rfc3339")]
    pub server_time: OffsetDateTime,
    /// Counters since the server started (absent from servers that predate them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::OpsCounters>,
    /// The shared database's queue table, for the deployment's own operator: only on
    /// PostgreSQL, and only for the tenant of the operator token minted at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_table: Option<QueueTableHealth>,
    /// Retention and its archive, for the deployment's own operator (the reason an
    /// archive write failed names the archive's paths, which name every tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionHealth>,
}

/// Whether retention is archiving what it removes, and whether it is held back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionHealth {
    /// Retention writes what it removes to an archive first (`--archive-dir`).
    pub archiving: bool,
    /// Events archived since the server started.
    pub archived_total: u64,
    /// Present while archive writes fail: retention removes nothing it could not
    /// archive, so terminal events stay in the database until the archive is fixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<RetentionHeldBack>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetentionHeldBack {
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
    /// The archive's error, and what to do about it.
    pub reason: String,
}

/// What slows a queue on PostgreSQL down over time: dead row versions in the inbox
/// table that vacuum has not removed yet, usually because a transaction stays open.
/// The same numbers are gauges in `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueTableHealth {
    /// Dead row versions in the inbox table (`events`), waiting for vacuum.
    pub dead_tuples: u64,
    /// Live rows in the inbox table.
    pub live_tuples: u64,
    /// Seconds since (auto)vacuum last finished on the inbox table; absent: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vacuum_age_seconds: Option<f64>,
    /// Age of the database's oldest open transaction, in seconds (0 when none).
    /// While it stays open, vacuum cannot remove what it might still see.
    pub oldest_transaction_age_seconds: f64,
}

/// Which events an operator query or bulk action covers. Every field narrows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[serde(deny_unknown_fields)]
pub struct EventFilter {
    /// Agent id or name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EventStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Substring of the payload's JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// Exactly this priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// Query of `GET /api/v1/ops/events`: a filter plus pagination.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct EventListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<EventStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// Exactly this priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Opaque cursor from a previous page's `next_cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<EventId>,
    /// 1..=1000, default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 1000))]
    pub limit: Option<u32>,
}

impl EventListQuery {
    pub fn filter(&self) -> EventFilter {
        EventFilter {
            agent: self.agent.clone(),
            status: self.status,
            correlation_id: self.correlation_id.clone(),
            q: self.q.clone(),
            priority: self.priority,
        }
    }
}

/// An event as operators see it: the inbox event plus its holder's lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsEvent {
    #[serde(flatten)]
    pub event: InboxEvent,
    pub agent_name: String,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub lease_expires_at: Option<OffsetDateTime>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsEventPage {
    pub events: Vec<OpsEvent>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<EventId>,
}

/// One step in an event's life (created, claimed, released, expired, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryEntry {
    pub action: String,
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// `GET /api/v1/ops/events/{id}`: the event inspector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventDetail {
    #[serde(flatten)]
    pub event: OpsEvent,
    pub history: Vec<HistoryEntry>,
}

/// Operator bulk actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Quarantined → pending, attempts reset.
    Replay,
    /// Claimed → pending; the claim token is invalidated.
    Release,
    /// Any → purged; the payload is dropped.
    Purge,
}

impl BulkAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Release => "release",
            Self::Purge => "purge",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "replay" => Self::Replay,
            "release" => Self::Release,
            "purge" => Self::Purge,
            _ => return None,
        })
    }
}

/// `POST /api/v1/ops/bulk/{replay|release|purge}`: either `ids` or `filter`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<EventId>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<EventFilter>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkResult {
    pub action: BulkAction,
    /// Events that were in a state the action applies to and were changed.
    pub affected: u64,
    pub audit_id: i64,
}

/// One row of the operator audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditEntry {
    pub id: i64,
    pub actor: String,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<EventId>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<EventFilter>,
    pub count: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Present when the action ran as a job: where it is (`count` is its progress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_state: Option<crate::JobState>,
    /// Events the job covered when it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_total: Option<u64>,
    /// What an action other than a bulk action was about: `agent:<name>`,
    /// `token:<token_id>`, `device:<user_code>`, `tenant:<name>`,
    /// `callback:<id>`, `lease:<id>`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A short detail of it (never a secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
}

/// Data of the console's SSE `changed` event: something changed in an agent's inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsChange {
    pub agent_id: AgentId,
    pub cursor_hint: u64,
}

/// A stored token as `GET /api/v1/ops/tokens` lists it: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Credential {
    /// 16 hex digits naming the token (`POST /api/v1/ops/tokens/{token_id}/revoke`);
    /// it cannot be used to authenticate.
    pub token_id: String,
    /// `admin`, `operator`, `agent` or `read-only`.
    pub kind: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_name: Option<String>,
    pub scopes: Vec<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// Set once revoked: the token is refused from then on.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
    /// The `token_id` of the credential that approved this one (a device login's
    /// approver, an app sign-in's consenting operator): revoking that one revokes
    /// this one too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
}

/// The answer to a revocation: how many live tokens it revoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Revoked {
    pub revoked: u64,
}

/// The answer to deleting an agent: who it was, how many of its credentials were
/// live (now revoked) and how many of its events were open (now purged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentDeleted {
    pub agent_id: AgentId,
    pub name: String,
    pub revoked: u64,
    pub purged: u64,
}

/// A device login request (RFC 8628) as `GET /api/v1/ops/device-requests` lists it:
/// who asked, for which agent, from where; never the device code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeviceRequest {
    /// What the device shows its user (`XXXX-XXXX`); it names the request in
    /// `POST /api/v1/ops/device-requests/{user_code}/approve|deny`.
    pub user_code: String,
    /// The client that asked (`switchboard-cli`, …), as it said.
    pub client_id: String,
    /// The agent it asks to log in as (`scope=agent:<name>`).
    pub agent_name: String,
    /// The address the request came from (and `X-Forwarded-For`, when a proxy said).
    pub source: String,
    pub user_agent: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
    /// `pending`, `approved`, `denied`, or `used` (approved, and its tokens taken).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub decided_at: Option<OffsetDateTime>,
    /// The agent the approval logged it in as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
}

/// `POST /api/v1/ops/device-requests/{user_code}/approve`: the agent to log the
/// device in as (created when it does not exist); the one it asked for when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApproveDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// What a sign-in (`/oauth/authorize`) asks for when its request names no scope.
pub const SIGN_IN_DEFAULT_SCOPE: &str = "ops:read ops:write";

/// The signed-in operator's answer on the consent page of a sign-in
/// (`/oauth/authorize`): `request` is that page's query string as the browser got
/// it (without `?`); the server checks it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AuthorizeDecision {
    pub request: String,
    pub allow: bool,
}

/// Where the browser goes next: the app's loopback redirect URI with `code` and
/// `state` (allowed), or with `error=access_denied` (denied).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuthorizeRedirect {
    pub redirect_to: String,
}
