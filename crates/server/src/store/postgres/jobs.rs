//! Operator bulk actions and the audit log. An action runs either at once, in one
//! transaction (`bulk`, for ids or a small filter), or as a job: an audit row whose
//! `count` grows with each batch, each batch its own transaction.
//!
//! Several instances share the database, so where SQLite relies on its single writer
//! this backend locks:
//! - a batch locks its events (`FOR UPDATE OF e`, in id order) in the statement that
//!   changes them, so an event changed concurrently (an ack, a claim, another job) is
//!   re-checked against the action's statuses after that commit, never changed twice;
//! - a job step locks the job's audit row first, so a cancel or an end from any
//!   instance waits for the batch and is seen by the next one, and `count` grows in the
//!   batch's own transaction;
//! - a job has an owner (the instance running it) and a heartbeat each step
//!   refreshes; only a job whose heartbeat is stale counts as interrupted.

use super::ops::push_filter;
use super::*;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, QueryBuilder};
use std::collections::BTreeMap;
use switchboard_proto::{AuditEntry, Job, JobState};

/// A live job whose heartbeat is older than this has lost its instance (which
/// stopped without ending it). Every batch refreshes the heartbeat; batches follow
/// each other within about a second, paced or not (a paced batch is at most `rate`
/// events, so its pause is at most 1 s), and a batch ends within the 15 s statement
/// timeout: twice that leaves no live job mistaken for a lost one.
const JOB_STALE_MS: i64 = 30_000;

/// Appends to `qb` `… FROM events e JOIN agents a … WHERE` the events `scope` names
/// that `action` applies to, after `SELECT {select}`.
fn matching(qb: &mut QueryBuilder<Postgres>, select: &str, tenant: TenantId, scope: &Scope<'_>) {
    qb.push(format!(
        "SELECT {select} FROM events e JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = "
    ));
    qb.push_bind(tenant.to_string());
    qb.push(format!(" AND e.status IN {}", applies_to(scope.action)));
    if let Some(ids) = scope.ids {
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        qb.push(" AND e.id = ANY(").push_bind(ids).push("::text[])");
    }
    if let Some(filter) = scope.filter {
        push_filter(qb, filter);
    }
}

/// Applies `scope.action` to the matching events with `after < id <= upto`, at most
/// `limit` of them in id order, with a history entry each, in one statement that
/// locks them. Returns how many, the last id, and the wake-ups (one per agent).
async fn apply(
    tx: &mut sqlx::PgConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
    window: (Option<EventId>, Option<EventId>, Option<i64>),
    actor: &Actor,
    now: Millis,
) -> StoreResult<(u64, Option<EventId>, Vec<Wake>)> {
    let (after, upto, limit) = window;
    let mut qb = QueryBuilder::<Postgres>::new("WITH picked AS (");
    matching(&mut qb, "e.id", tenant, scope);
    if let Some(after) = after {
        qb.push(" AND e.id > ").push_bind(after.to_string());
    }
    if let Some(upto) = upto {
        qb.push(" AND e.id <= ").push_bind(upto.to_string());
    }
    // In id order, so two batches (of any instances) take their locks in one order.
    // Only the events are locked: the agents' rows stay free for senders. A locked
    // row that no longer matches once its lock is released is skipped, and the limit
    // takes the next one.
    qb.push(" ORDER BY e.id");
    if let Some(limit) = limit {
        qb.push(" LIMIT ").push_bind(limit);
    }
    qb.push(" FOR UPDATE OF e), done AS (UPDATE events SET ");
    let verb = match scope.action {
        BulkAction::Replay => {
            qb.push("status = 'pending', attempts = 0, claim_token = NULL, lease_expires_at = NULL, available_at = ")
                .push_bind(now);
            "replayed"
        }
        BulkAction::Release => {
            qb.push(
                "status = 'pending', claim_token = NULL, lease_expires_at = NULL, available_at = ",
            )
            .push_bind(now);
            "released"
        }
        BulkAction::Purge => {
            qb.push(
                "status = 'purged', payload = NULL, claim_token = NULL, lease_expires_at = NULL",
            );
            "purged"
        }
    };
    qb.push(", updated_at = ").push_bind(now);
    qb.push(
        " WHERE id IN (SELECT id FROM picked) RETURNING id, agent_id, seq), \
         history AS (INSERT INTO event_history (event_id, at, action, actor, detail) \
         SELECT id, ",
    );
    qb.push_bind(now).push(", ").push_bind(verb).push(", ");
    qb.push_bind(actor.to_string())
        .push(", NULL FROM done) SELECT id, agent_id, seq FROM done");
    let rows = qb.build().fetch_all(&mut *tx).await?;

    let mut wakes: BTreeMap<String, Wake> = BTreeMap::new();
    let mut last: Option<String> = None;
    for row in &rows {
        let id: String = row.try_get(0)?;
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
        // RETURNING has no order: the last is the largest id. Ids are UUID text of
        // one shape, which any collation orders as bytes, as `e.id > $after` does.
        if last.as_ref().is_none_or(|l| *l < id) {
            last = Some(id);
        }
    }
    let last = last.as_deref().map(parse_id).transpose()?;
    Ok((rows.len() as u64, last, wakes.into_values().collect()))
}

pub(super) async fn bulk(
    store: &PgStore,
    tenant: TenantId,
    scope: &Scope<'_>,
    max: u64,
    actor: &Actor,
    now: Millis,
) -> StoreResult<Committed<(u64, i64)>> {
    let mut tx = store.begin().await?;
    let (matching_now, _) = count(&mut tx, tenant, scope).await?;
    if matching_now > max {
        return Err(StoreError::TooMany(matching_now));
    }
    // Events may have come to match since the count: change at most one more than
    // `max`, and refuse (rolling back) if that many did.
    let limit = i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1);
    let (count, _, wakes) = apply(
        &mut tx,
        tenant,
        scope,
        (None, None, Some(limit)),
        actor,
        now,
    )
    .await?;
    if count > max {
        return Err(StoreError::TooMany(count));
    }
    let audit_id: i64 = insert_audit(&mut tx, tenant, scope, actor, count, None, now)
        .await?
        .try_get("id")?;
    store.commit(tx, &wakes).await?;
    Ok(Committed {
        value: (count, audit_id),
        wakes,
    })
}

/// How many events `scope` covers now, and the largest id among them.
async fn count(
    tx: &mut sqlx::PgConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
) -> StoreResult<(u64, Option<EventId>)> {
    let mut qb = QueryBuilder::<Postgres>::new("");
    matching(&mut qb, "COUNT(*), MAX(e.id)", tenant, scope);
    let row = qb.build().fetch_one(&mut *tx).await?;
    let max: Option<String> = row.try_get(1)?;
    Ok((
        row.try_get::<i64, _>(0)? as u64,
        max.as_deref().map(parse_id).transpose()?,
    ))
}

/// Writes an audit row (a job's when `job` is given, with its owner) and returns it
/// (its [`AUDIT_COLS`]).
async fn insert_audit(
    tx: &mut sqlx::PgConnection,
    tenant: TenantId,
    scope: &Scope<'_>,
    actor: &Actor,
    count: u64,
    job: Option<(JobState, u64, Option<u32>, &str)>,
    now: Millis,
) -> StoreResult<PgRow> {
    let (state, total, rate, owner) = match job {
        Some((s, t, r, o)) => (Some(s.as_str()), Some(t as i64), r.map(i64::from), Some(o)),
        None => (None, None, None, None),
    };
    let finished = job.filter(|(s, ..)| !s.is_live()).map(|_| now);
    let heartbeat = job.map(|_| now);
    Ok(sqlx::query(AssertSqlSafe(format!(
        "INSERT INTO audit_log (tenant_id, actor, action, ids, filter, count, at, job_state, \
         job_total, job_rate, finished_at, job_owner, job_heartbeat_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING {AUDIT_COLS}"
    )))
    .bind(tenant.to_string())
    .bind(actor.to_string())
    .bind(scope.action.as_str())
    .bind(
        scope
            .ids
            .map(|ids| serde_json::to_string(ids).unwrap_or_default()),
    )
    .bind(
        scope
            .filter
            .map(|f| serde_json::to_string(f).unwrap_or_default()),
    )
    .bind(count as i64)
    .bind(now)
    .bind(state)
    .bind(total)
    .bind(rate)
    .bind(finished)
    .bind(owner)
    .bind(heartbeat)
    .fetch_one(&mut *tx)
    .await?)
}

pub(super) async fn audit(
    store: &PgStore,
    tenant: TenantId,
    limit: u32,
) -> StoreResult<Vec<AuditEntry>> {
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2"
    )))
    .bind(tenant.to_string())
    .bind(i64::from(limit))
    .fetch_all(store.pool())
    .await?
    .iter()
    .map(audit_entry)
    .collect()
}

/// Reads a job; with `lock`, takes its row lock until the transaction ends, so a
/// step, a cancel and an end of one job (from any instances) run one after another.
async fn load_job(
    conn: &mut sqlx::PgConnection,
    tenant: TenantId,
    id: i64,
    lock: bool,
) -> StoreResult<Job> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT {AUDIT_COLS} FROM audit_log \
         WHERE tenant_id = $1 AND id = $2 AND job_state IS NOT NULL{}",
        if lock { " FOR UPDATE" } else { "" }
    )))
    .bind(tenant.to_string())
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    job_from_row(&row)
}

/// Adds `done` to a job's count, moves it to `state` (if given), refreshes its
/// heartbeat, and returns it.
async fn update_job(
    conn: &mut sqlx::PgConnection,
    id: i64,
    done: u64,
    state: Option<(JobState, Option<&str>)>,
    now: Millis,
) -> StoreResult<Job> {
    let finished = state.filter(|(s, _)| !s.is_live()).map(|_| now);
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE audit_log SET count = count + $1, job_heartbeat_at = $2, \
         job_state = COALESCE($3, job_state), job_error = COALESCE($4, job_error), \
         finished_at = COALESCE($5, finished_at) WHERE id = $6 RETURNING {AUDIT_COLS}"
    )))
    .bind(done as i64)
    .bind(now)
    .bind(state.map(|(s, _)| s.as_str()))
    .bind(state.and_then(|(_, e)| e))
    .bind(finished)
    .bind(id)
    .fetch_one(&mut *conn)
    .await?;
    job_from_row(&row)
}

/// One batch of a job, in one transaction (see [`JobStore::job_step`]).
async fn step(
    store: &PgStore,
    spec: &JobSpec,
    job_id: i64,
    window: (Option<EventId>, EventId, u32),
    now: Millis,
) -> StoreResult<Committed<JobStep>> {
    let (after, upto, limit) = window;
    let scope = spec.scope();
    let mut tx = store.begin().await?;
    let job = load_job(&mut tx, spec.tenant, job_id, true).await?;
    let (job, last, wakes) = match job.state {
        JobState::Running => {
            let window = (after, Some(upto), Some(i64::from(limit)));
            let (n, last, wakes) =
                apply(&mut tx, spec.tenant, &scope, window, &spec.actor, now).await?;
            // A batch smaller than the limit found the rest of the window empty.
            let state = (n < u64::from(limit)).then_some((JobState::Completed, None));
            (
                update_job(&mut tx, job_id, n, state, now).await?,
                last,
                wakes,
            )
        }
        JobState::Cancelling => {
            let cancelled = Some((JobState::Cancelled, None));
            (
                update_job(&mut tx, job_id, 0, cancelled, now).await?,
                None,
                Vec::new(),
            )
        }
        // Ended elsewhere (cancelled and finished, or marked interrupted).
        _ => (job, None, Vec::new()),
    };
    store.commit(tx, &wakes).await?;
    Ok(Committed {
        value: JobStep { job, last },
        wakes,
    })
}

#[async_trait]
impl JobStore for PgStore {
    async fn job_start(&self, spec: &JobSpec, now: Millis) -> StoreResult<JobStarted> {
        let scope = spec.scope();
        let mut tx = self.begin().await?;
        let (total, upto) = count(&mut tx, spec.tenant, &scope).await?;
        // Nothing to do is done at once.
        let state = if total == 0 {
            JobState::Completed
        } else {
            JobState::Running
        };
        let job = Some((state, total, spec.rate, self.instance()));
        let row = insert_audit(&mut tx, spec.tenant, &scope, &spec.actor, 0, job, now).await?;
        let job = job_from_row(&row)?;
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
        // A deadlock with another writer rolls the whole batch back: run it again.
        retrying(|| step(self, spec, job_id, (after, upto, limit), now)).await
    }

    async fn job_end(
        &self,
        tenant: TenantId,
        job_id: i64,
        state: JobState,
        error: Option<&str>,
        now: Millis,
    ) -> StoreResult<Job> {
        let mut tx = self.begin().await?;
        let job = load_job(&mut tx, tenant, job_id, true).await?;
        let job = if job.state.is_live() {
            update_job(&mut tx, job_id, 0, Some((state, error)), now).await?
        } else {
            job
        };
        tx.commit().await?;
        Ok(job)
    }

    async fn job_cancel(&self, tenant: TenantId, job_id: i64, now: Millis) -> StoreResult<Job> {
        // Any instance may cancel: the state is stored, and the owner's next step
        // (which waits for this row lock) reads it.
        let mut tx = self.begin().await?;
        let job = load_job(&mut tx, tenant, job_id, true).await?;
        let job = if job.state == JobState::Running {
            let cancelling = Some((JobState::Cancelling, None));
            update_job(&mut tx, job_id, 0, cancelling, now).await?
        } else {
            job
        };
        tx.commit().await?;
        Ok(job)
    }

    async fn job(&self, tenant: TenantId, job_id: i64) -> StoreResult<Job> {
        let mut conn = self.pool().acquire().await?;
        load_job(&mut conn, tenant, job_id, false).await
    }

    async fn jobs(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<Job>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = $1 AND job_state IS NOT NULL \
             ORDER BY id DESC LIMIT $2"
        )))
        .bind(tenant.to_string())
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(job_from_row)
        .collect()
    }

    async fn jobs_interrupted(&self, now: Millis) -> StoreResult<u64> {
        // Other instances' jobs are live while they beat: at start, as in every
        // pass, only a job whose heartbeat stopped lost its instance.
        Ok(self.jobs_orphaned(now).await?.len() as u64)
    }

    async fn jobs_orphaned(&self, now: Millis) -> StoreResult<Vec<(TenantId, Job)>> {
        // A step holds its job's row lock and refreshes the heartbeat: this waits
        // for it and then sees the fresh heartbeat (READ COMMITTED rechecks the row).
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE audit_log SET job_state = 'interrupted', finished_at = $1 \
             WHERE job_state IN ('running', 'cancelling') \
             AND (job_heartbeat_at IS NULL OR job_heartbeat_at < $2) \
             RETURNING tenant_id, {AUDIT_COLS}"
        )))
        .bind(now)
        .bind(now.saturating_sub(JOB_STALE_MS))
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| Ok((parse_id(&r.text("tenant_id")?)?, job_from_row(r)?)))
        .collect()
    }
}
