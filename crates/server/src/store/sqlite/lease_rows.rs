//! Rows and checks behind `leases.rs`: decoding, memory and lease loads, fences,
//! and the acquisition's checks (shared by the claim and its read-only pre-check).

use super::parse_id;
use crate::clock::{Millis, to_timestamp};
use crate::store::*;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use switchboard_proto::{Lease, LeaseId, Memory, MemoryId};

pub(super) const MEMORY_COLS: &str = "id, label, parent_id, branched_at_token, fence, created_at";
pub(super) const LEASE_COLS: &str = "id, name, skeleton, memory_id, fence, holder, owner_client, ttl_ms, \
     lock_delay_ms, acquired_at, expires_at";

pub(super) fn memory_from_row(r: &SqliteRow) -> StoreResult<Memory> {
    let parent: Option<String> = r.try_get("parent_id")?;
    Ok(Memory {
        memory_instance_id: parse_id(&r.try_get::<String, _>("id")?)?,
        label: r.try_get("label")?,
        parent_memory_instance_id: parent.as_deref().map(parse_id).transpose()?,
        branched_at_token: r
            .try_get::<Option<i64>, _>("branched_at_token")?
            .map(|t| t as u64),
        fencing_token: r.try_get::<i64, _>("fence")? as u64,
        created_at: to_timestamp(r.try_get("created_at")?),
    })
}

/// A stored lease row.
pub(super) struct Stored {
    pub(super) lease: Lease,
    pub(super) skeleton: String,
    pub(super) holder: String,
    pub(super) lock_delay_ms: Millis,
    pub(super) expires_at: Millis,
}

pub(super) fn lease_from_row(r: &SqliteRow) -> StoreResult<Stored> {
    let ttl_ms: i64 = r.try_get("ttl_ms")?;
    let lock_delay_ms: i64 = r.try_get("lock_delay_ms")?;
    let expires_at: i64 = r.try_get("expires_at")?;
    Ok(Stored {
        lease: Lease {
            lease_id: parse_id(&r.try_get::<String, _>("id")?)?,
            name: r.try_get("name")?,
            memory_instance_id: parse_id(&r.try_get::<String, _>("memory_id")?)?,
            fencing_token: r.try_get::<i64, _>("fence")? as u64,
            owner_client: r.try_get("owner_client")?,
            ttl_seconds: ttl_ms as f64 / 1000.0,
            lock_delay_seconds: lock_delay_ms as f64 / 1000.0,
            acquired_at: to_timestamp(r.try_get("acquired_at")?),
            expires_at: to_timestamp(expires_at),
        },
        skeleton: r.try_get("skeleton")?,
        holder: r.try_get("holder")?,
        lock_delay_ms,
        expires_at,
    })
}

pub(super) async fn load_memory(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    id: MemoryId,
) -> StoreResult<Memory> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = ? AND id = ?"
    )))
    .bind(tenant.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    memory_from_row(&row)
}

pub(super) async fn insert_memory(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    label: Option<&str>,
    parent: Option<(MemoryId, u64)>,
    now: Millis,
) -> StoreResult<Memory> {
    let id = MemoryId::new();
    sqlx::query(
        "INSERT INTO memories (id, tenant_id, label, parent_id, branched_at_token, created_at) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(id.to_string())
    .bind(tenant.to_string())
    .bind(label)
    .bind(parent.map(|(p, _)| p.to_string()))
    .bind(parent.map(|(_, t)| t as i64))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    load_memory(conn, tenant, id).await
}

/// The lease of `tenant` with id `id`, if it is still stored.
pub(super) async fn load_lease(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    id: LeaseId,
) -> StoreResult<Option<Stored>> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = ? AND id = ?"
    )))
    .bind(tenant.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .as_ref()
    .map(lease_from_row)
    .transpose()
}

/// Moves the fences of a lease's name and memory to at least `fence`, and their lock
/// delay to at least `quiet_until`.
pub(super) async fn set_fences(
    conn: &mut SqliteConnection,
    skeleton: &str,
    memory: &str,
    fence: i64,
    quiet_until: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO name_fences (skeleton, fence, quiet_until) VALUES (?1, ?2, ?3) \
         ON CONFLICT (skeleton) DO UPDATE SET fence = MAX(fence, ?2), quiet_until = MAX(quiet_until, ?3)",
    )
    .bind(skeleton)
    .bind(fence)
    .bind(quiet_until)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE memories SET fence = MAX(fence, ?1), quiet_until = MAX(quiet_until, ?2) WHERE id = ?3",
    )
    .bind(fence)
    .bind(quiet_until)
    .bind(memory)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The stale-fence refusal, saying what is current.
pub(super) fn stale(id: LeaseId, token: u64, current: i64) -> StoreError {
    StoreError::StaleFence(format!(
        "fencing token {token} of lease {id} is stale: the current token is {current}; \
         this holder lost the lease, acquire it again"
    ))
}

pub(super) fn secs(ms: Millis) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// What stands between a request and its lease, read in `conn`'s transaction:
/// `LeaseHeld` / `Confusable` for a live holder or a lock delay not over yet;
/// otherwise the memory, the expired leases to take over, and the name's fence.
pub(super) struct Checked {
    pub(super) memory: Memory,
    pub(super) expired: Vec<Stored>,
    pub(super) name_fence: Option<(i64, i64)>,
}

pub(super) async fn check(
    conn: &mut SqliteConnection,
    new: &NewLease,
    now: Millis,
) -> StoreResult<Checked> {
    let memory = load_memory(conn, new.tenant, new.memory).await?;
    let memory_id = new.memory.to_string();
    // A registered name (`switchboard names import`) is reserved: only that exact
    // canonical name, and only for its tenant.
    let registered: Option<(String, String)> =
        sqlx::query_as("SELECT name, tenant_id FROM registered_names WHERE skeleton = ?")
            .bind(&new.skeleton)
            .fetch_optional(&mut *conn)
            .await?;
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
    // Whatever holds the name (by skeleton) or the memory now.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLS} FROM leases WHERE skeleton = ? OR memory_id = ?"
    )))
    .bind(&new.skeleton)
    .bind(&memory_id)
    .fetch_all(&mut *conn)
    .await?;
    let mut quiet_until: Millis = 0;
    let mut expired = Vec::new();
    for r in &rows {
        let held = lease_from_row(r)?;
        let on_name = held.skeleton == new.skeleton;
        if held.expires_at > now {
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
            return Err(StoreError::LeaseHeld(format!(
                "{what} is held by another live lease for {} more; nothing was claimed. \
                 Retry after it expires or is released",
                secs(held.expires_at - now)
            )));
        }
        quiet_until = quiet_until.max(held.expires_at + held.lock_delay_ms);
        expired.push(held);
    }
    let name_fence: Option<(i64, i64)> =
        sqlx::query_as("SELECT fence, quiet_until FROM name_fences WHERE skeleton = ?")
            .bind(&new.skeleton)
            .fetch_optional(&mut *conn)
            .await?;
    let memory_quiet: i64 = sqlx::query_scalar("SELECT quiet_until FROM memories WHERE id = ?")
        .bind(&memory_id)
        .fetch_one(&mut *conn)
        .await?;
    let quiet_until = quiet_until
        .max(memory_quiet)
        .max(name_fence.map_or(0, |f| f.1));
    if quiet_until > now {
        return Err(StoreError::LeaseHeld(format!(
            "the name '{}' or memory {} is in its lock delay for {} more (after an \
             expiry or a forced release); nothing was claimed. Retry then",
            new.name,
            new.memory,
            secs(quiet_until - now)
        )));
    }
    Ok(Checked {
        memory,
        expired,
        name_fence,
    })
}
