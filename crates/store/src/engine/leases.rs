//! Name + memory leases with fencing tokens (I7), once for every backend.
//!
//! An acquisition claims a name (by its UTS #39 skeleton, service-wide) and a memory
//! together, or neither; its fencing token is one above both the name's and the
//! memory's last (`name_fences.fence`, `memories.fence`), so a token never repeats
//! for either. After an expiry or a forced release the name and the memory stay
//! quiet for the lease's lock delay (`quiet_until`); a clean release has none.
//!
//! Every transaction takes its locks in one order: the name's fence row, then the
//! memory's row, then lease rows (then, once per tenant ever, the tenant's row for
//! the audit salt). So none waits in a cycle, and:
//! - of any number of acquisitions racing for a name or a memory, one at a time
//!   decides, and each sees what the ones before it committed: exactly one winner;
//! - a renewal or a release locks its lease row, a forced release the name, the
//!   memory and the lease, so an acquisition sees the lease as they left it;
//! - the unique keys on `leases (skeleton)` and `leases (memory_id)` are the
//!   backstop: a violation is answered as `LeaseHeld`.
//!
//! SQLite's single writer serializes the transactions, so its `lock_…` statements
//! are plain reads (`@FOR_UPDATE` renders as nothing there). PostgreSQL (READ
//! COMMITTED) locks rows `FOR UPDATE`; a row lock needs a row, so its
//! [`LeaseDriver::lock_name`] makes the name's fence row before locking it.

use super::audit::{self, AuditStatements};
use super::idempotency;
use super::lease_audit::{self, LeaseAuditStatements};
use super::memories::MemoryStatements;
use crate::clock::Millis;
use crate::lease_rules::*;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::{Lease, LeaseId, MemoryId, OpsLease, TenantId};

/// The statements of names and leases (`store/statements/leases.rs`). Each is one
/// statement, in `tx`, except the `read_…` ones (the read pool, no transaction).
#[async_trait]
pub(crate) trait LeaseStatements:
    MemoryStatements + LeaseAuditStatements + idempotency::IdemStatements
{
    /// The registration of the name `skeleton` (`switchboard names import`):
    /// (canonical name, tenant id).
    async fn name_registration(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
    ) -> StoreResult<Option<(String, String)>>;
    /// The name's (fence, quiet_until), if it ever had a lease; with `lock`, the row
    /// locked until the transaction ends if there is one.
    async fn name_fence(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
        lock: bool,
    ) -> StoreResult<Option<(i64, Millis)>>;
    /// Makes the name's fence row at fence 0 (the same as none), unless it has one.
    async fn make_name_fence(&self, tx: &mut Self::Tx, skeleton: &str) -> StoreResult<()>;
    /// Raises the name's fence to at least `fence` and its lock delay to at least
    /// `quiet_until`, making its row if it has none.
    async fn raise_name_fence(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
        fence: i64,
        quiet_until: Millis,
    ) -> StoreResult<()>;
    /// The leases holding the name (by skeleton) or the memory: two at most; with
    /// `lock`, locked until the transaction ends.
    async fn leases_holding(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
        memory: MemoryId,
        lock: bool,
    ) -> StoreResult<Vec<Stored>>;
    /// The lease of `tenant` with id `id`, if it is still stored; with `lock`,
    /// locked until the transaction ends.
    async fn load_lease(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        id: LeaseId,
        lock: bool,
    ) -> StoreResult<Option<Stored>>;
    /// The lease `id` on `new`'s name and memory with `fence`, from `now` for its TTL.
    async fn insert_lease(
        &self,
        tx: &mut Self::Tx,
        id: LeaseId,
        new: &NewLease,
        fence: i64,
        now: Millis,
    ) -> StoreResult<()>;
    /// Records to whom `fence` on `new.memory` went (`issued_tokens`, read by every
    /// data-plane call).
    async fn insert_issued(
        &self,
        tx: &mut Self::Tx,
        new: &NewLease,
        id: LeaseId,
        fence: i64,
        now: Millis,
    ) -> StoreResult<()>;
    async fn delete_lease(&self, tx: &mut Self::Tx, id: LeaseId) -> StoreResult<()>;
    async fn set_lease_expiry(
        &self,
        tx: &mut Self::Tx,
        id: LeaseId,
        ttl_ms: Millis,
        expires_at: Millis,
    ) -> StoreResult<()>;
    /// Registers one planned name; false when its skeleton or name is registered
    /// already (a concurrent insert of the same waits for this one's end, then
    /// reports the conflict).
    async fn register_name(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        name: &crate::Planned,
    ) -> StoreResult<bool>;
    /// Whether `key` is stored and not expired (then the idempotency layer answers).
    async fn key_known(&self, tx: &mut Self::Tx, key: &IdemKey, now: Millis) -> StoreResult<bool>;
    /// The lease on `memory`, live or expired, read outside any transaction.
    async fn read_lease_on_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<Stored>>;
    /// The tenant's leases, soonest expiry first, read outside any transaction.
    async fn read_leases(&self, tenant: TenantId) -> StoreResult<Vec<Stored>>;
    /// The ids of `tenant`'s leases that `holder_key` holds, read in `tx` (not
    /// locked: [`end_held_by`] locks each in the lock order).
    async fn leases_held_by(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        holder_key: &str,
    ) -> StoreResult<Vec<LeaseId>>;
}

/// Where a backend's shape differs; methods with a body are the portable shape.
#[async_trait]
pub(crate) trait LeaseDriver: LeaseStatements {
    /// Locks the name's fence row until the transaction ends (the first lock of the
    /// lock order) and returns its (fence, quiet_until). Portable: lock it if it is
    /// there (a second acquisition of the same name waits here, then reads what the
    /// first committed). PostgreSQL locks no row that does not exist, so two
    /// acquisitions of a name that never had a lease would both pass: it makes the
    /// row first.
    async fn lock_name(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
    ) -> StoreResult<Option<(i64, Millis)>> {
        self.name_fence(tx, skeleton, true).await
    }

    /// Registered names among `skeletons`: skeleton → (name, original), read outside
    /// any transaction. A list parameter is spelt per backend.
    async fn read_registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken>;
}

/// The refusal when a unique key on `leases` or `issued_tokens` stops a claim the
/// checks let through (they lock the name and the memory, so this should not
/// happen).
fn claimed_meanwhile(new: &NewLease, e: StoreError) -> StoreError {
    match &e {
        StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            StoreError::LeaseHeld {
                why: format!(
                    "the name '{}' or memory {} was claimed by another lease meanwhile; \
                     nothing was claimed. Retry after it expires or is released",
                    new.name, new.memory
                ),
                retry_after_ms: None,
            }
        }
        _ => e,
    }
}

/// What stands between a request and its lease, read in `tx`: `LeaseHeld` /
/// `Confusable` for a live holder or a lock delay not over yet, `NotFound` for no
/// such memory; otherwise the memory, the expired leases to take over, and the
/// name's fence.
///
/// With `lock`, the name's fence row, the memory's row and the leases on either are
/// locked (in that order) until the transaction ends: no other acquisition, forced
/// release or record call on them runs in between, so "check both, then claim
/// both" has one winner. Without, nothing is locked or written (the read-only
/// pre-check).
async fn check<D: LeaseDriver>(
    d: &D,
    tx: &mut D::Tx,
    new: &NewLease,
    now: Millis,
    lock: bool,
) -> StoreResult<Checked> {
    // Locking, the name comes first (the lock order); the read-only pre-check reads
    // its fence last, after what refuses most attempts (a live holder): one
    // statement fewer for each refused contender.
    let locked_fence = match lock {
        true => Some(d.lock_name(tx, &new.skeleton).await?),
        false => None,
    };
    let memory = d.load_memory(tx, new.tenant, new.memory, lock).await?;
    let memory = memory.ok_or(StoreError::NotFound)?;
    // A registered name (`switchboard names import`) is reserved.
    check_registered(new, d.name_registration(tx, &new.skeleton).await?)?;
    // Whatever holds the name (by skeleton) or the memory now.
    let held = d
        .leases_holding(tx, &new.skeleton, new.memory, lock)
        .await?;
    let way = check_held(new, held, now)?;
    let name_fence = match locked_fence {
        Some(fence) => fence,
        None => d.name_fence(tx, &new.skeleton, false).await?,
    };
    // The memory is the tenant's own; the name's last lease may have been anyone's.
    let (own, other) = way.quiet_until;
    let own = own.max(d.memory_quiet(tx, new.memory).await?);
    let other = other.max(name_fence.map_or(0, |f| f.1));
    check_quiet(new, (own, other), now)?;
    Ok(Checked {
        memory,
        expired: way.expired,
        superseded: way.superseded,
        name_fence,
    })
}

/// Moves the fences of a name and a memory to at least `fence`, and their lock
/// delay to at least `quiet_until`.
async fn set_fences<D: LeaseStatements>(
    d: &D,
    tx: &mut D::Tx,
    skeleton: &str,
    memory: MemoryId,
    fence: i64,
    quiet_until: Millis,
) -> StoreResult<()> {
    d.raise_name_fence(tx, skeleton, fence, quiet_until).await?;
    d.raise_memory_fence(tx, memory, fence, quiet_until).await
}

/// What happened to a lease of `tenant`, for its line of the audit trail: `event`
/// by `actor`, with the fencing `token` it concerns.
pub(super) struct LeaseEvent<'a> {
    pub(super) tenant: TenantId,
    pub(super) event: &'static str,
    pub(super) lease: &'a Lease,
    pub(super) token: i64,
    pub(super) actor: &'a str,
}

/// One line of the audit trail about `e.lease`.
pub(super) async fn audit<D: LeaseStatements>(
    d: &D,
    tx: &mut D::Tx,
    e: LeaseEvent<'_>,
    now: Millis,
) -> StoreResult<()> {
    let LeaseEvent {
        tenant,
        event,
        lease,
        token,
        actor,
    } = e;
    let memory = lease.memory_instance_id.to_string();
    let line = Line {
        event,
        name: Some(&lease.name),
        memory: &memory,
        token,
        actor,
    };
    lease_audit::write(d, tx, tenant, line, now).await
}

pub(super) async fn acquire<D: LeaseDriver>(
    d: &D,
    new: &NewLease,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Lease> {
    let mut tx = d.begin_write().await?;
    let checked = check(d, &mut tx, new, now, true).await?;
    let fence = checked.next_fence();
    // Expired leases in the way are taken over (their lock delay has passed). Each
    // tenant's audit tells only its own leases' lives (I9): the old lease's end is
    // written to its own tenant's trail, and the taker's to the taker's only when
    // both are one tenant's; across tenants the taker learns only that the name
    // was free, the old holder's tenant only that its lease expired.
    for held in &checked.expired {
        d.delete_lease(&mut tx, held.lease.lease_id).await?;
        let token = held.lease.fencing_token as i64;
        let lines: &[(&str, &str)] = match held.tenant == new.tenant {
            true => &[
                ("expired", "system:leases"),
                ("taken_over", new.holder.as_str()),
            ],
            false => &[("expired", "system:leases")],
        };
        for &(event, actor) in lines {
            audit(
                d,
                &mut tx,
                LeaseEvent {
                    tenant: held.tenant,
                    event,
                    lease: &held.lease,
                    token,
                    actor,
                },
                now,
            )
            .await?;
        }
    }
    // The caller's own live lease, acquired again (the seed's upsert within one
    // owner): it ends here, and the new lease's token is above its token.
    for held in &checked.superseded {
        d.delete_lease(&mut tx, held.lease.lease_id).await?;
        let line = LeaseEvent {
            tenant: held.tenant,
            event: "superseded",
            lease: &held.lease,
            token: held.lease.fencing_token as i64,
            actor: new.holder.as_str(),
        };
        audit(d, &mut tx, line, now).await?;
    }
    set_fences(d, &mut tx, &new.skeleton, new.memory, fence, 0).await?;
    let id = LeaseId::new();
    d.insert_lease(&mut tx, id, new, fence, now)
        .await
        .map_err(|e| claimed_meanwhile(new, e))?;
    d.insert_issued(&mut tx, new, id, fence, now)
        .await
        .map_err(|e| claimed_meanwhile(new, e))?;
    let lease = d
        .load_lease(&mut tx, new.tenant, id, false)
        .await?
        .ok_or(StoreError::NotFound)?
        .lease;
    let holder = new.holder.as_str();
    audit(
        d,
        &mut tx,
        LeaseEvent {
            tenant: new.tenant,
            event: "acquired",
            lease: &lease,
            token: fence,
            actor: holder,
        },
        now,
    )
    .await?;
    idempotency::finish(d, &mut tx, idem, 201, &lease).await?;
    d.commit(tx, &[]).await?;
    Ok(lease)
}

pub(super) async fn precheck<D: LeaseDriver>(
    d: &D,
    new: &NewLease,
    key: &IdemKey,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = d.begin_read().await?;
    // A known key is the idempotency layer's to answer (replay, 409, 422).
    let outcome = if d.key_known(&mut tx, key, now).await? {
        Ok(())
    } else {
        check(d, &mut tx, new, now, false).await.map(drop)
    };
    d.commit(tx, &[]).await?;
    outcome
}

pub(super) async fn force_release<D: LeaseDriver + AuditStatements>(
    d: &D,
    tenant: TenantId,
    id: LeaseId,
    note: &AuditNote,
    now: Millis,
) -> StoreResult<OpsLease> {
    let mut tx = d.begin_write().await?;
    let held = end(d, &mut tx, tenant, id, "force_released", &note.actor, now)
        .await?
        .ok_or(StoreError::NotFound)?;
    audit::write(d, &mut tx, tenant, note, "lease_force_released", 1, now).await?;
    d.commit(tx, &[]).await?;
    Ok(held.ops(now))
}

/// Ends the lease `id` of `tenant` in `tx`, as a forced release does: the lease
/// goes, both fences move past its token (its holder is refused from then on), the
/// lock delay starts now, and the audit says `event` by `actor`. The lease as it
/// was, or `None` when it is gone already.
async fn end<D: LeaseDriver>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    id: LeaseId,
    event: &'static str,
    actor: &str,
    now: Millis,
) -> StoreResult<Option<Stored>> {
    // The lease's name and memory never change: read them, lock them in the
    // acquisition's order (name, memory, lease), then read the lease again.
    let Some(seen) = d.load_lease(tx, tenant, id, false).await? else {
        return Ok(None);
    };
    let memory = seen.lease.memory_instance_id;
    d.lock_name(tx, &seen.skeleton).await?;
    if d.load_memory(tx, tenant, memory, true).await?.is_none() {
        return Ok(None);
    }
    let Some(held) = d.load_lease(tx, tenant, id, true).await? else {
        return Ok(None);
    };
    d.delete_lease(tx, id).await?;
    // Both fences pass the lease's token, so its holder is refused from now on.
    let bumped = held.lease.fencing_token as i64 + 1;
    let quiet_until = now + held.lock_delay_ms;
    set_fences(d, tx, &held.skeleton, memory, bumped, quiet_until).await?;
    audit(
        d,
        tx,
        LeaseEvent {
            tenant,
            event,
            lease: &held.lease,
            token: bumped,
            actor,
        },
        now,
    )
    .await?;
    Ok(Some(held))
}

/// Ends, in `tx`, every lease of `tenant` that `holder_key` ([`Actor::key`]) holds,
/// each as a forced release audited as `agent_deleted` by `actor`: a deleted
/// agent's leases end with it, so a later agent given its name inherits none (the
/// holder checks compare keys, and the fences pass every token it held). How many.
pub(crate) async fn end_held_by<D: LeaseDriver>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    holder_key: &str,
    actor: &str,
    now: Millis,
) -> StoreResult<u64> {
    let mut ended = 0;
    for id in d.leases_held_by(tx, tenant, holder_key).await? {
        if end(d, tx, tenant, id, "agent_deleted", actor, now)
            .await?
            .is_some()
        {
            ended += 1;
        }
    }
    Ok(ended)
}

/// All or none.
pub(super) async fn register_names<D: LeaseStatements + AuditStatements>(
    d: &D,
    tenant: TenantId,
    names: &[crate::Planned],
    note: &AuditNote,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = d.begin_write().await?;
    for n in names {
        if !d.register_name(&mut tx, tenant, n).await? {
            return Err(StoreError::Conflict(format!(
                "the name {:?} was registered while the import was planned; nothing was \
                 imported, run it again",
                n.name
            )));
        }
    }
    let count = names.len() as u64;
    audit::write(d, &mut tx, tenant, note, "names_imported", count, now).await?;
    d.commit(tx, &[]).await
}
