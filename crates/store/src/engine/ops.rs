//! What operators read, once for every backend: a filtered page of a tenant's
//! events, one event with its history, and the audit log. The bulk actions' batches
//! are in `bulk.rs`, the jobs in `jobs.rs`; [`OpsStore`] (with the action at once)
//! is implemented here for every backend with the bulk driver.
//!
//! A filter is built at run time (`sqlx::QueryBuilder`, whose `push_bind` numbers
//! the parameters as the backend wants them), once in the statements macro.

use super::Driver;
pub(crate) mod bulk;

use super::area::store_area;
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;
use bulk::BulkDriver;
use switchboard_proto::{HistoryEntry, OpsEvent};

/// The statements of the operator views (`store/statements/ops.rs`).
#[async_trait]
pub(crate) trait OpsStatements: Driver {
    /// The backend's database, for the statements built at run time.
    type Db: sqlx::Database;

    /// Appends `filter`'s conditions (on `events e` joined with `agents a`) to `qb`.
    fn push_filter(qb: &mut sqlx::QueryBuilder<Self::Db>, filter: &EventFilter);

    /// At most `limit` of `tenant`'s events matching `query` and after its cursor,
    /// in id order (a read, outside any write transaction).
    async fn events_page(
        &self,
        tenant: TenantId,
        query: &EventListQuery,
        limit: u32,
    ) -> StoreResult<Vec<OpsEvent>>;
    /// `NotFound` when `tenant` has no such event.
    async fn load_ops_event(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        event: EventId,
    ) -> StoreResult<OpsEvent>;
    /// The event's history, oldest first.
    async fn event_history(
        &self,
        tx: &mut Self::Tx,
        event: EventId,
    ) -> StoreResult<Vec<HistoryEntry>>;
    /// Newest first (a read, outside any write transaction).
    async fn audit_entries(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<AuditEntry>>;
}

/// A page of `tenant`'s events: one more than `limit` is read, so a full page
/// knows whether another follows.
async fn list_events<D: OpsStatements>(
    d: &D,
    tenant: TenantId,
    query: &EventListQuery,
    limit: u32,
) -> StoreResult<OpsEventPage> {
    let mut events = d
        .events_page(tenant, query, limit.saturating_add(1))
        .await?;
    let has_more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let next_cursor = if has_more {
        events.last().map(|e| e.event.event_id)
    } else {
        None
    };
    Ok(OpsEventPage {
        events,
        next_cursor,
    })
}

/// The event and its history, read in one snapshot.
async fn event_detail<D: OpsStatements>(
    d: &D,
    tenant: TenantId,
    event: EventId,
) -> StoreResult<EventDetail> {
    let mut tx = d.begin_read().await?;
    let found = d.load_ops_event(&mut tx, tenant, event).await?;
    let history = d.event_history(&mut tx, event).await?;
    d.commit(tx, &[]).await?;
    Ok(EventDetail {
        event: found,
        history,
    })
}

// Every backend with the bulk driver has the operator views and bulk actions.
store_area! {
    /// Operator views and immediate bulk actions (each recorded in the audit log).
    pub trait OpsStore for Engine<D: BulkDriver> {
        async fn list_events(
            &self,
            tenant: TenantId,
            query: &EventListQuery,
            limit: u32,
        ) -> StoreResult<OpsEventPage> {
            list_events(&self.0, tenant, query, limit).await
        }

        async fn event_detail(&self, tenant: TenantId, event: EventId) -> StoreResult<EventDetail> {
            event_detail(&self.0, tenant, event).await
        }

        /// Applies an action at once, in one transaction: refused with
        /// [`StoreError::TooMany`] when more than `max` events match (that is a job).
        async fn bulk(
            &self,
            tenant: TenantId,
            scope: &Scope<'_>,
            max: u64,
            actor: &Actor,
            now: Millis,
        ) -> StoreResult<Committed<(u64, i64)>> {
            let d = &self.0;
            // In one transaction, with its audit row.
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                let (matching_now, _) = d.count_matching(&mut tx, tenant, scope).await?;
                if matching_now > max {
                    return Err(StoreError::TooMany(matching_now));
                }
                // Events may have come to match since the count (another writer's commit): change
                // at most one more than `max`, and refuse (rolling back) if that many did.
                let window = bulk::Window {
                    limit: Some(max.saturating_add(1)),
                    ..bulk::Window::default()
                };
                let applied = bulk::apply(d, &mut tx, tenant, scope, &window, actor, now).await?;
                if applied.count > max {
                    return Err(StoreError::TooMany(applied.count));
                }
                let row = bulk::NewAudit {
                    tenant,
                    scope,
                    actor,
                    count: applied.count,
                    job: None,
                    now,
                };
                let audit_id = d.insert_audit(&mut tx, &row).await?;
                d.commit(tx, &applied.wakes).await?;
                Ok(Committed {
                    value: (applied.count, audit_id),
                    wakes: applied.wakes,
                })
            })
            .await
        }

        async fn audit(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<AuditEntry>> {
            self.0.audit_entries(tenant, limit).await
        }
    }
}
