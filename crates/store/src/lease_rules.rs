//! Leases, records and their audit trail as every backend shares them: row decoding,
//! the decisions taken over what a transaction read (pure functions), the refusal
//! messages and the audit hash. The engine's transactions (`store/engine/`) read,
//! lock and write, and decide with these.

use crate::clock::{Millis, to_timestamp};
use crate::rows::Cols;
use crate::{Actor, LeaseFields, NewLease, StoreError, StoreResult};
use sha2::{Digest, Sha256};
use switchboard_proto::{
    FencingRejection, Lease, LeaseAuditEntry, LeaseId, Memory, MemoryId, MemoryRecord, TenantId,
};

pub(crate) const MEMORY_COLS: &str = "id, label, parent_id, branched_at_token, fence, created_at";
pub(crate) const LEASE_COLS: &str = "id, tenant_id, name, skeleton, memory_id, fence, holder, \
     holder_key, owner_client, ttl_ms, lock_delay_ms, acquired_at, expires_at, display_name";
/// The columns `audit_entry_from_row` reads.
pub(crate) const AUDIT_COLS: &str = "id, event, name_hash, memory_hash, fencing_token, actor, at";
/// The columns `rejection_from_row` reads.
pub(crate) const REJECTION_COLS: &str =
    "id, memory_id, presented, current, owner_client, actor, operation, at";
/// The columns `record_from_row` reads.
pub(crate) const RECORD_COLS: &str = "value, version, fencing_token, updated_at";

pub(crate) fn memory_from_row(r: &impl Cols) -> StoreResult<Memory> {
    Ok(Memory {
        memory_instance_id: r.id("id")?,
        label: r.opt_text("label")?,
        parent_memory_instance_id: r.opt_id("parent_id")?,
        branched_at_token: r.opt_int("branched_at_token")?.map(|t| t as u64),
        fencing_token: Some(r.int("fence")? as u64),
        created_at: to_timestamp(r.int("created_at")?),
    })
}

/// A stored lease row.
pub(crate) struct Stored {
    pub(crate) lease: Lease,
    /// The tenant whose lease it is (a name is leased service-wide, I7).
    pub(crate) tenant: TenantId,
    pub(crate) skeleton: String,
    /// Who holds it, as the console shows it (`Actor`'s text).
    pub(crate) holder: String,
    /// Who holds it, for the holder checks: [`Actor::key`], an agent by its id,
    /// which a later agent given the same name never shares.
    pub(crate) holder_key: String,
    pub(crate) lock_delay_ms: Millis,
    pub(crate) expires_at: Millis,
}

impl Stored {
    /// The lease as the operator API shows it at `now`.
    pub(crate) fn ops(self, now: Millis) -> switchboard_proto::OpsLease {
        switchboard_proto::OpsLease {
            expired: self.expires_at <= now,
            lease: self.lease,
            holder: self.holder,
        }
    }
}

pub(crate) fn lease_from_row(r: &impl Cols) -> StoreResult<Stored> {
    let ttl_ms = r.int("ttl_ms")?;
    let lock_delay_ms = r.int("lock_delay_ms")?;
    let expires_at = r.int("expires_at")?;
    let name = r.text("name")?;
    Ok(Stored {
        lease: Lease {
            lease_id: r.id("id")?,
            canonical_name: name.clone(),
            name,
            display_name: r.opt_text("display_name")?,
            memory_instance_id: r.id("memory_id")?,
            fencing_token: r.int("fence")? as u64,
            owner_client: r.opt_text("owner_client")?,
            ttl_seconds: ttl_ms as f64 / 1000.0,
            lock_delay_seconds: lock_delay_ms as f64 / 1000.0,
            acquired_at: to_timestamp(r.int("acquired_at")?),
            expires_at: to_timestamp(expires_at),
        },
        tenant: r.id("tenant_id")?,
        skeleton: r.text("skeleton")?,
        holder: r.text("holder")?,
        holder_key: r.text("holder_key")?,
        lock_delay_ms,
        expires_at,
    })
}

pub(crate) fn audit_entry_from_row(r: &impl Cols) -> StoreResult<LeaseAuditEntry> {
    Ok(LeaseAuditEntry {
        id: r.int("id")?,
        event: r.text("event")?,
        name_hash: r.opt_text("name_hash")?,
        memory_hash: r.text("memory_hash")?,
        fencing_token: r.int("fencing_token")? as u64,
        actor: r.text("actor")?,
        at: to_timestamp(r.int("at")?),
    })
}

pub(crate) fn rejection_from_row(r: &impl Cols) -> StoreResult<FencingRejection> {
    Ok(FencingRejection {
        id: r.int("id")?,
        memory_instance_id: r.id("memory_id")?,
        presented_token: r.int("presented")? as u64,
        current_token: r.int("current")? as u64,
        owner_client: r.opt_text("owner_client")?,
        actor: r.text("actor")?,
        operation: r.text("operation")?,
        at: to_timestamp(r.int("at")?),
    })
}

pub(crate) fn record_from_row(
    r: &impl Cols,
    memory: MemoryId,
    key: &str,
) -> StoreResult<MemoryRecord> {
    Ok(MemoryRecord {
        memory_instance_id: memory,
        key: key.to_owned(),
        value: serde_json::from_str(&r.text("value")?).unwrap_or(serde_json::Value::Null),
        version: r.int("version")? as u64,
        fencing_token: r.int("fencing_token")? as u64,
        updated_at: to_timestamp(r.int("updated_at")?),
    })
}

// --- leases ---

/// A branch may not start above the parent's current token.
pub(crate) fn check_branch(parent: &Memory, parent_token: u64) -> StoreResult<()> {
    let current = parent.fencing_token.unwrap_or_default();
    if parent_token > current {
        return Err(StoreError::Invalid(format!(
            "parent_fencing_token {parent_token} is above the parent's current token; \
             branch from a token the parent has reached (your lease's, or an earlier one)"
        )));
    }
    Ok(())
}

/// The stale-fence refusal. It does not say what is current: only the holder of the
/// memory's lease may know its token.
pub(crate) fn stale(id: LeaseId, token: u64) -> StoreError {
    StoreError::StaleFence(format!(
        "fencing token {token} is not lease {id}'s: this holder lost the lease, \
         acquire it again"
    ))
}

/// Only the principal a lease was issued to may renew or release it (I7); anyone
/// else is refused before the token is looked at. An operator ends it with a
/// force-release instead, which is audited as such. Holders are compared by
/// [`Actor::key`]: a deleted agent's successor of the same name is someone else.
pub(crate) fn check_holder(held: &Stored, id: LeaseId, actor: &Actor) -> StoreResult<()> {
    if held.holder_key == actor.key() {
        Ok(())
    } else {
        Err(StoreError::NotHolder(format!(
            "lease {id} is not yours: only its holder renews or releases it; an operator \
             can end it with POST /api/v1/ops/leases/{id}/force-release"
        )))
    }
}

pub(crate) fn secs(ms: Millis) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// A release's checks on the stored lease: its holder's, with its token.
pub(crate) fn check_release(
    held: &Stored,
    id: LeaseId,
    token: u64,
    actor: &Actor,
) -> StoreResult<()> {
    check_holder(held, id, actor)?;
    if held.lease.fencing_token != token {
        return Err(stale(id, token));
    }
    Ok(())
}

/// A renewal's checks on the stored lease (`None`: it is gone); the lease to renew.
pub(crate) fn check_renewal(
    held: Option<Stored>,
    id: LeaseId,
    token: u64,
    actor: &Actor,
    now: Millis,
) -> StoreResult<Stored> {
    let Some(held) = held else {
        // Released, forced out or taken over: a newer token exists or will.
        return Err(StoreError::StaleFence(format!(
            "lease {id} is no longer held (released, forced out or taken over); \
             fencing token {token} is stale; acquire it again"
        )));
    };
    check_holder(&held, id, actor)?;
    if held.lease.fencing_token != token {
        return Err(stale(id, token));
    }
    if held.expires_at <= now {
        return Err(StoreError::LeaseExpired(format!(
            "lease {id} expired {} ago; renew earlier (at a third of the TTL), and \
             acquire it again now",
            secs(now - held.expires_at)
        )));
    }
    Ok(held)
}

/// The lease that `fields` name, given the lease on their memory (`held`; a memory
/// has at most one). A memory's fencing tokens only grow and each acquisition takes
/// a new one, so the memory and the token alone say which lease is meant; the name
/// and the owner must then be that lease's:
/// - `Ok(Some(id))`: the memory's lease has this token, name and owner;
/// - `Ok(None)`: that lease is over (released, forced out or taken over: no lease,
///   or one with a higher token, holds the memory now);
/// - `StaleFence`: the token was never issued, or the lease with it has another name
///   or owner. Never a hint of what the other name or owner is.
pub(crate) fn match_fields(held: Option<&Lease>, f: &LeaseFields) -> StoreResult<Option<LeaseId>> {
    let Some(held) = held else {
        return Ok(None);
    };
    let (token, memory) = (f.token, f.memory);
    if held.fencing_token > token {
        return Ok(None);
    }
    if held.fencing_token < token {
        return Err(StoreError::StaleFence(format!(
            "fencing token {token} was never issued for memory {memory}; send the \
             fencing_token your acquisition returned"
        )));
    }
    if held.name != f.name {
        return Err(StoreError::StaleFence(format!(
            "the lease with fencing token {token} on memory {memory} is not held under \
             the name '{}'; send the canonical_name your acquisition returned",
            f.name
        )));
    }
    if held.owner_client != f.owner_client {
        let sent = match &f.owner_client {
            Some(o) => format!("by owner_client_id {o:?}"),
            None => "without an owner_client_id".to_owned(),
        };
        return Err(StoreError::StaleFence(format!(
            "the lease with fencing token {token} on memory {memory} was not acquired \
             {sent}; send the owner_client_id it was acquired with"
        )));
    }
    Ok(Some(held.lease_id))
}

/// The refusal of a renewal whose lease (named by its fields) is over.
pub fn gone(f: &LeaseFields) -> StoreError {
    StoreError::StaleFence(format!(
        "no lease with fencing token {} holds memory {} any more (released, forced \
         out or taken over); the token is stale, acquire the lease again",
        f.token, f.memory
    ))
}

/// The TTL a renewal sets: the one asked for, or the lease's own.
pub(crate) fn renewal_ttl(held: &Stored, ttl_ms: Option<Millis>) -> Millis {
    ttl_ms.unwrap_or((held.lease.ttl_seconds * 1000.0).round() as Millis)
}

/// A registered name (`switchboard names import`) is reserved: only that exact
/// canonical name, and only for its tenant. `registered`: (name, tenant id).
pub(crate) fn check_registered(
    new: &NewLease,
    registered: Option<(String, String)>,
) -> StoreResult<()> {
    if let Some((name, tenant)) = registered {
        if name != new.name {
            return Err(StoreError::Confusable {
                canonical: new.name.clone(),
                skeleton: new.skeleton.clone(),
            });
        }
        if tenant != new.tenant.to_string() {
            return Err(StoreError::Conflict(format!(
                "the name '{}' is registered to another tenant; choose another name",
                new.name
            )));
        }
    }
    Ok(())
}

/// What [`check_held`] found in the way of a claim that may go ahead.
#[derive(Default)]
pub(crate) struct InTheWay {
    /// Expired leases, to take over.
    pub(crate) expired: Vec<Stored>,
    /// The caller's own live lease on this name and memory, which it acquires again
    /// (same agent, same `owner_client_id`; the names-and-leases seed's upsert).
    pub(crate) superseded: Vec<Stored>,
    /// The end of the expired leases' lock delays: (the caller's tenant's, others').
    pub(crate) quiet_until: (Millis, Millis),
}

/// Whether `held`, a live lease, is the one `new` acquires again: the same holder
/// (the same agent, by id), the same tenant, the same `owner_client_id` (sent, not
/// absent), the same name and memory.
fn is_own(new: &NewLease, held: &Stored) -> bool {
    held.tenant == new.tenant
        && held.holder_key == new.holder_key
        && new.owner_client.is_some()
        && held.lease.owner_client == new.owner_client
        && held.lease.name == new.name
        && held.skeleton == new.skeleton
        && held.lease.memory_instance_id == new.memory
}

/// Over the leases holding the name (by skeleton) or the memory: `LeaseHeld` /
/// `Confusable` for a live one that is not the caller's own (see [`is_own`]);
/// otherwise what is in the way.
pub(crate) fn check_held(new: &NewLease, held: Vec<Stored>, now: Millis) -> StoreResult<InTheWay> {
    let mut way = InTheWay::default();
    for held in held {
        let on_name = held.skeleton == new.skeleton;
        if held.expires_at > now {
            if is_own(new, &held) {
                way.superseded.push(held);
                continue;
            }
            if on_name && held.lease.name != new.name {
                return Err(StoreError::Confusable {
                    canonical: new.name.clone(),
                    skeleton: new.skeleton.clone(),
                });
            }
            let what = if on_name {
                format!("the name '{}'", new.name)
            } else {
                format!("memory {}", new.memory)
            };
            let own = held.tenant == new.tenant;
            let left = held.expires_at - now;
            return Err(StoreError::LeaseHeld {
                why: match own {
                    true => format!(
                        "{what} is held by another live lease for {} more; nothing was \
                         claimed. Retry after it expires or is released",
                        secs(left)
                    ),
                    false => format!(
                        "{what} is held by another live lease; nothing was claimed. Retry \
                         after Retry-After, or use another name"
                    ),
                },
                retry_after_ms: own.then_some(left),
            });
        }
        let quiet = held.expires_at + held.lock_delay_ms;
        match held.tenant == new.tenant {
            true => way.quiet_until.0 = way.quiet_until.0.max(quiet),
            false => way.quiet_until.1 = way.quiet_until.1.max(quiet),
        }
        way.expired.push(held);
    }
    Ok(way)
}

/// `LeaseHeld` while the name or the memory is in its lock delay. `quiet_until`:
/// (the end of the delays the caller's own tenant's leases set, the end of those
/// whose tenant is another's or unknown). The wait is told exactly only when the
/// caller's own delay is the longer one.
pub(crate) fn check_quiet(
    new: &NewLease,
    quiet_until: (Millis, Millis),
    now: Millis,
) -> StoreResult<()> {
    let (own, other) = quiet_until;
    let until = own.max(other);
    if until > now {
        let exact = own >= other;
        return Err(StoreError::LeaseHeld {
            why: match exact {
                true => format!(
                    "the name '{}' or memory {} is in its lock delay for {} more (after an \
                     expiry or a forced release); nothing was claimed. Retry then",
                    new.name,
                    new.memory,
                    secs(until - now)
                ),
                false => format!(
                    "the name '{}' is in its lock delay (after an expiry or a forced \
                     release); nothing was claimed. Retry after Retry-After",
                    new.name
                ),
            },
            retry_after_ms: exact.then_some(until - now),
        });
    }
    Ok(())
}

/// What stands between a request and its lease, read in one transaction:
/// the memory, the expired leases to take over, and the name's fence.
pub(crate) struct Checked {
    pub(crate) memory: Memory,
    pub(crate) expired: Vec<Stored>,
    /// The caller's own live lease that this claim replaces (see [`InTheWay`]).
    pub(crate) superseded: Vec<Stored>,
    pub(crate) name_fence: Option<(i64, i64)>,
}

impl Checked {
    /// The new lease's fencing token: one above both the name's and the memory's.
    pub(crate) fn next_fence(&self) -> i64 {
        self.name_fence
            .map_or(0, |f| f.0)
            // The store always reads the fence (`memory_from_row`); only answers to
            // agents leave it out.
            .max(self.memory.fencing_token.unwrap_or_default() as i64)
            + 1
    }
}

// --- the audit trail ---

/// Hex `SHA-256(value || salt)`.
pub(crate) fn digest(value: &str, salt: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(value.as_bytes());
    h.update(salt);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A new random audit salt.
pub(crate) fn new_salt() -> Vec<u8> {
    use rand::RngCore;
    let mut salt = vec![0u8; 32];
    rand::rng().fill_bytes(&mut salt);
    salt
}

/// One line of the trail. `name` is the canonical name, when the event has one.
pub(crate) struct Line<'a> {
    pub(crate) event: &'static str,
    pub(crate) name: Option<&'a str>,
    pub(crate) memory: &'a str,
    pub(crate) token: i64,
    pub(crate) actor: &'a str,
}
