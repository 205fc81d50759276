//! Rows and checks behind `leases.rs`: decoding, memory and lease loads, fences,
//! and the acquisition's checks (shared by the claim and its read-only pre-check).

use crate::clock::Millis;
use crate::store::*;
use sqlx::SqliteConnection;
use switchboard_proto::{LeaseId, Memory, MemoryId};

pub(super) use crate::store::lease_common::*;

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

/// What stands between a request and its lease, read in `conn`'s transaction:
/// `LeaseHeld` / `Confusable` for a live holder or a lock delay not over yet;
/// otherwise the memory, the expired leases to take over, and the name's fence.
pub(super) async fn check(
    conn: &mut SqliteConnection,
    new: &NewLease,
    now: Millis,
) -> StoreResult<Checked> {
    let memory = load_memory(conn, new.tenant, new.memory).await?;
    let memory_id = new.memory.to_string();
    // A registered name (`switchboard names import`) is reserved.
    let registered: Option<(String, String)> =
        sqlx::query_as("SELECT name, tenant_id FROM registered_names WHERE skeleton = ?")
            .bind(&new.skeleton)
            .fetch_optional(&mut *conn)
            .await?;
    check_registered(new, registered)?;
    // Whatever holds the name (by skeleton) or the memory now.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLS} FROM leases WHERE skeleton = ? OR memory_id = ?"
    )))
    .bind(&new.skeleton)
    .bind(&memory_id)
    .fetch_all(&mut *conn)
    .await?;
    let held = rows
        .iter()
        .map(lease_from_row)
        .collect::<StoreResult<_>>()?;
    let (expired, quiet_until) = check_held(new, held, now)?;
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
    check_quiet(new, quiet_until, now)?;
    Ok(Checked {
        memory,
        expired,
        name_fence,
    })
}
