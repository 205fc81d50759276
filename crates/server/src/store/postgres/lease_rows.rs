//! Rows, locks and checks behind `leases.rs`: memory and lease loads, fences, and
//! the acquisition's checks (shared by the claim and its read-only pre-check).
//!
//! Locks are always taken in one order: the name's fence row, then the memory's
//! row, then lease rows (then, once per tenant ever, its row for the audit salt).
//! Every path that takes more than one follows it, so none waits in a cycle.

use super::*;
use sqlx::PgConnection;
use switchboard_proto::{LeaseId, Memory, MemoryId};

pub(super) use crate::store::lease_common::*;

/// Whether a read locks what it reads until the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lock {
    None,
    /// `FOR UPDATE`: this transaction alone changes it.
    Update,
}

impl Lock {
    fn clause(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Update => " FOR UPDATE",
        }
    }
}

pub(super) async fn load_memory(
    conn: &mut PgConnection,
    tenant: TenantId,
    id: MemoryId,
    lock: Lock,
) -> StoreResult<Memory> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = $1 AND id = $2{}",
        lock.clause()
    )))
    .bind(tenant.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    memory_from_row(&row)
}

pub(super) async fn insert_memory(
    conn: &mut PgConnection,
    tenant: TenantId,
    label: Option<&str>,
    parent: Option<(MemoryId, u64)>,
    now: Millis,
) -> StoreResult<Memory> {
    let id = MemoryId::new();
    sqlx::query(
        "INSERT INTO memories (id, tenant_id, label, parent_id, branched_at_token, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id.to_string())
    .bind(tenant.to_string())
    .bind(label)
    .bind(parent.map(|(p, _)| p.to_string()))
    .bind(parent.map(|(_, t)| t as i64))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    load_memory(conn, tenant, id, Lock::None).await
}

/// The lease of `tenant` with id `id`, if it is still stored.
pub(super) async fn load_lease(
    conn: &mut PgConnection,
    tenant: TenantId,
    id: LeaseId,
    lock: Lock,
) -> StoreResult<Option<Stored>> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = $1 AND id = $2{}",
        lock.clause()
    )))
    .bind(tenant.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .as_ref()
    .map(lease_from_row)
    .transpose()
}

/// Locks the name's fence row (made at fence 0 if the name never had one: the
/// same as none) until the transaction ends; its (fence, quiet_until). A second
/// transaction on the same skeleton waits here, and then reads what the first one
/// committed.
pub(super) async fn lock_name(conn: &mut PgConnection, skeleton: &str) -> StoreResult<(i64, i64)> {
    sqlx::query(
        "INSERT INTO name_fences (skeleton, fence) VALUES ($1, 0) ON CONFLICT (skeleton) DO NOTHING",
    )
    .bind(skeleton)
    .execute(&mut *conn)
    .await?;
    Ok(
        sqlx::query_as("SELECT fence, quiet_until FROM name_fences WHERE skeleton = $1 FOR UPDATE")
            .bind(skeleton)
            .fetch_one(&mut *conn)
            .await?,
    )
}

/// Locks the memory's row until the transaction ends (`NotFound`: no such memory).
pub(super) async fn lock_memory(conn: &mut PgConnection, memory: &str) -> StoreResult<()> {
    let found: Option<i32> = sqlx::query_scalar("SELECT 1 FROM memories WHERE id = $1 FOR UPDATE")
        .bind(memory)
        .fetch_optional(&mut *conn)
        .await?;
    found.map(drop).ok_or(StoreError::NotFound)
}

/// Moves the fences of a lease's name and memory to at least `fence`, and their lock
/// delay to at least `quiet_until`.
pub(super) async fn set_fences(
    conn: &mut PgConnection,
    skeleton: &str,
    memory: &str,
    fence: i64,
    quiet_until: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO name_fences (skeleton, fence, quiet_until) VALUES ($1, $2, $3) \
         ON CONFLICT (skeleton) DO UPDATE SET \
         fence = GREATEST(name_fences.fence, EXCLUDED.fence), \
         quiet_until = GREATEST(name_fences.quiet_until, EXCLUDED.quiet_until)",
    )
    .bind(skeleton)
    .bind(fence)
    .bind(quiet_until)
    .execute(&mut *conn)
    .await?;
    sqlx::query(
        "UPDATE memories SET fence = GREATEST(fence, $1), quiet_until = GREATEST(quiet_until, $2) \
         WHERE id = $3",
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
///
/// With `lock`, the name's fence row, the memory's row and the leases on either
/// are locked first (in that order) and stay locked until the transaction ends:
/// no other acquisition, forced release or record call on them runs in between,
/// so "check both, then claim both" has exactly one winner. Without, nothing is
/// locked or written (the read-only pre-check).
pub(super) async fn check(
    conn: &mut PgConnection,
    new: &NewLease,
    now: Millis,
    lock: bool,
) -> StoreResult<Checked> {
    let (name_lock, row_lock) = if lock {
        (Some(lock_name(conn, &new.skeleton).await?), Lock::Update)
    } else {
        (None, Lock::None)
    };
    let memory = load_memory(conn, new.tenant, new.memory, row_lock).await?;
    let memory_id = new.memory.to_string();
    // A registered name (`switchboard names import`) is reserved.
    let registered: Option<(String, String)> =
        sqlx::query_as("SELECT name, tenant_id FROM registered_names WHERE skeleton = $1")
            .bind(&new.skeleton)
            .fetch_optional(&mut *conn)
            .await?;
    check_registered(new, registered)?;
    // Whatever holds the name (by skeleton) or the memory now.
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {LEASE_COLS} FROM leases WHERE skeleton = $1 OR memory_id = $2{}",
        row_lock.clause()
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
    let name_fence = match name_lock {
        Some(fence) => Some(fence),
        None => {
            sqlx::query_as("SELECT fence, quiet_until FROM name_fences WHERE skeleton = $1")
                .bind(&new.skeleton)
                .fetch_optional(&mut *conn)
                .await?
        }
    };
    let memory_quiet: i64 = sqlx::query_scalar("SELECT quiet_until FROM memories WHERE id = $1")
        .bind(&memory_id)
        .fetch_one(&mut *conn)
        .await?;
    let quiet_until = quiet_until
        .max(memory_quiet)
        .max(name_fence.map_or(0, |f: (i64, i64)| f.1));
    check_quiet(new, quiet_until, now)?;
    Ok(Checked {
        memory,
        expired,
        name_fence,
    })
}
