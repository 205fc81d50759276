//! Credentials as a tree, once for every backend. A credential that another one
//! approved hangs from it (`tokens.parent_hash`): a device login from the operator
//! credential that approved the device, an app's sign-in from the one that
//! consented; later, a key bound to a login and a sidecar's exchanged token under
//! its host's login. Revoking a credential revokes every live descendant in the same
//! transaction ([`revoke_tree`]), so nothing an ended credential approved outlives
//! it: its access tokens and console sessions end with it, since every lookup needs
//! a live parent.

use super::Driver;
use crate::StoreResult;
use crate::clock::Millis;
use async_trait::async_trait;
use switchboard_proto::{AgentId, TenantId};

#[async_trait]
pub(crate) trait LineageStatements: Driver {
    /// Revokes `tenant`'s live token `hash`; whether it was live.
    async fn revoke_token_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        hash: &[u8],
        now: Millis,
    ) -> StoreResult<bool>;
    /// `tenant`'s live tokens whose parent is `hash` (a credential's descendants
    /// are of its tenant).
    async fn live_children(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        hash: &[u8],
    ) -> StoreResult<Vec<Vec<u8>>>;
    /// The agent's live tokens.
    async fn live_tokens_of(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<Vec<Vec<u8>>>;
}

/// Revokes the live tokens `roots` (of `tenant`) and every live descendant of each,
/// in `tx`; how many were live. A root of another tenant is not touched (nor its
/// descendants).
pub(crate) async fn revoke_tree<D: LineageStatements>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    roots: &[Vec<u8>],
    now: Millis,
) -> StoreResult<u64> {
    let mut revoked = 0;
    let mut frontier = Vec::new();
    for root in roots {
        if d.revoke_token_row(tx, tenant, root, now).await? {
            revoked += 1;
            frontier.push(root.clone());
        }
    }
    revoked += revoke_descendants(d, tx, tenant, frontier, now).await?;
    Ok(revoked)
}

/// Revokes every live descendant of `parents` (already revoked, or being), in `tx`;
/// how many. Each level is read after the one above it was revoked, so a child made
/// meanwhile under a live parent is either seen here or made under a revoked parent,
/// which its lookups refuse.
pub(crate) async fn revoke_descendants<D: LineageStatements>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    mut parents: Vec<Vec<u8>>,
    now: Millis,
) -> StoreResult<u64> {
    let mut revoked = 0;
    while let Some(parent) = parents.pop() {
        for child in d.live_children(tx, tenant, &parent).await? {
            if d.revoke_token_row(tx, tenant, &child, now).await? {
                revoked += 1;
                parents.push(child);
            }
        }
    }
    Ok(revoked)
}
