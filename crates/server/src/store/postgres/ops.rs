//! Operator reads and console grants. Reads that SQLite runs in one read
//! transaction (one snapshot) run here in a REPEATABLE READ, READ ONLY transaction,
//! which is what gives PostgreSQL statements one snapshot between them.

use super::*;
use sqlx::{AssertSqlSafe, QueryBuilder};
use std::collections::BTreeMap;

/// Several reads that must see one snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

pub(super) async fn depth(store: &PgStore, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>> {
    let tenant = tenant.map(|t| t.to_string());
    let mut tx = store.pool().begin_with(BEGIN_SNAPSHOT).await?;
    let agents = sqlx::query(
        "SELECT id, name, tenant_id FROM agents WHERE ($1::text IS NULL OR tenant_id = $1) \
         ORDER BY name",
    )
    .bind(&tenant)
    .fetch_all(&mut *tx)
    .await?;
    let mut by_agent: BTreeMap<String, DepthRow> = BTreeMap::new();
    for row in &agents {
        let id: String = row.try_get(0)?;
        by_agent.insert(
            id.clone(),
            DepthRow {
                agent_id: parse_id(&id)?,
                agent_name: row.try_get(1)?,
                tenant_id: parse_id(&row.try_get::<String, _>(2)?)?,
                counts: StatusCounts::default(),
                oldest_pending_at: None,
            },
        );
    }
    let rows = sqlx::query(
        "SELECT e.agent_id, e.status, COUNT(*), \
         MIN(CASE WHEN e.status = 'pending' THEN e.available_at END) \
         FROM events e JOIN agents a ON a.id = e.agent_id \
         WHERE ($1::text IS NULL OR a.tenant_id = $1) GROUP BY e.agent_id, e.status",
    )
    .bind(&tenant)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    for row in &rows {
        let id: String = row.try_get(0)?;
        if let Some(d) = by_agent.get_mut(&id) {
            add_count(
                &mut d.counts,
                &row.try_get::<String, _>(1)?,
                row.try_get::<i64, _>(2)? as u64,
            );
            if let Some(at) = row.try_get::<Option<i64>, _>(3)? {
                d.oldest_pending_at = Some(d.oldest_pending_at.map_or(at, |o: i64| o.min(at)));
            }
        }
    }
    let mut out: Vec<DepthRow> = by_agent.into_values().collect();
    out.sort_by(|a, b| a.agent_name.cmp(&b.agent_name));
    Ok(out)
}

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

pub(super) async fn insert_grant(
    store: &PgStore,
    grant: &NewGrant<'_>,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = store.begin().await?;
    // Expired grants are of no use to anyone; forget them while writing anyway.
    sqlx::query("DELETE FROM console_grants WHERE expires_at <= $1")
        .bind(now)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO console_grants (hash, kind, tenant_id, token_hash, scopes, created_at, \
         expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(grant.hash)
    .bind(grant.kind.as_str())
    .bind(grant.tenant.to_string())
    .bind(grant.token_hash)
    .bind(grant.scopes.join(" "))
    .bind(now)
    .bind(grant.expires_at)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Reads a live grant; with `take`, deletes it in the same statement, so a ticket
/// works once even when two requests (on any instances) race for it: the second
/// `DELETE` waits for the first one's row lock and then finds nothing.
pub(super) async fn grant(
    store: &PgStore,
    hash: &[u8],
    kind: GrantKind,
    now: Millis,
    take: bool,
) -> StoreResult<Option<Grant>> {
    // `g` is the grant row: the table itself, or (take) the row just deleted. Used or
    // not, valid or not, a presented ticket is gone.
    let source = if take {
        "WITH g AS (DELETE FROM console_grants WHERE hash = $1 AND kind = $2 RETURNING *) "
    } else {
        ""
    };
    let table = if take { "g" } else { "console_grants g" };
    let sql = format!(
        "{source}SELECT g.tenant_id, t.agent_id, g.scopes, a.name, g.token_hash, g.expires_at \
         FROM {table} JOIN tokens t ON t.hash = g.token_hash \
         LEFT JOIN agents a ON a.id = t.agent_id \
         WHERE g.hash = $1 AND g.kind = $2 AND g.expires_at > $3 AND t.revoked_at IS NULL"
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(hash)
        .bind(kind.as_str())
        .bind(now)
        .fetch_optional(store.pool())
        .await?;
    row.map(|row| grant_from_row(&row, row.try_get("token_hash")?))
        .transpose()
}

pub(super) async fn delete_grant(store: &PgStore, hash: &[u8]) -> StoreResult<()> {
    sqlx::query("DELETE FROM console_grants WHERE hash = $1")
        .bind(hash)
        .execute(store.pool())
        .await?;
    Ok(())
}
