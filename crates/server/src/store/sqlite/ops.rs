//! Operator reads and bulk actions (each recorded in the audit log).

use super::SqliteStore;
use crate::store::rows::{history_entry, ops_event, prefixed_event_cols};
use crate::store::*;
use sqlx::AssertSqlSafe;
use sqlx::{QueryBuilder, Sqlite};

/// Appends `filter`'s conditions (on `events e` joined with `agents a`) to `qb`.
pub(super) fn push_filter(qb: &mut QueryBuilder<Sqlite>, filter: &EventFilter) {
    if let Some(agent) = &filter.agent {
        if let Ok(id) = agent.parse::<AgentId>() {
            qb.push(" AND e.agent_id = ").push_bind(id.to_string());
        } else {
            qb.push(" AND a.name = ").push_bind(agent.clone());
        }
    }
    if let Some(status) = filter.status {
        qb.push(" AND e.status = ").push_bind(status.as_str());
    }
    if let Some(p) = filter.priority {
        qb.push(" AND e.priority = ").push_bind(p);
    }
    if let Some(c) = &filter.correlation_id {
        qb.push(" AND e.correlation_id = ").push_bind(c.clone());
    }
    if let Some(q) = &filter.q {
        let escaped = q
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        qb.push(" AND e.payload LIKE ")
            .push_bind(format!("%{escaped}%"))
            .push(" ESCAPE '\\'");
    }
}

pub(super) async fn list_events(
    store: &SqliteStore,
    tenant: TenantId,
    query: &EventListQuery,
    limit: u32,
) -> StoreResult<OpsEventPage> {
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {}, a.name AS agent_name FROM events e JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = ",
        prefixed_event_cols()
    ));
    qb.push_bind(tenant.to_string());
    push_filter(&mut qb, &query.filter());
    if let Some(after) = query.after {
        qb.push(" AND e.id > ").push_bind(after.to_string());
    }
    qb.push(" ORDER BY e.id LIMIT ")
        .push_bind(i64::from(limit) + 1);
    let rows = qb.build().fetch_all(store.read()).await?;
    let has_more = rows.len() > limit as usize;
    let events = rows
        .iter()
        .take(limit as usize)
        .map(ops_event)
        .collect::<StoreResult<Vec<_>>>()?;
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

pub(super) async fn event_detail(
    store: &SqliteStore,
    tenant: TenantId,
    event: EventId,
) -> StoreResult<EventDetail> {
    let mut tx = store.read().begin().await?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {}, a.name AS agent_name FROM events e JOIN agents a ON a.id = e.agent_id \
         WHERE e.tenant_id = ? AND e.id = ?",
        prefixed_event_cols()
    )))
    .bind(tenant.to_string())
    .bind(event.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let history = sqlx::query(
        "SELECT action, actor, detail, at FROM event_history WHERE event_id = ? ORDER BY id",
    )
    .bind(event.to_string())
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(history_entry)
    .collect::<StoreResult<Vec<_>>>()?;
    tx.commit().await?;
    Ok(EventDetail {
        event: ops_event(&row)?,
        history,
    })
}
