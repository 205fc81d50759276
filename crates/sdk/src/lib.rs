//! Agent SDK for Switchboard: a typed async client of the HTTP API v1.
//!
//! [`Client`] covers the agent API (messages, inbox poll/claim/ack/release/extend,
//! snapshot, rooms, the SSE wake-up stream), the operator API (`/ops/…`) and the
//! public endpoints (capabilities, health, metrics). The wire types are re-exported
//! from [`proto`] (`switchboard_proto`).
//!
//! ```no_run
//! # async fn run() -> Result<(), switchboard_sdk::Error> {
//! use switchboard_sdk::{Client, proto::{ClaimRequest, SendMessage}};
//!
//! let client = Client::new("http://127.0.0.1:7070", "sb_agent_token")?;
//! let message = SendMessage { payload: serde_json::json!({"task": "index"}), ..Default::default() };
//! let key = switchboard_sdk::new_idempotency_key(); // keep it to retry the same send
//! client.send_message("bob", &message, &key).await?;
//!
//! for claimed in client.claim("alice", &ClaimRequest::default()).await?.events {
//!     // ... do the work ...
//!     client.ack("alice", claimed.event.event_id, claimed.claim_token).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! Errors: every non-2xx answer is [`Error::Api`] with an RFC 9457 problem; match on
//! [`Error::code`] (a stable [`proto::ErrorCode`]). Secrets (the [`Token`], the
//! idempotency keys) never appear in `Debug`, `Display` or error messages.
//!
//! Retries: transient failures (connect errors, timeouts, 408, 429, 500, 502, 503,
//! 504, 409 `request_in_progress`) of calls that are safe to repeat are retried with
//! decorrelated jitter, honoring `Retry-After`, within a per-call budget (5 attempts,
//! 30 s) and a client-wide retry quota. Retries reuse the idempotency key. Configure
//! with [`ClientBuilder::retry`] and [`RetryPolicy`]; the table of what is retried
//! is in [`retry`].
//!
//! Credentials: [`credentials::TokenStore`] keeps each profile's token in the OS
//! keyring and its server URL in a profiles file; [`credentials::resolve`] lets
//! `SWITCHBOARD_SERVER` and `SWITCHBOARD_TOKEN` override it.
//!
//! Over the client: [`outbox`] (the durable local outbox: written before any network
//! I/O, resent with the same key until the server has it), [`consumer`] (the inbox
//! consumer with dedup, lease extension and local quarantine, and the cursor
//! [`Follower`]), [`report`] (the client report operators see), [`credentials`]
//! (tokens in the OS keyring) and [`privacy`] (the gate in front of the outbox).
//! Their state lives in one local SQLite file ([`LocalDb`]).
//!
//! Webhook callbacks: [`Client::register_callback`] and its neighbours register,
//! list and remove an agent's HTTPS callback (and let operators disable, enable,
//! re-verify and test one); [`webhook`] is the receiver's side (answer the
//! challenge, verify and parse a delivery).

mod agent;
pub mod broker;
mod call;
mod callbacks;
mod client;
pub mod consumer;
pub mod credentials;
mod error;
mod leases;
pub mod local;
pub mod login;
mod ops;
pub mod outbox;
pub mod privacy;
pub mod renewal;
pub mod report;
pub mod retry;
mod room;
mod settings;
pub mod signin;
pub mod signing;
mod sse;
mod token;

pub use callbacks::webhook;
pub use client::{
    Client, ClientBuilder, Exchanged, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, REGION_CONSTRAINT,
    Sent, new_idempotency_key,
};
pub use consumer::{Consumer, ConsumerConfig, Delivery, Follower, Handler, Outcome};
pub use credentials::{CredentialError, Credentials, TokenStore};
pub use error::Error;
pub use leases::Precondition;
pub use local::{LocalDb, LocalError};
pub use outbox::{Outbox, OutboxConfig, OutboxError, Target};
pub use privacy::{Blocked, Cleared, Gate};
pub use retry::{DecorrelatedJitter, RetryPolicy};
pub use sse::{SseEvent, SseStream};
pub use token::Token;

/// The HTTP client library, for [`Client::request`] and [`Error::Transport`].
pub use reqwest;
/// The wire types (`switchboard_proto`).
pub use switchboard_proto as proto;
