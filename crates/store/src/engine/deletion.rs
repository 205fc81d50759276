//! Deleting an agent, once for every backend. The row stays (events, history and
//! audit refer to it) with `deleted_at` set and its name replaced by
//! `deleted:<id>`, which no agent can be named (`:` is refused), so the name is
//! free again. What must hold:
//!
//! - nothing is delivered to a deleted agent: every path that numbers an event
//!   (`take_seq`) advances only a live agent's sequence, and locks its row, so a
//!   send either commits before the deletion (and its event is purged with the
//!   rest) or fails with 404 after it; fan-outs (rooms, memory subscribers) skip a
//!   member deleted after they read their members;
//! - its credentials stop at once: they are revoked in the same transaction, and
//!   every token lookup also needs a live agent (a token made for it by a racing
//!   approval never works).

use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::callbacks::CallbackStatements;
use super::directory::DirectoryStatements;
use super::leases::{LeaseDriver, end_held_by};
use super::lineage::{LineageStatements, revoke_descendants};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;

/// The statements of deleting an agent (`store/statements/deletion.rs`), in `tx`.
#[async_trait]
pub(crate) trait DeletionStatements: CallbackStatements + DirectoryStatements {
    /// Marks the agent deleted and frees its name; false when it is no live agent
    /// of `tenant`.
    async fn mark_agent_deleted(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Purges the agent's open events (pending, claimed, quarantined); how many.
    async fn purge_events_of(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<u64>;
    /// Takes the agent out of every room and memory subscription.
    async fn leave_everything(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<()>;
}

store_area! {
    pub trait DeletionStore for Engine<
        D: DeletionStatements + LeaseDriver + AuditStatements + LineageStatements,
    > {
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
        ) -> StoreResult<Option<AgentDeletion>> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d.mark_agent_deleted(&mut tx, tenant, agent, now).await? {
                    return Ok(None);
                }
                let tokens = d.live_tokens_of(&mut tx, tenant, agent).await?;
                let mut revoked = d.revoke_agent_tokens(&mut tx, tenant, agent, now).await?;
                revoked += revoke_descendants(d, &mut tx, tenant, tokens, now).await?;
                let purged = d.purge_events_of(&mut tx, agent, now).await?;
                d.leave_everything(&mut tx, agent).await?;
                d.delete_agent_callback(&mut tx, agent).await?;
                // Its name + memory leases end with it, audited, so a later agent of the same
                // name inherits none of them.
                let holder = Actor::Agent {
                    id: agent,
                    name: String::new(),
                };
                end_held_by(d, &mut tx, tenant, &holder.key(), &note.actor, now).await?;
                audit::write(d, &mut tx, tenant, note, "agent_deleted", 1, now).await?;
                d.commit(tx, &[]).await?;
                Ok(Some(AgentDeletion { revoked, purged }))
            })
            .await
        }
    }
}
