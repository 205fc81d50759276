//! The console's session: login with the operator token or a one-time link, and who
//! the session is.
//!
//! Terms:
//! - *session*: an opaque random id in an HttpOnly, SameSite=Strict cookie
//!   (`sb_session`), stored hashed, with an expiry. It carries the scopes of the token
//!   it was made from (or fewer, for a read-only link).
//! - *login ticket*: a single-use secret with a short life (about two minutes), redeemed
//!   by `GET /login?ticket=…`, which sets the session cookie and redirects to `/`, so
//!   neither the token nor the ticket stays in the page's URL.
//!
//! Compatibility: additive only within v1, like every wire type.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/session`: trade an operator token for a session cookie.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// An operator token (`sb_op_…`) with at least the `ops:read` scope.
    pub token: String,
}

impl std::fmt::Debug for CreateSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret (I11).
        f.debug_struct("CreateSession")
            .field("token", &"<redacted>")
            .finish()
    }
}

/// `GET /api/v1/session` (and the answer to `POST`): who this session is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionInfo {
    /// The scopes in force, e.g. `["ops:read", "ops:write", "messages:send"]`.
    pub scopes: Vec<String>,
    /// True when the session may not change anything (no `ops:write`).
    pub read_only: bool,
    /// `cookie` (a console session) or `bearer` (a token on each request).
    pub via: String,
    /// When the session cookie stops working; absent for bearer tokens.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub expires_at: Option<OffsetDateTime>,
}

/// `POST /api/v1/ops/login-links`: mint a one-time console login link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateLoginLink {
    /// A session that may only look (no `ops:write`, no `messages:send`).
    #[serde(default)]
    pub read_only: bool,
}

/// The answer to `POST /api/v1/ops/login-links`. The ticket is shown once; only its
/// hash is stored, and it works once, before `expires_at`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LoginLink {
    /// `/login?ticket=…`, relative to the server's URL.
    pub path: String,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

impl std::fmt::Debug for LoginLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLink")
            .field("path", &"/login?ticket=<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Server-wide counters since this server process started, and delivery latency
/// percentiles, for the console's overview tiles (`Overview::counters`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsCounters {
    pub lease_expirations_total: u64,
    pub stale_claim_rejections_total: u64,
    /// Data-plane calls refused by the fence (absent from older servers: 0).
    #[serde(default)]
    pub fencing_rejections_total: u64,
    pub quarantined_total: u64,
    pub delivered_total: u64,
    /// From an event becoming available to its ack, estimated from the histogram
    /// buckets (linear within a bucket, like Prometheus' `histogram_quantile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_latency_p50_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_latency_p99_seconds: Option<f64>,
    /// The same counters over the last minute, from the sample history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_minute: Option<crate::OpsRates>,
}
