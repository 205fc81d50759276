//! The store's seam for webhook callbacks (issue 14): registrations, the per-callback
//! delivery lease that keeps one agent's deliveries in order across instances, and
//! the attempt log. Written once, in `engine/callbacks.rs`.

use super::*;
use switchboard_proto::{Callback, CallbackAttempt, CallbackId, CallbackState};

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

#[async_trait]
pub trait CallbackStore: Send + Sync {
    /// Stores `new`, replacing the agent's previous callback (and its attempt log),
    /// with the request's idempotent response in the same transaction (I8).
    /// The audit row of `note` is written with it.
    async fn put_callback(
        &self,
        new: &NewCallback,
        idem: Option<(&IdemKey, &StoredResponse)>,
        note: &AuditNote,
    ) -> StoreResult<Callback>;
    /// The tenant's callbacks (of one agent, or all), oldest first.
    async fn callbacks(
        &self,
        tenant: TenantId,
        agent: Option<AgentId>,
    ) -> StoreResult<Vec<Callback>>;
    async fn callback(
        &self,
        tenant: TenantId,
        id: CallbackId,
    ) -> StoreResult<Option<StoredCallback>>;
    /// Whether it existed; with the audit row of `note` when it did.
    async fn delete_callback(
        &self,
        tenant: TenantId,
        id: CallbackId,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<bool>;
    /// `None` when there is no such callback in `tenant`; with the audit row of
    /// `note` when there is.
    async fn change_callback(
        &self,
        tenant: TenantId,
        id: CallbackId,
        change: &StateChange,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<Option<Callback>>;

    /// Active callbacks, due (`next_attempt_at <= now`), not being delivered to by
    /// any instance, whose agent has a claimable event: at most `limit`, every
    /// tenant.
    async fn due_callbacks(&self, now: Millis, limit: u32) -> StoreResult<Vec<StoredCallback>>;
    /// Takes the delivery lease of `id` until `until` unless another instance holds
    /// it; whether it was taken.
    async fn lease_callback(
        &self,
        id: CallbackId,
        token: uuid::Uuid,
        until: Millis,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Gives the lease back without an attempt (there was nothing to deliver).
    async fn unlease_callback(&self, id: CallbackId, token: uuid::Uuid) -> StoreResult<()>;
    /// Logs an attempt and, for a delivery, updates the callback's record and
    /// returns its lease, in one transaction. Returns the callback as it is now
    /// (`None`: it was deleted meanwhile).
    async fn record_attempt(&self, record: &AttemptRecord) -> StoreResult<Option<Callback>>;
    /// Newest first.
    async fn callback_attempts(
        &self,
        id: CallbackId,
        limit: u32,
    ) -> StoreResult<Vec<CallbackAttempt>>;
    /// Removes attempts logged before `cutoff`; how many.
    async fn trim_callback_attempts(&self, cutoff: Millis) -> StoreResult<u64>;
    /// How many callbacks are in `state`, every tenant (the metrics).
    async fn count_callbacks(&self, state: CallbackState) -> StoreResult<u64>;
    /// How many callbacks were sealed with a key other than `key_id`.
    async fn callbacks_sealed_elsewhere(&self, key_id: &str) -> StoreResult<u64>;
}
