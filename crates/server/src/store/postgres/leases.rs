//! Memory instances and name + memory leases with fencing tokens (I7), on a
//! database that several server instances share.
//!
//! SQLite gets "check both, then claim both" from its single writer. Here every
//! change locks what it decides on before it reads it, in one order (the name's
//! fence row, then the memory's row, then lease rows: `lease_rows.rs`):
//! - an acquisition locks the name and the memory first, so of any number racing
//!   for either, one at a time decides, and each sees what the ones before it
//!   committed: exactly one winner, the name and the memory claimed together or
//!   not at all, and fences one above what the last holder of either had;
//! - a renewal or release locks its lease row, a forced release its name, memory
//!   and lease, so an acquisition sees the lease as it is after them;
//! - the unique keys on `leases (skeleton)` and `leases (memory_id)` are the
//!   backstop: a violation is answered as `LeaseHeld`.
//!
//! Deadlocks (40P01) and serialization failures are retried ([`retrying`]).

use super::lease_rows::*;
use super::*;
use crate::store::engine::idempotency;
use crate::store::engine::lease_audit::{self, LeaseAuditStatements};
use crate::store::lease_common::Line;
use sqlx::PgConnection;
use switchboard_proto::{Lease, LeaseId, Lineage, Memory, MemoryId, OpsLease};

/// A read-only transaction that sees one snapshot throughout.
const SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";

#[async_trait]
impl LeaseStore for PgStore {
    async fn register_memory(
        &self,
        tenant: TenantId,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        let mut tx = self.begin().await?;
        let memory = insert_memory(&mut tx, tenant, label, None, now).await?;
        tx.commit().await?;
        Ok(memory)
    }

    async fn branch_memory(
        &self,
        tenant: TenantId,
        parent: MemoryId,
        parent_token: u64,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        // A memory's token only grows: one the parent has reached stays reached.
        let mut tx = self.begin().await?;
        let p = load_memory(&mut tx, tenant, parent, Lock::None).await?;
        check_branch(&p, parent_token)?;
        let memory =
            insert_memory(&mut tx, tenant, label, Some((parent, parent_token)), now).await?;
        tx.commit().await?;
        Ok(memory)
    }

    async fn memory(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Memory> {
        let mut conn = self.pool().acquire().await?;
        load_memory(&mut conn, tenant, id, Lock::None).await
    }

    async fn lineage(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Lineage> {
        let mut tx = self.pool().begin_with(SNAPSHOT).await?;
        let memory = load_memory(&mut tx, tenant, id, Lock::None).await?;
        let mut ancestors = Vec::new();
        let mut next = memory.parent_memory_instance_id;
        while let Some(p) = next {
            let m = load_memory(&mut tx, tenant, p, Lock::None).await?;
            next = m.parent_memory_instance_id;
            ancestors.push(m);
        }
        let mut descendants: Vec<Memory> = Vec::new();
        let mut frontier = vec![id];
        while !frontier.is_empty() {
            let mut found = Vec::new();
            for parent in &frontier {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND parent_id = $2 \
                     ORDER BY id"
                )))
                .bind(tenant.to_string())
                .bind(parent.to_string())
                .fetch_all(&mut *tx)
                .await?;
                for r in &rows {
                    found.push(memory_from_row(r)?);
                }
            }
            frontier = found.iter().map(|m| m.memory_instance_id).collect();
            descendants.extend(found);
        }
        tx.commit().await?;
        Ok(Lineage {
            memory,
            ancestors,
            descendants,
        })
    }

    async fn acquire_lease(
        &self,
        new: &NewLease,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Lease> {
        retrying(|| acquire(self, new, idem, now)).await
    }

    async fn lease_on_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<Lease>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 AND memory_id = $2"
        )))
        .bind(tenant.to_string())
        .bind(memory.to_string())
        .fetch_optional(self.pool())
        .await?
        .as_ref()
        .map(|r| Ok(lease_from_row(r)?.lease))
        .transpose()
    }

    async fn renew_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        ttl_ms: Option<Millis>,
        actor: &str,
        now: Millis,
    ) -> StoreResult<Lease> {
        retrying(|| renew(self, tenant, id, token, ttl_ms, actor, now)).await
    }

    async fn release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        actor: &str,
        now: Millis,
    ) -> StoreResult<()> {
        retrying(|| release(self, tenant, id, token, actor, now)).await
    }

    async fn force_release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        actor: &str,
        now: Millis,
    ) -> StoreResult<OpsLease> {
        retrying(|| force_release(self, tenant, id, actor, now)).await
    }

    async fn leases(&self, tenant: TenantId, now: Millis) -> StoreResult<Vec<OpsLease>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 ORDER BY expires_at"
        )))
        .bind(tenant.to_string())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok(lease_from_row(r)?.ops(now)))
            .collect()
    }

    async fn lease_audit(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::LeaseAuditEntry>> {
        self.audit_lines(tenant, limit).await
    }

    async fn registered_names(
        &self,
        skeletons: &[String],
    ) -> StoreResult<crate::names_import::Taken> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT skeleton, name, original FROM registered_names WHERE skeleton = ANY($1)",
        )
        .bind(skeletons)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|(s, n, o)| (s, (n, o))).collect())
    }

    async fn register_names(
        &self,
        tenant: TenantId,
        names: &[crate::names_import::Planned],
    ) -> StoreResult<()> {
        retrying(|| register_names(self, tenant, names)).await
    }

    async fn lease_precheck(&self, new: &NewLease, key: &IdemKey, now: Millis) -> StoreResult<()> {
        let mut tx = self.pool().begin_with(SNAPSHOT).await?;
        let known: Option<i32> = sqlx::query_scalar(
            "SELECT 1 FROM idempotency_keys WHERE tenant_id = $1 AND principal = $2 \
             AND key_hash = $3 AND expires_at > $4",
        )
        .bind(key.tenant_id.to_string())
        .bind(&key.principal)
        .bind(&key.key_hash)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        // A known key is the idempotency layer's to answer (replay, 409, 422).
        let outcome = match known {
            Some(_) => Ok(()),
            None => check(&mut tx, new, now, false).await.map(drop),
        };
        tx.commit().await?;
        outcome
    }
}

/// The refusal when a unique key on `leases` stops a claim the checks let through
/// (they lock the name and the memory, so this should not happen).
fn claimed_meanwhile(new: &NewLease, e: sqlx::Error) -> StoreError {
    if unique_violation(&e) {
        StoreError::LeaseHeld(format!(
            "the name '{}' or memory {} was claimed by another lease meanwhile; nothing was \
             claimed. Retry after it expires or is released",
            new.name, new.memory
        ))
    } else {
        e.into()
    }
}

async fn acquire(
    store: &PgStore,
    new: &NewLease,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Lease> {
    let mut tx = store.begin().await?;
    // Locks the name, then the memory, then the leases on either (see `check`).
    let checked = check(&mut tx, new, now, true).await?;
    let fence = checked.next_fence();
    let memory_id = new.memory.to_string();
    // Expired leases in the way are taken over (their lock delay has passed).
    for held in &checked.expired {
        sqlx::query("DELETE FROM leases WHERE id = $1")
            .bind(held.lease.lease_id.to_string())
            .execute(&mut *tx)
            .await?;
        let memory = held.lease.memory_instance_id.to_string();
        for (event, actor) in [
            ("expired", "system:leases"),
            ("taken_over", new.holder.as_str()),
        ] {
            let line = Line {
                event,
                name: Some(&held.lease.name),
                memory: &memory,
                token: held.lease.fencing_token as i64,
                actor,
            };
            lease_audit::write(store, &mut tx, new.tenant, line, now).await?;
        }
    }
    set_fences(&mut tx, &new.skeleton, &memory_id, fence, 0).await?;
    let id = LeaseId::new();
    sqlx::query(
        "INSERT INTO leases (id, tenant_id, name, skeleton, memory_id, fence, holder, \
         owner_client, ttl_ms, lock_delay_ms, acquired_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(id.to_string())
    .bind(new.tenant.to_string())
    .bind(&new.name)
    .bind(&new.skeleton)
    .bind(&memory_id)
    .bind(fence)
    .bind(&new.holder)
    .bind(&new.owner_client)
    .bind(new.ttl_ms)
    .bind(new.lock_delay_ms)
    .bind(now)
    .bind(now + new.ttl_ms)
    .execute(&mut *tx)
    .await
    .map_err(|e| claimed_meanwhile(new, e))?;
    sqlx::query(
        "INSERT INTO issued_tokens (memory_id, fence, lease_id, owner_client, holder, issued_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&memory_id)
    .bind(fence)
    .bind(id.to_string())
    .bind(&new.owner_client)
    .bind(&new.holder)
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(|e| claimed_meanwhile(new, e))?;
    let lease = load_lease(&mut tx, new.tenant, id, Lock::None)
        .await?
        .ok_or(StoreError::NotFound)?
        .lease;
    let line = Line {
        event: "acquired",
        name: Some(&new.name),
        memory: &memory_id,
        token: fence,
        actor: &new.holder,
    };
    lease_audit::write(store, &mut tx, new.tenant, line, now).await?;
    idempotency::finish(store, &mut tx, idem, 201, &lease).await?;
    tx.commit().await?;
    Ok(lease)
}

async fn renew(
    store: &PgStore,
    tenant: TenantId,
    id: LeaseId,
    token: u64,
    ttl_ms: Option<Millis>,
    actor: &str,
    now: Millis,
) -> StoreResult<Lease> {
    let mut tx = store.begin().await?;
    // Locked: an acquisition waiting on it sees the renewed expiry.
    let held = load_lease(&mut tx, tenant, id, Lock::Update).await?;
    let held = check_renewal(held, id, token, actor, now)?;
    let ttl = renewal_ttl(&held, ttl_ms);
    sqlx::query("UPDATE leases SET ttl_ms = $1, expires_at = $2 WHERE id = $3")
        .bind(ttl)
        .bind(now + ttl)
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
    let lease = load_lease(&mut tx, tenant, id, Lock::None)
        .await?
        .ok_or(StoreError::NotFound)?
        .lease;
    let memory = lease.memory_instance_id.to_string();
    let line = Line {
        event: "renewed",
        name: Some(&lease.name),
        memory: &memory,
        token: token as i64,
        actor,
    };
    lease_audit::write(store, &mut tx, tenant, line, now).await?;
    tx.commit().await?;
    Ok(lease)
}

async fn release(
    store: &PgStore,
    tenant: TenantId,
    id: LeaseId,
    token: u64,
    actor: &str,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = store.begin().await?;
    // Already gone (released before, forced out, taken over): the holder wants it
    // ended, and it is. Releasing twice is not an error.
    if let Some(held) = load_lease(&mut tx, tenant, id, Lock::Update).await? {
        check_release(&held, id, token, actor)?;
        // A clean release: the holder says it is done, so no lock delay.
        sqlx::query("DELETE FROM leases WHERE id = $1")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        let memory = held.lease.memory_instance_id.to_string();
        let line = Line {
            event: "released",
            name: Some(&held.lease.name),
            memory: &memory,
            token: token as i64,
            actor,
        };
        lease_audit::write(store, &mut tx, tenant, line, now).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn force_release(
    store: &PgStore,
    tenant: TenantId,
    id: LeaseId,
    actor: &str,
    now: Millis,
) -> StoreResult<OpsLease> {
    let mut tx = store.begin().await?;
    // The lease's name and memory never change: read them, lock them in the
    // acquisition's order (name, memory, lease), then read the lease again.
    let seen = load_lease(&mut tx, tenant, id, Lock::None)
        .await?
        .ok_or(StoreError::NotFound)?;
    let memory = seen.lease.memory_instance_id.to_string();
    lock_name(&mut tx, &seen.skeleton).await?;
    lock_memory(&mut tx, &memory).await?;
    let held = load_lease(&mut tx, tenant, id, Lock::Update)
        .await?
        .ok_or(StoreError::NotFound)?;
    sqlx::query("DELETE FROM leases WHERE id = $1")
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
    let bumped = held.lease.fencing_token as i64 + 1;
    set_fences(
        &mut tx,
        &held.skeleton,
        &memory,
        bumped,
        now + held.lock_delay_ms,
    )
    .await?;
    let line = Line {
        event: "force_released",
        name: Some(&held.lease.name),
        memory: &memory,
        token: bumped,
        actor,
    };
    lease_audit::write(store, &mut tx, tenant, line, now).await?;
    tx.commit().await?;
    Ok(held.ops(now))
}

/// All or none. A skeleton (or name) another import registers at the same time is
/// found by `ON CONFLICT`: that import's insert waits for this one's commit, or
/// this one's for that one's, and the later one reports the conflict.
async fn register_names(
    store: &PgStore,
    tenant: TenantId,
    names: &[crate::names_import::Planned],
) -> StoreResult<()> {
    let mut tx = store.begin().await?;
    for n in names {
        if !register_name(&mut tx, tenant, n).await? {
            return Err(StoreError::Conflict(format!(
                "the name {:?} was registered while the import was planned; nothing was \
                 imported, run it again",
                n.name
            )));
        }
    }
    tx.commit().await?;
    Ok(())
}

/// False when the skeleton or the name is registered already.
async fn register_name(
    conn: &mut PgConnection,
    tenant: TenantId,
    n: &crate::names_import::Planned,
) -> StoreResult<bool> {
    let done = sqlx::query(
        "INSERT INTO registered_names (skeleton, name, original, tenant_id, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    )
    .bind(&n.skeleton)
    .bind(&n.name)
    .bind(&n.original)
    .bind(tenant.to_string())
    .bind(n.created_at)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() > 0)
}
