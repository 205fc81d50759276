//! The fenced data plane, once for every backend: records of a memory, read and
//! written only by the holder of its lease with the memory's current fencing token,
//! checked in the same transaction as the change (I7). A refusal is recorded (and
//! committed) before it is answered; a change puts a `memory_updated` event into
//! every subscriber's inbox in the same transaction (I1).
//!
//! Lock order, as in an acquisition: the memory's row first (its fence), then the
//! live lease carrying the token. So an acquisition or a forced release that moves
//! the fence waits for the call's commit and the call for theirs, a release or a
//! renewal waits for the call, and calls on one memory (and their record versions)
//! are serialized. On SQLite the single writer gives all of this at once.

use super::area::store_area;
use super::events::{Envelope, EventStatements, deliver_member};
use super::lease_audit::{self, LeaseAuditStatements};
use crate::clock::Millis;
use crate::lease_rules::*;
use crate::record_rules::*;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::{FencingRejection, MemoryId, MemoryRecord};

/// To whom a fencing token went (`issued_tokens`).
pub(crate) struct Issued {
    /// The principal the token was issued to.
    pub(crate) holder: IssuedTo,
    pub(crate) owner_client: Option<String>,
}

/// A refused call, as `fencing_rejections` keeps it.
pub(crate) struct Rejection<'a> {
    pub(crate) tenant: TenantId,
    pub(crate) memory: MemoryId,
    pub(crate) presented: i64,
    pub(crate) current: i64,
    pub(crate) owner_client: Option<&'a str>,
    pub(crate) actor: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) at: Millis,
}

/// A record's new value as `insert_record` and `update_record` write it.
pub(crate) struct RecordWrite<'a> {
    pub(crate) memory: MemoryId,
    pub(crate) key: &'a str,
    /// The value's JSON text.
    pub(crate) value: &'a str,
    pub(crate) version: i64,
    /// The fencing token of the write.
    pub(crate) token: u64,
    pub(crate) now: Millis,
}

/// The statements of the data plane (`store/statements/records.rs`). Each is one
/// statement, in `tx`.
#[async_trait]
pub(crate) trait RecordStatements: EventStatements + LeaseAuditStatements {
    /// The memory's fence, its row locked until the transaction ends; `None`: no
    /// such memory in `tenant`.
    async fn lock_memory_fence(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<i64>>;
    async fn issued(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        token: u64,
    ) -> StoreResult<Option<Issued>>;
    /// Whether the lease carrying `token` on `memory` is live at `now`, and if so
    /// locked against a release or renewal until the transaction ends.
    async fn lock_live_lease(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        token: u64,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Raises the memory's `fence_seen` to `token`.
    async fn see_fence(&self, tx: &mut Self::Tx, memory: MemoryId, token: u64) -> StoreResult<()>;
    async fn insert_rejection(&self, tx: &mut Self::Tx, r: &Rejection<'_>) -> StoreResult<()>;
    async fn load_record(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        key: &str,
    ) -> StoreResult<Option<MemoryRecord>>;
    /// A record the memory did not have.
    async fn insert_record(&self, tx: &mut Self::Tx, r: &RecordWrite<'_>) -> StoreResult<()>;
    /// Up to `limit` records of `memory` in key order, from the first key after
    /// `after` (from the first key with `None`). The key is the primary key's second
    /// column, so a walk that resumes after the last key it saw never sees a record
    /// twice and never misses one that stayed: see [`RecordStore::records_page`].
    async fn page_records(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        after: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<MemoryRecord>>;
    /// Overwrites the record.
    async fn update_record(&self, tx: &mut Self::Tx, r: &RecordWrite<'_>) -> StoreResult<()>;
    async fn delete_record(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        key: &str,
    ) -> StoreResult<()>;
    /// The memory's subscribers, in agent-id order (two calls notifying the same
    /// agents number their events alike).
    async fn subscribers(&self, tx: &mut Self::Tx, memory: MemoryId) -> StoreResult<Vec<AgentId>>;
    async fn memory_exists(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<bool>;
    async fn set_subscribed(
        &self,
        tx: &mut Self::Tx,
        memory: MemoryId,
        agent: AgentId,
        on: bool,
    ) -> StoreResult<()>;
    /// Newest first (a read, outside any write transaction).
    async fn fencing_rejections(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<FencingRejection>>;
}

/// Why a call is refused: the refusal, the memory's fence, and the owner client the
/// presented token went to (for the rejection row).
type Refused = (Refusal, i64, Option<String>);

/// Checks the call's token: issued to this caller (else one refusal for every
/// case, `holder_refusal`), the memory's current one, carried by a live lease.
async fn check_fence<D: RecordStatements>(
    d: &D,
    tx: &mut D::Tx,
    call: &RecordCall<'_>,
    now: Millis,
) -> StoreResult<Result<(), Refused>> {
    let fence = d
        .lock_memory_fence(tx, call.tenant, call.memory)
        .await?
        .ok_or(StoreError::NotFound)?;
    let issued = d.issued(tx, call.memory, call.token).await?;
    let owner = issued.as_ref().and_then(|i| i.owner_client.clone());
    let holder = issued.as_ref().map(|i| &i.holder);
    if let Some(refusal) = holder_refusal(call.memory, call.token, holder, call.who) {
        return Ok(Err((refusal, fence, owner)));
    }
    if let Some(refusal) = fence_refusal(call.memory, call.token, fence) {
        return Ok(Err((refusal, fence, owner)));
    }
    if !d.lock_live_lease(tx, call.memory, call.token, now).await? {
        return Ok(Err((
            expired_refusal(call.memory, call.token),
            fence,
            owner,
        )));
    }
    d.see_fence(tx, call.memory, call.token).await?;
    Ok(Ok(()))
}

/// Records a refused call: its rejection row and its audit line.
async fn reject<D: RecordStatements>(
    d: &D,
    tx: &mut D::Tx,
    call: &RecordCall<'_>,
    current: i64,
    owner: Option<&str>,
    now: Millis,
) -> StoreResult<()> {
    let actor = call.who.to_string();
    let operation = format!("{} {}", call.op.verb(), call.key);
    let row = Rejection {
        tenant: call.tenant,
        memory: call.memory,
        presented: call.token as i64,
        current,
        owner_client: owner,
        actor: &actor,
        operation: &operation,
        at: now,
    };
    d.insert_rejection(tx, &row).await?;
    let memory = call.memory.to_string();
    let line = Line {
        event: "fence_rejected",
        name: None,
        memory: &memory,
        token: call.token as i64,
        actor: &actor,
    };
    lease_audit::write(d, tx, call.tenant, line, now).await
}

// Every backend with the data plane's statements has the data plane.
store_area! {
    /// The fenced data plane (I7's other half): every call presents the memory's
    /// current fencing token, checked in the call's own transaction; a refusal is
    /// recorded before it is answered. A change sends `memory_updated` to the memory's
    /// subscribers in the same transaction (I1).
    pub trait RecordStore for Engine<D: RecordStatements> {
        // One data-plane call in one transaction: check, change, notify, commit.
        async fn record(
            &self,
            call: &RecordCall<'_>,
            now: Millis,
        ) -> StoreResult<Committed<RecordDone>> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if let Err((refusal, current, owner)) = check_fence(d, &mut tx, call, now).await? {
                    reject(d, &mut tx, call, current, owner.as_deref(), now).await?;
                    d.commit(tx, &[]).await?;
                    return Err(refusal.into_error());
                }
                let existing = d.load_record(&mut tx, call.memory, call.key).await?;
                let (done, change) = match plan_record(call, existing)? {
                    RecordPlan::Read(record) => (RecordDone::Read(record), None),
                    RecordPlan::Put {
                        value,
                        version,
                        created,
                    } => {
                        // Whether the record exists was read under the memory's row lock, which
                        // every call on the memory takes first: nobody inserted it since.
                        let write = RecordWrite {
                            memory: call.memory,
                            key: call.key,
                            value: &value,
                            version,
                            token: call.token,
                            now,
                        };
                        if created {
                            d.insert_record(&mut tx, &write).await?;
                        } else {
                            d.update_record(&mut tx, &write).await?;
                        }
                        let record = d
                            .load_record(&mut tx, call.memory, call.key)
                            .await?
                            .ok_or(StoreError::NotFound)?;
                        let change = (record.version, false);
                        (RecordDone::Written { record, created }, Some(change))
                    }
                    RecordPlan::Delete { version } => {
                        d.delete_record(&mut tx, call.memory, call.key).await?;
                        (RecordDone::Deleted, Some((version, true)))
                    }
                };
                let mut wakes = Vec::new();
                if let Some((version, deleted)) = change {
                    let msg = memory_updated(call, version, deleted, now);
                    let envelope = Envelope {
                        tenant: call.tenant,
                        from: call.who,
                        room: None,
                        msg: &msg,
                        now,
                    };
                    for agent in d.subscribers(&mut tx, call.memory).await? {
                        let Some(delivered) = deliver_member(d, &mut tx, agent, &envelope).await?
                        else {
                            continue;
                        };
                        wakes.push(Wake {
                            tenant_id: call.tenant,
                            agent_id: delivered.agent_id,
                            cursor_hint: delivered.seq,
                        });
                    }
                }
                d.commit(tx, &wakes).await?;
                Ok(Committed { value: done, wakes })
            })
            .await
        }

        // Subscribes `agent` to `memory`'s changes, or ends it (both idempotent).
        async fn subscribe_memory(
            &self,
            tenant: TenantId,
            memory: MemoryId,
            agent: AgentId,
            on: bool,
        ) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d.memory_exists(&mut tx, tenant, memory).await? {
                    return Err(StoreError::NotFound);
                }
                d.set_subscribed(&mut tx, memory, agent, on).await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// Up to `limit` of `memory`'s records in key order, after the key `after` (from
        /// the first with `None`); `NotFound` when `tenant` has no such memory. No
        /// fencing token: this is the baseline a reader resyncs from. A walk that passes
        /// the last key of each page as the next `after` sees every record present for
        /// the whole walk exactly once, whatever is inserted or deleted meanwhile: each
        /// page is one snapshot of the keys above the previous page's last, and keys
        /// are unique and never change.
        async fn records_page(
            &self,
            tenant: TenantId,
            memory: MemoryId,
            after: Option<&str>,
            limit: u32,
        ) -> StoreResult<Vec<MemoryRecord>> {
            let d = &self.0;
            let mut tx = d.begin_read().await?;
            if !d.memory_exists(&mut tx, tenant, memory).await? {
                return Err(StoreError::NotFound);
            }
            let page = d.page_records(&mut tx, memory, after, limit).await?;
            d.commit(tx, &[]).await?;
            Ok(page)
        }

        /// Newest first.
        async fn fencing_rejections(
            &self,
            tenant: TenantId,
            limit: u32,
        ) -> StoreResult<Vec<FencingRejection>> {
            RecordStatements::fencing_rejections(&self.0, tenant, limit).await
        }
    }
}
