//! The lease audit trail, once for every backend: what happened to a lease, with
//! the name and the memory only as `SHA-256(value || tenant salt)` (hex). The salt
//! is random per tenant, made on first use and never shown, so a hash cannot be
//! reversed by trying names, except by someone who can read the database anyway.

use super::Driver;
use crate::StoreResult;
use crate::clock::Millis;
use crate::lease_rules::{Line, digest, new_salt};
use async_trait::async_trait;
use switchboard_proto::{LeaseAuditEntry, TenantId};

/// A line as stored: hashes, never the name or the memory.
pub(crate) struct AuditRow<'a> {
    pub(crate) tenant: TenantId,
    pub(crate) event: &'a str,
    pub(crate) name_hash: Option<String>,
    pub(crate) memory_hash: String,
    pub(crate) token: i64,
    pub(crate) actor: &'a str,
    pub(crate) at: Millis,
}

#[async_trait]
pub(crate) trait LeaseAuditStatements: Driver {
    async fn audit_salt(&self, tx: &mut Self::Tx, tenant: TenantId)
    -> StoreResult<Option<Vec<u8>>>;
    /// Stores `salt` unless the tenant has one already, locking the tenant's row:
    /// two transactions making it at once agree (the second one's update waits for
    /// the first one's commit, then keeps the salt that one stored, which
    /// [`audit_salt`](Self::audit_salt) then reads).
    async fn keep_audit_salt(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        salt: &[u8],
    ) -> StoreResult<()>;
    async fn insert_audit_line(&self, tx: &mut Self::Tx, row: &AuditRow<'_>) -> StoreResult<()>;
    /// Newest first (a read, outside any write transaction).
    async fn audit_lines(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<LeaseAuditEntry>>;
}

/// Writes one line of the trail in `tx`, making the tenant's salt if it has none.
pub(crate) async fn write<D: LeaseAuditStatements>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    line: Line<'_>,
    now: Millis,
) -> StoreResult<()> {
    let salt = match d.audit_salt(tx, tenant).await? {
        Some(salt) => salt,
        None => {
            // Once per tenant: a plain UPDATE and a read, as every backend has them.
            let salt = new_salt();
            d.keep_audit_salt(tx, tenant, &salt).await?;
            d.audit_salt(tx, tenant).await?.unwrap_or(salt)
        }
    };
    let row = AuditRow {
        tenant,
        event: line.event,
        name_hash: line.name.map(|n| digest(n, &salt)),
        memory_hash: digest(line.memory, &salt),
        token: line.token,
        actor: line.actor,
        at: now,
    };
    d.insert_audit_line(tx, &row).await
}
