//! Webhook callbacks, once for every backend: registrations, the delivery lease and
//! the attempt log.
//!
//! Order across instances: a delivery first takes the callback's lease (a
//! conditional `UPDATE` of its row, so two instances cannot both hold it), then
//! claims one event of the agent, posts it, and logs the attempt and gives the lease
//! back in one transaction fenced by the lease token. While one instance delivers,
//! no other one claims for that callback, so the agent's events go out one at a
//! time, in claim order. A lease whose instance died ends at `leased_until` (longer
//! than the request's timeout); its claimed event comes back with the event's own
//! lease, as for any claim.

use super::Driver;
use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::idempotency::{IdemStatements, store_response};
use super::trim::TrimStatements;
use crate::clock::{Millis, to_timestamp};
use crate::rows::Cols;
use crate::{
    AttemptRecord, AuditNote, IdemKey, NewCallback, StateChange, StoreError, StoreResult,
    StoredCallback, StoredResponse,
};
use async_trait::async_trait;
use switchboard_proto::{AgentId, Callback, CallbackAttempt, CallbackId, CallbackState, TenantId};

/// The columns [`stored_from_row`] reads (`c` is `callbacks`, joined with `agents a`).
pub(crate) const CALLBACK_COLS: &str = "c.id, c.tenant_id, c.agent_id, a.name AS agent_name, \
     c.url, c.secret_sealed, c.key_id, c.state, c.disabled_reason, c.created_at, \
     c.last_delivery_at, c.last_status, c.last_error, c.failure_streak, c.failing_since, \
     c.next_attempt_at";

/// Which callbacks a read names, inside one tenant.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Which {
    All,
    Agent(AgentId),
    One(CallbackId),
}

#[async_trait]
pub(crate) trait CallbackStatements: Driver {
    /// Deletes the agent's callback and its attempt log.
    async fn delete_agent_callback(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<()>;
    async fn insert_callback(&self, tx: &mut Self::Tx, new: &NewCallback) -> StoreResult<()>;
    /// Oldest first; in `tx`, or on the read pool.
    async fn select_callbacks(
        &self,
        tx: Option<&mut Self::Tx>,
        tenant: TenantId,
        which: Which,
    ) -> StoreResult<Vec<StoredCallback>>;
    /// Deletes the callback and its attempt log; whether it existed.
    async fn delete_callback_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        id: CallbackId,
    ) -> StoreResult<bool>;
    /// Applies `change` (nothing when there is no such callback in `tenant`).
    async fn change_callback_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        id: CallbackId,
        change: &StateChange,
    ) -> StoreResult<()>;
    async fn due_callback_rows(&self, now: Millis, limit: u32) -> StoreResult<Vec<StoredCallback>>;
    async fn lease_callback_row(
        &self,
        id: CallbackId,
        token: uuid::Uuid,
        until: Millis,
        now: Millis,
    ) -> StoreResult<bool>;
    async fn unlease_callback_row(&self, id: CallbackId, token: uuid::Uuid) -> StoreResult<()>;
    async fn insert_attempt(&self, tx: &mut Self::Tx, record: &AttemptRecord) -> StoreResult<()>;
    /// The callback's record after a delivery attempt, and its lease returned, if
    /// `record.lease_token` still holds it.
    async fn update_after_attempt(
        &self,
        tx: &mut Self::Tx,
        record: &AttemptRecord,
    ) -> StoreResult<()>;
    async fn attempt_rows(&self, id: CallbackId, limit: u32) -> StoreResult<Vec<CallbackAttempt>>;
    async fn count_callback_rows(&self, state: CallbackState) -> StoreResult<u64>;
    async fn count_other_key_rows(&self, key_id: &str) -> StoreResult<u64>;
}

/// A `callbacks` row read with [`CALLBACK_COLS`].
pub(crate) fn stored_from_row(r: &impl Cols) -> StoreResult<StoredCallback> {
    let state = r.text("state")?;
    let state = CallbackState::parse(&state).ok_or_else(|| {
        StoreError::Database(sqlx::Error::Decode(
            format!("stored callback state {state:?} is unknown").into(),
        ))
    })?;
    let failing_since = r.opt_int("failing_since")?;
    Ok(StoredCallback {
        callback: Callback {
            callback_id: r.id("id")?,
            agent: r.text("agent_name")?,
            agent_id: r.id("agent_id")?,
            url: r.text("url")?,
            state,
            created_at: to_timestamp(r.int("created_at")?),
            last_delivery_at: r.opt_int("last_delivery_at")?.map(to_timestamp),
            last_status: r
                .opt_int("last_status")?
                .and_then(|s| u16::try_from(s).ok()),
            last_error: r.opt_text("last_error")?,
            failure_streak: u32::try_from(r.int("failure_streak")?).unwrap_or(u32::MAX),
            failing_since: failing_since.map(to_timestamp),
            disabled_reason: r.opt_text("disabled_reason")?,
        },
        tenant: r.id("tenant_id")?,
        sealed: r.bytes("secret_sealed")?,
        key_id: r.text("key_id")?,
        next_attempt_at: r.int("next_attempt_at")?,
        failing_since,
    })
}

/// A `callback_attempts` row.
pub(crate) fn attempt_from_row(r: &impl Cols) -> StoreResult<CallbackAttempt> {
    Ok(CallbackAttempt {
        at: to_timestamp(r.int("at")?),
        event_id: r.opt_id("event_id")?,
        kind: r.text("kind")?,
        status: r.opt_int("status")?.and_then(|s| u16::try_from(s).ok()),
        error: r.opt_text("error")?,
        latency_ms: u64::try_from(r.int("latency_ms")?).unwrap_or(0),
    })
}

/// Reads one callback in `tx`.
async fn one<D: CallbackStatements>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    id: CallbackId,
) -> StoreResult<Option<Callback>> {
    Ok(d.select_callbacks(Some(tx), tenant, Which::One(id))
        .await?
        .pop()
        .map(|s| s.callback))
}

store_area! {
    pub trait CallbackStore for Engine<
        D: CallbackStatements + IdemStatements + AuditStatements + TrimStatements,
    > {
        /// Stores `new`, replacing the agent's previous callback (and its attempt log),
        /// with the request's idempotent response in the same transaction (I8).
        /// The audit row of `note` is written with it.
        async fn put_callback(
            &self,
            new: &NewCallback,
            idem: Option<(&IdemKey, &StoredResponse)>,
            note: &AuditNote,
        ) -> StoreResult<Callback> {
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    self.0.delete_agent_callback(&mut tx, new.agent).await?;
                    self.0.insert_callback(&mut tx, new).await?;
                    audit::write(
                        &self.0,
                        &mut tx,
                        new.tenant,
                        note,
                        "callback_registered",
                        1,
                        new.now,
                    )
                    .await?;
                    if let Some((key, response)) = idem {
                        store_response(&self.0, &mut tx, key, response).await?;
                    }
                    let stored = one(&self.0, &mut tx, new.tenant, new.id)
                        .await?
                        .ok_or(StoreError::NotFound)?;
                    self.0.commit(tx, &[]).await?;
                    Ok(stored)
                })
                .await
        }

        /// The tenant's callbacks (of one agent, or all), oldest first.
        async fn callbacks(
            &self,
            tenant: TenantId,
            agent: Option<AgentId>,
        ) -> StoreResult<Vec<Callback>> {
            let which = agent.map_or(Which::All, Which::Agent);
            Ok(self
                .0
                .select_callbacks(None, tenant, which)
                .await?
                .into_iter()
                .map(|s| s.callback)
                .collect())
        }

        async fn callback(
            &self,
            tenant: TenantId,
            id: CallbackId,
        ) -> StoreResult<Option<StoredCallback>> {
            Ok(self
                .0
                .select_callbacks(None, tenant, Which::One(id))
                .await?
                .pop())
        }

        /// Whether it existed; with the audit row of `note` when it did.
        async fn delete_callback(
            &self,
            tenant: TenantId,
            id: CallbackId,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<bool> {
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    let existed = self.0.delete_callback_row(&mut tx, tenant, id).await?;
                    if existed {
                        audit::write(&self.0, &mut tx, tenant, note, "callback_deleted", 1, now)
                            .await?;
                    }
                    self.0.commit(tx, &[]).await?;
                    Ok(existed)
                })
                .await
        }

        /// `None` when there is no such callback in `tenant`; with the audit row of
        /// `note` when there is.
        async fn change_callback(
            &self,
            tenant: TenantId,
            id: CallbackId,
            change: &StateChange,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<Option<Callback>> {
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    // MySQL counts only the rows an UPDATE changed: read whether it exists.
                    self.0
                        .change_callback_row(&mut tx, tenant, id, change)
                        .await?;
                    let changed = one(&self.0, &mut tx, tenant, id).await?;
                    if changed.is_some() {
                        let action = match change {
                            StateChange::Enable => "callback_enabled",
                            StateChange::Disable { .. } => "callback_disabled",
                        };
                        audit::write(&self.0, &mut tx, tenant, note, action, 1, now).await?;
                    }
                    self.0.commit(tx, &[]).await?;
                    Ok(changed)
                })
                .await
        }

        /// Active callbacks, due (`next_attempt_at <= now`), not being delivered to by
        /// any instance, whose agent has a claimable event: at most `limit`, every
        /// tenant.
        async fn due_callbacks(&self, now: Millis, limit: u32) -> StoreResult<Vec<StoredCallback>> {
            self.0.due_callback_rows(now, limit).await
        }

        /// Takes the delivery lease of `id` until `until` unless another instance holds
        /// it; whether it was taken.
        async fn lease_callback(
            &self,
            id: CallbackId,
            token: uuid::Uuid,
            until: Millis,
            now: Millis,
        ) -> StoreResult<bool> {
            self.0.lease_callback_row(id, token, until, now).await
        }

        /// Gives the lease back without an attempt (there was nothing to deliver).
        async fn unlease_callback(&self, id: CallbackId, token: uuid::Uuid) -> StoreResult<()> {
            self.0.unlease_callback_row(id, token).await
        }

        /// Logs an attempt and, for a delivery, updates the callback's record and
        /// returns its lease, in one transaction. Returns the callback as it is now
        /// (`None`: it was deleted meanwhile).
        async fn record_attempt(&self, record: &AttemptRecord) -> StoreResult<Option<Callback>> {
            self.0
                .retrying(|| async {
                    let mut tx = self.0.begin_write().await?;
                    self.0.insert_attempt(&mut tx, record).await?;
                    if record.lease_token.is_some() {
                        self.0.update_after_attempt(&mut tx, record).await?;
                    }
                    let now = one(&self.0, &mut tx, record.tenant, record.callback).await?;
                    self.0.commit(tx, &[]).await?;
                    Ok(now)
                })
                .await
        }

        /// Newest first.
        async fn callback_attempts(
            &self,
            id: CallbackId,
            limit: u32,
        ) -> StoreResult<Vec<CallbackAttempt>> {
            self.0.attempt_rows(id, limit).await
        }

        /// Removes attempts logged before `cutoff`; how many.
        async fn trim_callback_attempts(&self, cutoff: Millis) -> StoreResult<u64> {
            super::trim::trim(&self.0, &super::trim::CALLBACK_ATTEMPTS, cutoff).await
        }

        /// How many callbacks are in `state`, every tenant (the metrics).
        async fn count_callbacks(&self, state: CallbackState) -> StoreResult<u64> {
            self.0.count_callback_rows(state).await
        }

        /// How many callbacks were sealed with a key other than `key_id`.
        async fn callbacks_sealed_elsewhere(&self, key_id: &str) -> StoreResult<u64> {
            self.0.count_other_key_rows(key_id).await
        }
    }
}
