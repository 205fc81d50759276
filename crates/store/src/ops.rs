//! The store's operator seam: the events as operators see them, bulk actions at
//! once, and the audit log (bulk jobs are [`JobStore`](super::JobStore)).

use super::*;
use async_trait::async_trait;

/// Operator views and immediate bulk actions (each recorded in the audit log).
#[async_trait]
pub trait OpsStore: Send + Sync {
    async fn list_events(
        &self,
        tenant: TenantId,
        query: &EventListQuery,
        limit: u32,
    ) -> StoreResult<OpsEventPage>;
    async fn event_detail(&self, tenant: TenantId, event: EventId) -> StoreResult<EventDetail>;
    /// Applies an action at once, in one transaction: refused with
    /// [`StoreError::TooMany`] when more than `max` events match (that is a job).
    async fn bulk(
        &self,
        tenant: TenantId,
        scope: &Scope<'_>,
        max: u64,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Committed<(u64, i64)>>;
    async fn audit(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<AuditEntry>>;
}
