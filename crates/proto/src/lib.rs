//! Wire types of the Switchboard HTTP API v1.
//!
//! Everything here is what crosses the wire between the server, the SDK, the CLI and
//! the console. It depends on serde only (plus `uuid`/`time` for ids and timestamps),
//! compiles to wasm, and depends on no other crate of the workspace.
//!
//! Compatibility rule: within v1 the wire format is **additive only**. Fields may be
//! added (optional on input, always present or documented as optional on output);
//! nothing is renamed or removed. Request bodies reject unknown fields so a typo is an
//! error, not a silent drop.
//!
//! Glossary:
//! - *cursor*: a per-agent sequence number. Cursor `N` means "I have seen every event
//!   with `seq <= N`". Sequence numbers start at 1; cursor 0 is the beginning.
//! - *claim token*: a capability minted by every claim of an event; ack, release and
//!   extend present it, and any older token is stale (`409 stale_claim`).
//! - *low-water mark* (`oldest_cursor`): the smallest cursor the server can still
//!   answer; below it the events were removed by retention and the answer is `410`.

mod callback;
mod client_report;
mod client_settings;
mod event;
mod event_wire;
mod ids;
mod jobs;
mod lease;
mod ops;
mod problem;
mod room;
mod signing;
mod tenants;

pub use callback::*;
pub use client_report::*;
pub use client_settings::*;
pub use event::*;
pub use ids::*;
pub use jobs::*;
pub use lease::*;
pub use ops::*;
pub use problem::*;
pub use room::*;
pub use signing::*;
pub use tenants::*;

/// Timestamps on the wire are RFC 3339 strings (UTC).
pub type Timestamp = time::OffsetDateTime;

/// Serde helpers for RFC 3339 timestamps.
pub mod rfc3339 {
    pub use time::serde::rfc3339::*;
}

// The console's session (login, one-time links).
mod console;
pub use console::*;

/// Limits the server enforces, published at `/api/v1/capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Limits {
    /// Largest accepted request body, in bytes (default 5 MiB).
    pub max_body_bytes: u64,
    /// Largest page of an inbox poll (default and maximum: 100 and 1000).
    pub max_page_size: u32,
    pub default_page_size: u32,
    /// Largest claim batch.
    pub max_claim_batch: u32,
    /// Bounds of `lease_seconds` for claim and extend.
    pub min_lease_seconds: u32,
    pub max_lease_seconds: u32,
    pub default_lease_seconds: u32,
    /// Largest `delay_seconds` of a release.
    pub max_delay_seconds: u32,
    /// Bounds of `max_attempts` of a message.
    pub max_attempts_limit: u32,
    pub default_max_attempts: u32,
    /// How long idempotency keys are kept, in seconds (at least 24 h).
    pub idempotency_ttl_seconds: u64,
    /// SSE heartbeat interval, in seconds.
    pub heartbeat_seconds: u64,
    /// Webhook callbacks' timeouts and schedule (absent from servers before them).
    #[serde(default)]
    pub webhooks: WebhookLimits,
}

/// What a webhook endpoint must meet, and how failures are retried.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookLimits {
    /// The endpoint answers the registration challenge within this.
    pub challenge_timeout_seconds: u64,
    /// The endpoint answers a delivery within this.
    pub delivery_timeout_seconds: u64,
    /// The delay after the 1st, 2nd, … failure in a row; the last repeats.
    pub retry_schedule_seconds: Vec<u64>,
    /// A callback whose deliveries all failed for this long is disabled.
    pub disable_after_seconds: u64,
    /// The most of an endpoint's answer the server reads.
    pub max_answer_bytes: u64,
}

/// The API this crate's types describe, as `Capabilities::api_version` says it.
pub const API_VERSION: &str = "v1";

/// The major version of [`API_VERSION`]: a server with another major one speaks an
/// API these types do not describe. Minor versions only add (fields, routes), so a
/// client reads a newer minor one (unknown response fields are ignored).
pub const API_MAJOR: u32 = 1;

/// The major version in an `api_version`: `v1`, `v1.4` and `1` give 1.
pub fn api_major(api_version: &str) -> Option<u32> {
    let v = api_version.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    v.split('.').next()?.parse().ok()
}

/// `GET /api/v1/capabilities`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Capabilities {
    pub api_version: String,
    pub server_version: String,
    pub backend: String,
    pub limits: Limits,
}

#[cfg(test)]
mod tests {
    use super::api_major;

    #[test]
    fn reads_the_major_api_version() {
        assert_eq!(api_major("v1"), Some(1));
        assert_eq!(api_major("v1.4"), Some(1));
        assert_eq!(api_major("2"), Some(2));
        assert_eq!(api_major("V3.0"), Some(3));
        assert_eq!(api_major("latest"), None);
        assert_eq!(api_major(""), None);
    }
}
