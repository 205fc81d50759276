//! Webhook callbacks (issue 14): an agent in a stable, routable place registers an
//! HTTPS URL and a secret, proves that it holds both by answering a challenge, and
//! then receives each committed event of its inbox as a signed POST, in order.
//!
//! Terms:
//! - *secret*: `whsec_<base64 of 24..64 random bytes>` (Standard Webhooks). The
//!   server keeps it encrypted and never shows it again.
//! - *challenge*: at registration the server POSTs
//!   `{"type":"callback.challenge","challenge":"<token>"}`; the endpoint answers
//!   `{"challenge_response":"<base64 HMAC-SHA256(secret bytes, token)>"}` within 10 s.
//! - *delivery*: `{"type":"inbox.event","event":{…}}`, signed with Standard Webhooks
//!   (`webhook-id` = the event id) and RFC 9421 (`keyid` = the callback id). 2xx acks
//!   the event; 410 disables the callback; anything else retries on a schedule.

use crate::{AgentId, CallbackId, InboxEvent};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/agents/{agent}/callbacks`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterCallback {
    /// `https://…`, a public host; no userinfo.
    pub url: String,
    /// `whsec_<base64 of 24..64 random bytes>`.
    pub secret: String,
}

impl std::fmt::Debug for RegisterCallback {
    // The secret never reaches a log (I11).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisterCallback")
            .field("url", &self.url)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// Whether a callback gets deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum CallbackState {
    Active,
    /// By an operator, by a `410 Gone` from the endpoint, or after failing for the
    /// configured period: `disabled_reason` says which.
    Disabled,
}

impl CallbackState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(Self::Active),
            "disabled" => Some(Self::Disabled),
            _ => None,
        }
    }
}

/// A callback registration, as agents and operators see it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Callback {
    pub callback_id: CallbackId,
    /// The agent's name.
    pub agent: String,
    pub agent_id: AgentId,
    pub url: String,
    pub state: CallbackState,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub last_delivery_at: Option<OffsetDateTime>,
    /// The HTTP status of the last attempt; absent when it got no answer (timeout,
    /// connection refused) or there was none yet.
    #[serde(default)]
    pub last_status: Option<u16>,
    /// What went wrong on the last failed attempt.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Failed attempts since the last success.
    pub failure_streak: u32,
    /// Since when every attempt failed; absent while it succeeds.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub failing_since: Option<OffsetDateTime>,
    #[serde(default)]
    pub disabled_reason: Option<String>,
}

/// `GET /api/v1/ops/callbacks`, `GET /api/v1/agents/{agent}/callbacks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackList {
    pub callbacks: Vec<Callback>,
}

/// The body of the registration challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackChallenge {
    /// Always `callback.challenge`.
    #[serde(rename = "type")]
    pub kind: String,
    pub challenge: String,
}

/// What the endpoint answers to the challenge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChallengeResponse {
    pub challenge_response: String,
}

/// The body of a delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackDelivery {
    /// `inbox.event`, or `callback.test` for an operator's test event.
    #[serde(rename = "type")]
    pub kind: String,
    pub event: InboxEvent,
}

/// One delivery attempt, as the console lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackAttempt {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Absent for a challenge or a test event.
    #[serde(default)]
    pub event_id: Option<crate::EventId>,
    /// What the attempt was: `delivery`, `challenge` or `test`.
    pub kind: String,
    /// The endpoint's HTTP status; absent when it gave none.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub error: Option<String>,
    pub latency_ms: u64,
}

/// `GET /api/v1/ops/callbacks/{id}/attempts`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackAttemptList {
    pub attempts: Vec<CallbackAttempt>,
}
