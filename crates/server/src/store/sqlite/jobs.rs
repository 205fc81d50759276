//! Operator bulk actions and the audit log. An action runs either at once, in one
//! transaction (`bulk`, for ids or a small filter), or as a job: an audit row whose
//! `count` grows with each batch, each batch its own transaction, so other writers get
//! the single writer connection between batches.

use super::ops::push_filter;
use super::{SqliteStore, history};
use crate::clock::Millis;
use crate::store::rows::{AUDIT_COLS, applies_to, audit_entry, job_from_row, parse_id};
use crate::store::*;
use async_trait::async_trait;
use sqlx::{AssertSqlSafe, QueryBuilder, Row, Sqlite, SqliteConnection};
use std::collections::BTreeMap;
use switchboard_proto::{AuditEntry, Job, JobState};

/// `… FROM events e JOIN agents a … WHERE` the events `scope` names that `action`
/// applies to, after `select`.
fn matching(select: &str, tenant: TenantId, scope: &Scope<'_>) -> QueryBuilder<Sqlite> {
    let mut qb = QueryBuilder::<Sqlite>::new(format!(
        "SELECT {select} FROM events e JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = "
    ));
    qb.push_bind(tenant.to_string());
    qb.push(format!(" AND e.status IN {}", applies_to(scope.action)));
    if let Some(ids) = scope.ids {
        let json = serde_json::to_string(&ids.iter().map(ToString::to_string).collect::<Vec<_>>())
            .unwrap_or_else(|_| "[]".to_owned());
        qb.push(" AND e.id IN (SELECT value FROM json_each(")
            .push_bind(json)
            .push("))");
    }
    if let Some(filter) = scope.filter {
        push_filter(&mut qb, filter);
    }
    qb
}

/// Applies `scope.action` to the matching events with `after < id <= upto`, at most
/// `limit` of them in id order, with a history entry each. Returns how many, the last
/// id, and the wake-ups (one per agent).
async fn apply(
    tx: &mut SqliteConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
    window: (Option<EventId>, Option<EventId>, Option<u32>),
    actor: &Actor,
    now: Millis,
) -> StoreResult<(u64, Option<EventId>, Vec<Wake>)> {
    let (after, upto, limit) = window;
    let mut qb = matching("e.id, e.agent_id, e.seq", tenant, scope);
    if let Some(after) = after {
        qb.push(" AND e.id > ").push_bind(after.to_string());
    }
    if let Some(upto) = upto {
        qb.push(" AND e.id <= ").push_bind(upto.to_string());
    }
    qb.push(" ORDER BY e.id");
    if let Some(limit) = limit {
        qb.push(" LIMIT ").push_bind(i64::from(limit));
    }
    let targets = qb.build().fetch_all(&mut *tx).await?;
    let (set, verb) = match scope.action {
        BulkAction::Replay => (
            "status = 'pending', attempts = 0, claim_token = NULL, lease_expires_at = NULL, available_at = ?1, updated_at = ?1",
            "replayed",
        ),
        BulkAction::Release => (
            "status = 'pending', claim_token = NULL, lease_expires_at = NULL, available_at = ?1, updated_at = ?1",
            "released",
        ),
        BulkAction::Purge => (
            "status = 'purged', payload = NULL, claim_token = NULL, lease_expires_at = NULL, updated_at = ?1",
            "purged",
        ),
    };
    let update = format!("UPDATE events SET {set} WHERE id = ?2");
    let mut wakes: BTreeMap<String, Wake> = BTreeMap::new();
    let mut last = None;
    for row in &targets {
        let id: String = row.try_get(0)?;
        sqlx::query(AssertSqlSafe(update.as_str()))
            .bind(now)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        history(&mut *tx, &id, now, verb, actor, None).await?;
        let agent: String = row.try_get(1)?;
        let seq = row.try_get::<i64, _>(2)? as u64;
        let wake = Wake {
            tenant_id: tenant,
            agent_id: parse_id(&agent)?,
            cursor_hint: seq,
        };
        wakes
            .entry(agent)
            .and_modify(|w| w.cursor_hint = w.cursor_hint.max(seq))
            .or_insert(wake);
        last = Some(parse_id(&id)?);
    }
    Ok((targets.len() as u64, last, wakes.into_values().collect()))
}

pub(super) async fn bulk(
    store: &SqliteStore,
    tenant: TenantId,
    scope: &Scope<'_>,
    max: u64,
    actor: &Actor,
    now: Millis,
) -> StoreResult<Committed<(u64, i64)>> {
    let mut tx = store.begin_write().await?;
    let (matching_now, _) = count(&mut tx, tenant, scope).await?;
    if matching_now > max {
        return Err(StoreError::TooMany(matching_now));
    }
    let (count, _, wakes) = apply(&mut tx, tenant, scope, (None, None, None), actor, now).await?;
    let audit_id = insert_audit(&mut tx, tenant, scope, actor, count, None, now).await?;
    tx.commit().await?;
    Ok(Committed {
        value: (count, audit_id),
        wakes,
    })
}

/// How many events `scope` covers now, and the largest id among them.
async fn count(
    tx: &mut SqliteConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
) -> StoreResult<(u64, Option<EventId>)> {
    let row = matching("COUNT(*), MAX(e.id)", tenant, scope)
        .build()
        .fetch_one(&mut *tx)
        .await?;
    let max: Option<String> = row.try_get(1)?;
    Ok((
        row.try_get::<i64, _>(0)? as u64,
        max.as_deref().map(parse_id).transpose()?,
    ))
}

async fn insert_audit(
    tx: &mut SqliteConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
    actor: &Actor,
    count: u64,
    job: Option<(JobState, u64, Option<u32>)>,
    now: Millis,
) -> StoreResult<i64> {
    let (state, total, rate) = match job {
        Some((s, t, r)) => (Some(s.as_str()), Some(t as i64), r.map(i64::from)),
        None => (None, None, None),
    };
    let finished = job.filter(|(s, ..)| !s.is_live()).map(|_| now);
    Ok(sqlx::query(
        "INSERT INTO audit_log (tenant_id, actor, action, ids, filter, count, at, job_state, job_total, job_rate, finished_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
    )
    .bind(tenant.to_string())
    .bind(actor.to_string())
    .bind(scope.action.as_str())
    .bind(scope.ids.map(|ids| serde_json::to_string(ids).unwrap_or_default()))
    .bind(scope.filter.map(|f| serde_json::to_string(f).unwrap_or_default()))
    .bind(count as i64)
    .bind(now)
    .bind(state)
    .bind(total)
    .bind(rate)
    .bind(finished)
    .fetch_one(&mut *tx)
    .await?
    .try_get(0)?)
}

pub(super) async fn audit(
    store: &SqliteStore,
    tenant: TenantId,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = ? ORDER BY id DESC LIMIT ?"
    )))
    .bind(tenant.to_string())
    .bind(i64::from(limit))
    .fetch_all(store.read())
    .await?
    .iter()
    .map(audit_entry)
    .collect()
}

async fn load_job(conn: &mut SqliteConnection, tenant: TenantId, id: i64) -> StoreResult<Job> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = ? AND id = ? AND job_state IS NOT NULL"
    )))
    .bind(tenant.to_string())
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    job_from_row(&row)
}

async fn set_state(
    conn: &mut SqliteConnection,
    id: i64,
    state: JobState,
    error: Option<&str>,
    now: Millis,
) -> StoreResult<()> {
    let finished = (!state.is_live()).then_some(now);
    sqlx::query(
        "UPDATE audit_log SET job_state = ?, job_error = COALESCE(?, job_error), finished_at = COALESCE(?, finished_at) WHERE id = ?",
    )
    .bind(state.as_str())
    .bind(error)
    .bind(finished)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[async_trait]
impl JobStore for SqliteStore {
    async fn job_start(&self, spec: &JobSpec, now: Millis) -> StoreResult<JobStarted> {
        let scope = spec.scope();
        let mut tx = self.begin_write().await?;
        let (total, upto) = count(&mut tx, spec.tenant, &scope).await?;
        // Nothing to do is done at once.
        let state = if total == 0 {
            JobState::Completed
        } else {
            JobState::Running
        };
        let id = insert_audit(
            &mut tx,
            spec.tenant,
            &scope,
            &spec.actor,
            0,
            Some((state, total, spec.rate)),
            now,
        )
        .await?;
        let job = load_job(&mut tx, spec.tenant, id).await?;
        tx.commit().await?;
        Ok(JobStarted { job, upto })
    }

    async fn job_step(
        &self,
        spec: &JobSpec,
        job_id: i64,
        after: Option<EventId>,
        upto: EventId,
        limit: u32,
        now: Millis,
    ) -> StoreResult<Committed<JobStep>> {
        let scope = spec.scope();
        let mut tx = self.begin_write().await?;
        let job = load_job(&mut tx, spec.tenant, job_id).await?;
        let (n, last, wakes) = match job.state {
            JobState::Running => {
                let window = (after, Some(upto), Some(limit));
                apply(&mut tx, spec.tenant, &scope, window, &spec.actor, now).await?
            }
            JobState::Cancelling => {
                set_state(&mut tx, job_id, JobState::Cancelled, None, now).await?;
                (0, None, Vec::new())
            }
            // Ended elsewhere (cancelled and finished, or marked interrupted).
            _ => (0, None, Vec::new()),
        };
        if n > 0 {
            sqlx::query("UPDATE audit_log SET count = count + ? WHERE id = ?")
                .bind(n as i64)
                .bind(job_id)
                .execute(&mut *tx)
                .await?;
        }
        if job.state == JobState::Running && n < u64::from(limit) {
            set_state(&mut tx, job_id, JobState::Completed, None, now).await?;
        }
        let job = load_job(&mut tx, spec.tenant, job_id).await?;
        tx.commit().await?;
        Ok(Committed {
            value: JobStep { job, last },
            wakes,
        })
    }

    async fn job_end(
        &self,
        tenant: TenantId,
        job_id: i64,
        state: JobState,
        error: Option<&str>,
        now: Millis,
    ) -> StoreResult<Job> {
        let mut tx = self.begin_write().await?;
        let job = load_job(&mut tx, tenant, job_id).await?;
        if job.state.is_live() {
            set_state(&mut tx, job_id, state, error, now).await?;
        }
        let job = load_job(&mut tx, tenant, job_id).await?;
        tx.commit().await?;
        Ok(job)
    }

    async fn job_cancel(&self, tenant: TenantId, job_id: i64, now: Millis) -> StoreResult<Job> {
        let mut tx = self.begin_write().await?;
        let job = load_job(&mut tx, tenant, job_id).await?;
        if job.state == JobState::Running {
            set_state(&mut tx, job_id, JobState::Cancelling, None, now).await?;
        }
        let job = load_job(&mut tx, tenant, job_id).await?;
        tx.commit().await?;
        Ok(job)
    }

    async fn job(&self, tenant: TenantId, job_id: i64) -> StoreResult<Job> {
        let mut conn = self.read().acquire().await?;
        load_job(&mut conn, tenant, job_id).await
    }

    async fn jobs(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<Job>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = ? AND job_state IS NOT NULL ORDER BY id DESC LIMIT ?"
        )))
        .bind(tenant.to_string())
        .bind(i64::from(limit))
        .fetch_all(self.read())
        .await?
        .iter()
        .map(job_from_row)
        .collect()
    }

    async fn jobs_interrupted(&self, now: Millis) -> StoreResult<u64> {
        // One process owns the database file, so a live job at start is one whose
        // process stopped.
        let done = sqlx::query(
            "UPDATE audit_log SET job_state = 'interrupted', finished_at = ? WHERE job_state IN ('running', 'cancelling')",
        )
        .bind(now)
        .execute(&self.write)
        .await?;
        Ok(done.rows_affected())
    }
}
