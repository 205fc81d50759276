//! The lease audit trail: what happened to a lease, with the name and the memory
//! only as `SHA-256(value || tenant salt)` (hex). The salt is random per tenant,
//! made on first use and never shown, so a hash cannot be reversed by trying
//! names, except by someone who can read the database anyway.

use super::SqliteStore;
use crate::clock::{Millis, to_timestamp};
use crate::store::*;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::{Row, SqliteConnection};
use switchboard_proto::LeaseAuditEntry;

/// The tenant's salt, made now if it has none.
async fn salt(conn: &mut SqliteConnection, tenant: TenantId) -> StoreResult<Vec<u8>> {
    let found: Option<Vec<u8>> = sqlx::query_scalar("SELECT audit_salt FROM tenants WHERE id = ?")
        .bind(tenant.to_string())
        .fetch_optional(&mut *conn)
        .await?
        .flatten();
    if let Some(salt) = found {
        return Ok(salt);
    }
    let mut salt = vec![0u8; 32];
    rand::rng().fill_bytes(&mut salt);
    sqlx::query("UPDATE tenants SET audit_salt = ? WHERE id = ?")
        .bind(&salt)
        .bind(tenant.to_string())
        .execute(&mut *conn)
        .await?;
    Ok(salt)
}

/// Hex `SHA-256(value || salt)`.
pub(crate) fn digest(value: &str, salt: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(value.as_bytes());
    h.update(salt);
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// One line of the trail. `name` is the canonical name, when the event has one.
pub(super) struct Line<'a> {
    pub(super) event: &'static str,
    pub(super) name: Option<&'a str>,
    pub(super) memory: &'a str,
    pub(super) token: i64,
    pub(super) actor: &'a str,
}

pub(super) async fn write(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    line: Line<'_>,
    now: Millis,
) -> StoreResult<()> {
    let salt = salt(conn, tenant).await?;
    sqlx::query(
        "INSERT INTO lease_audit (tenant_id, event, name_hash, memory_hash, fencing_token, actor, at) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
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
    store: &SqliteStore,
    tenant: TenantId,
    limit: u32,
) -> StoreResult<Vec<LeaseAuditEntry>> {
    let rows = sqlx::query(
        "SELECT id, event, name_hash, memory_hash, fencing_token, actor, at FROM lease_audit \
         WHERE tenant_id = ? ORDER BY id DESC LIMIT ?",
    )
    .bind(tenant.to_string())
    .bind(i64::from(limit))
    .fetch_all(store.read())
    .await?;
    rows.iter()
        .map(|r| {
            Ok(LeaseAuditEntry {
                id: r.try_get(0)?,
                event: r.try_get(1)?,
                name_hash: r.try_get(2)?,
                memory_hash: r.try_get(3)?,
                fencing_token: r.try_get::<i64, _>(4)? as u64,
                actor: r.try_get(5)?,
                at: to_timestamp(r.try_get(6)?),
            })
        })
        .collect()
}
