//! The store's seam for deleting an agent (issue 15): what the Agents page's
//! Delete does, in one transaction.

use super::*;
use async_trait::async_trait;

/// What deleting an agent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentDeletion {
    /// Its credentials that were live (static tokens, device logins), with what
    /// they approved.
    pub revoked: u64,
    /// Its events that were still open (pending, claimed, quarantined), now purged.
    pub purged: u64,
}

#[async_trait]
pub trait DeletionStore: Send + Sync {
    /// Deletes `tenant`'s agent `agent`: `None` when there is no such live agent.
    /// In one transaction: the agent is marked deleted and its name freed, its
    /// credentials are revoked, its open events purged, it leaves its rooms and
    /// memory subscriptions, its name + memory leases end, its webhook callback
    /// goes, and the audit row of `note` is written. Nothing is delivered to it
    /// once this has committed.
    async fn delete_agent(
        &self,
        tenant: TenantId,
        agent: AgentId,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<Option<AgentDeletion>>;
}
