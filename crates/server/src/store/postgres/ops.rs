//! Operator reads. Reads that SQLite runs in one read
//! transaction (one snapshot) run here in a REPEATABLE READ, READ ONLY transaction,
//! which is what gives PostgreSQL statements one snapshot between them.

use super::*;
use sqlx::{AssertSqlSafe, QueryBuilder};

/// Several reads that must see one snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// Appends `filter`'s conditions (on `events e` joined with `agents a`) to `qb`.
pub(super) fn push_filter(qb: &mut QueryBuilder<Postgres>, filter: &EventFilter) {
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
        qb.push(" AND e.priority = ").push_bind(i64::from(p));
    }
    if let Some(c) = &filter.correlation_id {
        qb.push(" AND e.correlation_id = ").push_bind(c.clone());
    }
    if let Some(q) = &filter.q {
        let escaped = q
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        // ILIKE: SQLite's LIKE ignores (ASCII) case.
        qb.push(" AND e.payload ILIKE ")
            .push_bind(format!("%{escaped}%"))
            .push(" ESCAPE '\\'");
    }
}

pub(super) async fn list_events(
    store: &PgStore,
    tenant: TenantId,
    query: &EventListQuery,
    limit: u32,
) -> StoreResult<OpsEventPage> {
    let mut qb = QueryBuilder::<Postgres>::new(format!(
        "SELECT {}, a.name AS agent_name FROM events e JOIN agents a ON a.id = e.agent_id \
         WHERE e.tenant_id = ",
        prefixed_event_cols()
    ));
    qb.push_bind(tenant.to_string());
    push_filter(&mut qb, &query.filter());
    if let Some(after) = query.after {
        qb.push(" AND e.id > ").push_bind(after.to_string());
    }
    qb.push(" ORDER BY e.id LIMIT ")
        .push_bind(i64::from(limit) + 1);
    let rows = qb.build().fetch_all(store.pool()).await?;
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
    store: &PgStore,
    tenant: TenantId,
    event: EventId,
) -> StoreResult<EventDetail> {
    let mut tx = store.pool().begin_with(BEGIN_SNAPSHOT).await?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {}, a.name AS agent_name FROM events e JOIN agents a ON a.id = e.agent_id \
         WHERE e.tenant_id = $1 AND e.id = $2",
        prefixed_event_cols()
    )))
    .bind(tenant.to_string())
    .bind(event.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let history = sqlx::query(
        "SELECT action, actor, detail, at FROM event_history WHERE event_id = $1 ORDER BY id",
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
