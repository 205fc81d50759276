//! The lease audit trail: what happened to a lease, with the name and the memory
//! only as `SHA-256(value || tenant salt)` (hex). The salt is random per tenant,
//! made on first use and never shown, so a hash cannot be reversed by trying
//! names, except by someone who can read the database anyway.

use super::*;
use crate::store::lease_common::{AUDIT_COLS, audit_entry_from_row, digest, new_salt};
use sqlx::PgConnection;
use switchboard_proto::LeaseAuditEntry;

pub(super) use crate::store::lease_common::Line;

/// The tenant's salt, made now if it has none. Two transactions making it at once
/// agree: the second one's update waits for the first one's commit, then keeps
/// the salt that one stored (`COALESCE`).
async fn salt(conn: &mut PgConnection, tenant: TenantId) -> StoreResult<Vec<u8>> {
    let found: Option<Vec<u8>> = sqlx::query_scalar("SELECT audit_salt FROM tenants WHERE id = $1")
        .bind(tenant.to_string())
        .fetch_optional(&mut *conn)
        .await?
        .flatten();
    if let Some(salt) = found {
        return Ok(salt);
    }
    let salt = new_salt();
    let stored: Option<Vec<u8>> = sqlx::query_scalar(
        "UPDATE tenants SET audit_salt = COALESCE(audit_salt, $1) WHERE id = $2 \
         RETURNING audit_salt",
    )
    .bind(&salt)
    .bind(tenant.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .flatten();
    Ok(stored.unwrap_or(salt))
}

pub(super) async fn write(
    conn: &mut PgConnection,
    tenant: TenantId,
    line: Line<'_>,
    now: Millis,
) -> StoreResult<()> {
    let salt = salt(conn, tenant).await?;
    sqlx::query(
        "INSERT INTO lease_audit (tenant_id, event, name_hash, memory_hash, fencing_token, actor, at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(tenant.to_string())
    .bind(line.event)
    .bind(line.name.map(|n| digest(n, &salt)))
    .bind(digest(line.memory, &salt))
    .bind(line.token)
    .bind(line.actor)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn entries(
    store: &PgStore,
    tenant: TenantId,
    limit: u32,
) -> StoreResult<Vec<LeaseAuditEntry>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {AUDIT_COLS} FROM lease_audit WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2"
    )))
    .bind(tenant.to_string())
    .bind(i64::from(limit))
    .fetch_all(store.pool())
    .await?;
    rows.iter().map(audit_entry_from_row).collect()
}
