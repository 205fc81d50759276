//! The store's seam for webhook callbacks (issue 14): registrations, the per-callback
//! delivery lease that keeps one agent's deliveries in order across instances, and the
//! attempt log: its records. The trait, [`CallbackStore`](crate::CallbackStore), is
//! declared with its one implementation in `engine/callbacks.rs`.

use super::*;
use switchboard_proto::{Callback, CallbackAttempt, CallbackId};

/// A registration whose challenge passed, ready to be stored.
#[derive(Debug, Clone)]
pub struct NewCallback {
    pub id: CallbackId,
    pub tenant: TenantId,
    pub agent: AgentId,
    pub url: String,
    /// The secret sealed with the server's webhook key (never the secret itself).
    pub sealed: Vec<u8>,
    /// The fingerprint of the key that sealed it.
    pub key_id: String,
    pub now: Millis,
}

/// A callback as the delivery worker needs it: the registration plus its sealed
/// secret and where its schedule stands.
#[derive(Debug, Clone)]
pub struct StoredCallback {
    pub callback: Callback,
    pub tenant: TenantId,
    pub sealed: Vec<u8>,
    pub key_id: String,
    pub next_attempt_at: Millis,
    pub failing_since: Option<Millis>,
}

/// An operator's change of a callback's state.
#[derive(Debug, Clone)]
pub enum StateChange {
    /// Deliveries resume at once, with a clean failure record.
    Enable,
    Disable {
        reason: String,
    },
}

/// One attempt to log, and what it does to the callback. The worker computes the
/// schedule; the store writes it, fenced by the delivery lease.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub tenant: TenantId,
    pub callback: CallbackId,
    /// The delivery lease's token; `None` for attempts outside a delivery (a
    /// challenge or a test), which change only the log.
    pub lease_token: Option<uuid::Uuid>,
    pub attempt: CallbackAttempt,
    pub at: Millis,
    pub succeeded: bool,
    /// After a failure: no delivery before this.
    pub next_attempt_at: Millis,
    /// Disables the callback with this reason (a 410, or failing too long).
    pub disable: Option<String>,
}
