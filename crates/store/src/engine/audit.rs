//! The operators' audit log (`audit_log`), once for every backend: each
//! state-changing operator action writes one row, in the transaction of the change
//! it records, so the log never names a change that rolled back nor misses one that
//! committed. Bulk actions and jobs write their own rows (`bulk.rs`, `jobs.rs`);
//! everything else an operator (or the deployment admin) changes writes one through
//! [`write`]. What a row may hold is a name or a public id (`token:<token_id>`),
//! never a secret (I11).

use super::Driver;
use crate::clock::Millis;
use crate::{AuditNote, StoreResult};
use async_trait::async_trait;
use switchboard_proto::TenantId;

#[async_trait]
pub(crate) trait AuditStatements: Driver {
    /// One row of `tenant`'s audit log: `note`'s actor, target and detail, `action`
    /// and `count`, at `now`.
    async fn insert_audit_note(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        note: &AuditNote,
        action: &str,
        count: u64,
        now: Millis,
    ) -> StoreResult<()>;
}

/// Writes the row of `action` on `note`'s target in `tx`.
pub(crate) async fn write<D: AuditStatements>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    note: &AuditNote,
    action: &str,
    count: u64,
    now: Millis,
) -> StoreResult<()> {
    d.insert_audit_note(tx, tenant, note, action, count, now)
        .await
}
