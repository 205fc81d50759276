//! Operator reads and console grants. Reads that SQLite runs in one read
//! transaction (one snapshot) run here in a REPEATABLE READ, READ ONLY transaction,
//! which is what gives PostgreSQL statements one snapshot between them.

use super::*;
use sqlx::AssertSqlSafe;
use std::collections::BTreeMap;

/// Several reads that must see one snapshot.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

pub(super) async fn counts(
    conn: &mut sqlx::PgConnection,
    agent: AgentId,
) -> StoreResult<StatusCounts> {
    let rows =
        sqlx::query("SELECT status, COUNT(*) FROM events WHERE agent_id = $1 GROUP BY status")
            .bind(agent.to_string())
            .fetch_all(conn)
            .await?;
    let mut counts = StatusCounts::default();
    for row in &rows {
        add_count(
            &mut counts,
            &row.try_get::<String, _>(0)?,
            row.try_get::<i64, _>(1)? as u64,
        );
    }
    Ok(counts)
}

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
