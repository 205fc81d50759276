//! Migrations on the databases several instances share (PostgreSQL, MariaDB /
//! MySQL), and the data changes too big for one statement. SQLite runs sqlx's
//! migrator as it is: one process owns the file and no statement has a time limit.
//!
//! Terms:
//! - **The runner** (`postgres/migrate.rs`, `mysql/migrate.rs`): what `open` does
//!   before it serves. On a connection of its own with no statement time limit (the
//!   pool's 15 s would cut a long migration, and the wait for the lock, short) it
//!   takes the database's migration lock, waiting for another instance that holds it
//!   ([`LockWait`]: it logs while it waits, up to [`LOCK_DEADLINE`]), then runs
//!   sqlx's migrator with sqlx's own locking off, and releases the lock.
//! - **A deferred statement** ([`Deferred`]): the last statement of a shipped
//!   migration that changes data in bulk, too long for one statement on a big
//!   database (PostgreSQL 0009's and MySQL 0008's `DELETE FROM event_history WHERE
//!   action = 'created'`). Shipped files are append-only and sqlx compares their
//!   checksums at every start, so the file stays as it is; the runner hands sqlx the
//!   migration with that statement replaced by the registration of a step, under the
//!   file's own checksum ([`migrator`]), so `_sqlx_migrations` records the file.
//! - **A step** ([`Step`], a row of `_switchboard_steps`, a table the runner makes,
//!   like sqlx makes its own): the data change done in batches over the table's id
//!   range, each batch a short transaction that also moves the step's
//!   `done_through`. An interrupted step (a crash, a shutdown) resumes where it was
//!   at the next start; instances running it at once take turns on the step's row.
//!   `open` runs unfinished steps in the background ([`spawn_steps`]): the server
//!   serves meanwhile, so readers must be right while a step is unfinished
//!   (`engine/timeline.rs` skips `created` rows left behind).

use crate::dialect::Dialect;
use crate::engine::{Driver, database_error};
use crate::{StoreError, StoreResult};
use async_trait::async_trait;
use sqlx::SqlSafeStr;
use sqlx::migrate::Migrator;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What `open` may be told besides the URL: production values, or a test's.
#[derive(Debug, Clone)]
pub(crate) struct OpenOptions {
    /// Every pooled session's statement time limit (the runner's has none).
    pub(crate) statement_timeout: Duration,
    /// Whether `open` runs unfinished steps in the background (tests run them by
    /// hand, a batch at a time).
    pub(crate) background_steps: bool,
}

impl OpenOptions {
    /// What a serving instance opens with: `statement_timeout` on every pooled
    /// session, the steps in the background.
    pub(crate) fn serving(statement_timeout: Duration) -> Self {
        Self {
            statement_timeout,
            background_steps: true,
        }
    }
}

/// Ends a migration run on the connection of its own that holds the migration lock:
/// releases the lock (`release`, the backend's statement) and closes the connection,
/// whatever the run gave (`applied`); the result is the first failure of the three.
pub(crate) async fn release_and_close<'q, C, A>(
    mut conn: C,
    applied: StoreResult<()>,
    release: sqlx::query::Query<'q, C::Database, A>,
) -> StoreResult<()>
where
    C: sqlx::Connection,
    A: 'q + Send + sqlx::IntoArguments<C::Database>,
    for<'c> &'c mut C: sqlx::Executor<'c, Database = C::Database>,
{
    // Released with the session anyway, should this fail.
    let released = release.execute(&mut conn).await;
    let closed = conn.close().await;
    applied?;
    released?;
    closed?;
    Ok(())
}

/// How long a starting instance waits for another one's migrations before it gives
/// up. Generous: a schema migration on a big database may take minutes.
pub(crate) const LOCK_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// How often a waiting instance says so.
const LOCK_LOG_EVERY: Duration = Duration::from_secs(10);

/// The wait for the migration lock: call [`pause`](Self::pause) after each try
/// that did not get it.
pub(crate) struct LockWait {
    started: Instant,
    logged: Option<Instant>,
    /// Between tries (none where the try itself waits, as MySQL's `GET_LOCK` does).
    poll: Duration,
}

impl LockWait {
    pub(crate) fn new(poll: Duration) -> Self {
        Self {
            started: Instant::now(),
            logged: None,
            poll,
        }
    }

    /// Fails past [`LOCK_DEADLINE`]; logs at the first pause and every 10 s;
    /// waits `poll`.
    pub(crate) async fn pause(&mut self, lock: &str) -> StoreResult<()> {
        let waited = self.started.elapsed();
        if waited >= LOCK_DEADLINE {
            return Err(StoreError::Invalid(format!(
                "another instance has held the migration lock ({lock}) for over {} min; \
                 start this one when its migrations are done, or end the session that holds \
                 the lock if that instance is gone",
                LOCK_DEADLINE.as_secs() / 60
            )));
        }
        if self.logged.is_none_or(|at| at.elapsed() >= LOCK_LOG_EVERY) {
            tracing::info!(
                waited_s = waited.as_secs(),
                lock,
                "another instance is migrating the database; waiting for it"
            );
            self.logged = Some(Instant::now());
        }
        tokio::time::sleep(self.poll).await;
        Ok(())
    }
}

/// A data change done in batches after the migrations (see the module's terms).
#[derive(Debug)]
pub(crate) struct Step {
    /// Its row in `_switchboard_steps`.
    pub(crate) name: &'static str,
    /// The table whose `id` range the batches walk.
    pub(crate) table: &'static str,
    /// One batch: the rows with `$1 < id <= $2`. Running it twice must change
    /// nothing more.
    pub(crate) batch: &'static str,
}

/// PostgreSQL 0009's and MySQL 0008's last statement (SQLite's 0017 runs it whole):
/// the `created` rows, which the event row says again. Rows of ids above the table's
/// highest at the migration are not its business: nothing writes `created` rows
/// since (and readers skip any).
pub(crate) const CREATED_ROWS: Step = Step {
    name: "event_timeline_created_rows",
    table: "event_history",
    batch: "DELETE FROM event_history WHERE id > $1 AND id <= $2 AND action = 'created'",
};

/// Every step this version knows, by name.
const STEPS: &[&Step] = &[&CREATED_ROWS];

/// A shipped migration whose last statement becomes a step.
#[derive(Debug)]
pub(crate) struct Deferred {
    pub(crate) version: i64,
    /// The statement, exactly as the file ends with it.
    pub(crate) statement: &'static str,
    pub(crate) step: &'static Step,
}

/// The `DELETE` of PostgreSQL 0009 and MySQL 0008.
pub(crate) const CREATED_ROWS_DELETE: &str = "DELETE FROM event_history WHERE action = 'created';";

/// The table of steps, made by the runner before the migrations (a deferred
/// migration registers its step there).
pub(crate) fn steps_table(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::MySql => {
            "CREATE TABLE IF NOT EXISTS _switchboard_steps (\
               name VARCHAR(100) NOT NULL PRIMARY KEY, \
               done_through BIGINT NOT NULL, \
               last_id BIGINT NOT NULL, \
               finished_at BIGINT\
             ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
        }
        _ => {
            "CREATE TABLE IF NOT EXISTS _switchboard_steps (\
               name TEXT PRIMARY KEY, \
               done_through BIGINT NOT NULL, \
               last_id BIGINT NOT NULL, \
               finished_at BIGINT\
             )"
        }
    }
}

/// The statement that registers `step`, to cover the table's ids as they are now;
/// a step registered before is left as it is.
pub(crate) fn register(step: &Step, dialect: Dialect) -> String {
    let (name, table) = (step.name, step.table);
    let on_duplicate = match dialect {
        Dialect::MySql => {
            "ON DUPLICATE KEY UPDATE _switchboard_steps.name = _switchboard_steps.name"
        }
        _ => "ON CONFLICT (name) DO NOTHING",
    };
    format!(
        "INSERT INTO _switchboard_steps (name, done_through, last_id) \
         SELECT '{name}', 0, COALESCE(MAX(id), 0) FROM {table} {on_duplicate};"
    )
}

/// The migrations the runner applies: `files`' own, each [`Deferred`] one with its
/// last statement replaced by the registration of its step, under the file's
/// checksum (sqlx records it, and compares it at every later start); sqlx's locking
/// off (the runner holds the lock).
pub(crate) fn migrator(
    files: &Migrator,
    deferred: &[Deferred],
    dialect: Dialect,
) -> StoreResult<Migrator> {
    let mut migrations: Vec<_> = files.iter().cloned().collect();
    for d in deferred {
        let m = migrations
            .iter_mut()
            .find(|m| m.version == d.version && !m.migration_type.is_down_migration())
            .ok_or_else(|| StoreError::Invalid(format!("no migration {}", d.version)))?;
        let schema = m
            .sql
            .as_str()
            .trim_end()
            .strip_suffix(d.statement)
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "migration {} no longer ends with `{}`",
                    d.version, d.statement
                ))
            })?;
        let sql = format!("{schema}\n{}\n", register(d.step, dialect));
        m.sql = sqlx::AssertSqlSafe(sql).into_sql_str();
    }
    let mut migrator = Migrator::with_migrations(migrations);
    migrator.set_locking(false);
    Ok(migrator)
}

/// Batches walk this many ids at first; a batch over the statement time limit
/// halves it, down to [`MIN_SPAN`].
const SPAN: i64 = 10_000;
const MIN_SPAN: i64 = 100;

/// A step's row, as a batch reads it under its lock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepRow {
    /// Every id up to this one is done.
    pub(crate) done_through: i64,
    /// The last id the step covers.
    pub(crate) last_id: i64,
}

/// The statements of the steps, for the backends shared by several instances
/// ([`step_statements!`]).
#[async_trait]
pub(crate) trait StepStatements: Driver {
    /// The unfinished steps' names.
    async fn unfinished_steps(&self) -> StoreResult<Vec<String>>;
    /// The step's row, locked until the transaction ends; `None` once finished.
    async fn lock_step(&self, tx: &mut Self::Tx, name: &str) -> StoreResult<Option<StepRow>>;
    /// One batch of `step`: the rows with `after < id <= through`; the rows changed.
    async fn step_batch(
        &self,
        tx: &mut Self::Tx,
        step: &Step,
        after: i64,
        through: i64,
    ) -> StoreResult<u64>;
    async fn advance_step(
        &self,
        tx: &mut Self::Tx,
        name: &str,
        done_through: i64,
        finished_at: Option<i64>,
    ) -> StoreResult<()>;
}

/// Implements [`StepStatements`] for a store with `read_pool()` and a
/// `sqlx::Transaction` as its `Tx`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
macro_rules! step_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::migrate::StepStatements for $store {
            async fn unfinished_steps(&self) -> $crate::StoreResult<Vec<String>> {
                Ok(sqlx::query_scalar(
                    "SELECT name FROM _switchboard_steps WHERE finished_at IS NULL ORDER BY name",
                )
                .fetch_all(self.read_pool())
                .await?)
            }

            async fn lock_step(
                &self,
                tx: &mut Self::Tx,
                name: &str,
            ) -> $crate::StoreResult<Option<$crate::migrate::StepRow>> {
                let row: Option<(i64, i64)> = sqlx::query_as($crate::engine::stmt!(
                    "SELECT done_through, last_id FROM _switchboard_steps \
                     WHERE name = $1 AND finished_at IS NULL @FOR_UPDATE"
                ))
                .bind(name)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(row.map(|(done_through, last_id)| $crate::migrate::StepRow {
                    done_through,
                    last_id,
                }))
            }

            async fn step_batch(
                &self,
                tx: &mut Self::Tx,
                step: &$crate::migrate::Step,
                after: i64,
                through: i64,
            ) -> $crate::StoreResult<u64> {
                let sql = <Self as $crate::engine::Driver>::DIALECT.render(step.batch);
                Ok(sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(after)
                    .bind(through)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected())
            }

            async fn advance_step(
                &self,
                tx: &mut Self::Tx,
                name: &str,
                done_through: i64,
                finished_at: Option<i64>,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "UPDATE _switchboard_steps SET done_through = $1, finished_at = $2 \
                     WHERE name = $3"
                ))
                .bind(done_through)
                .bind(finished_at)
                .bind(name)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }
        }
    };
}
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) use step_statements;

/// Whether the statement ran over the session's time limit (PostgreSQL 57014,
/// MariaDB 1969, MySQL 3024).
fn over_time_limit(e: &StoreError) -> bool {
    database_error(e).is_some_and(|db| {
        db.code().as_deref() == Some("57014")
            || crate::error::mysql_number(db).is_some_and(|n| matches!(n, 1969 | 3024))
    })
}

/// How a run of the steps ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    /// Every step is finished.
    Finished,
    /// Stopped (shutdown, or the batches allowed were spent) with work left.
    Stopped,
}

/// What one batch did.
struct Batch {
    through: i64,
    last_id: i64,
    changed: u64,
}

/// One batch of `step` (`span` ids), in a transaction of its own, retried as every
/// write is; `None` when the step is finished (perhaps by another instance).
async fn batch<D: StepStatements>(d: &D, step: &Step, span: i64) -> StoreResult<Option<Batch>> {
    let mut tx = d.begin_write().await?;
    let Some(row) = d.lock_step(&mut tx, step.name).await? else {
        d.commit(tx, &[]).await?;
        return Ok(None);
    };
    let through = row.done_through.saturating_add(span).min(row.last_id);
    let changed = if through > row.done_through {
        d.step_batch(&mut tx, step, row.done_through, through)
            .await?
    } else {
        0
    };
    // When it finished, for the operator reading the table: bookkeeping, not logic.
    let finished = (through >= row.last_id).then(|| {
        use crate::clock::Clock;
        crate::clock::SystemClock.now_ms()
    });
    d.advance_step(&mut tx, step.name, through, finished)
        .await?;
    d.commit(tx, &[]).await?;
    Ok(Some(Batch {
        through,
        last_id: row.last_id,
        changed,
    }))
}

/// Runs the unfinished steps a batch at a time until they are done, `stop` is
/// cancelled, or `batches` (when given) have run.
pub(crate) async fn run_steps<D: StepStatements>(
    d: &D,
    stop: &CancellationToken,
    mut batches: Option<u64>,
) -> StoreResult<Ran> {
    for name in d.unfinished_steps().await? {
        let Some(step) = STEPS.iter().find(|s| s.name == name) else {
            tracing::warn!(
                step = name,
                "a step this version does not know; left as it is"
            );
            continue;
        };
        let (mut span, mut changed, mut logged) = (SPAN, 0u64, Instant::now());
        tracing::info!(step = step.name, "running a batched migration step");
        loop {
            if stop.is_cancelled() || batches == Some(0) {
                return Ok(Ran::Stopped);
            }
            batches = batches.map(|n| n - 1);
            match d.retrying(|| batch(d, step, span)).await {
                Ok(Some(b)) if b.through >= b.last_id => {
                    changed += b.changed;
                    tracing::info!(step = step.name, rows = changed, "batched step finished");
                    break;
                }
                Ok(Some(b)) => {
                    changed += b.changed;
                    if logged.elapsed() >= LOCK_LOG_EVERY {
                        tracing::info!(
                            step = step.name,
                            done_through = b.through,
                            last_id = b.last_id,
                            rows = changed,
                            "batched step running"
                        );
                        logged = Instant::now();
                    }
                }
                Ok(None) => break,
                Err(e) if over_time_limit(&e) && span > MIN_SPAN => {
                    span = (span / 2).max(MIN_SPAN);
                    tracing::info!(
                        step = step.name,
                        span,
                        "a batch ran out of time; smaller batches"
                    );
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(Ran::Finished)
}

/// Runs the unfinished steps in the background until they are done or `stop` is
/// cancelled; after a failure (the database went away) it tries again 10 s later.
pub(crate) fn spawn_steps<D: StepStatements + Clone>(d: D, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            match run_steps(&d, &stop, None).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "a batched migration step failed; trying again in 10 s");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_secs(10)) => {}
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deferred statement is the files' last, byte for byte, and the migration
    /// the runner applies keeps the file's checksum.
    #[test]
    fn the_deferred_statements_end_their_files() {
        for (files, version, dialect) in [
            (
                sqlx::migrate!("../../migrations/postgres"),
                9,
                Dialect::Postgres,
            ),
            (sqlx::migrate!("../../migrations/mysql"), 8, Dialect::MySql),
        ] {
            let deferred = [Deferred {
                version,
                statement: CREATED_ROWS_DELETE,
                step: &CREATED_ROWS,
            }];
            let ours = migrator(&files, &deferred, dialect).expect("split");
            let (file, run) = (
                files.iter().find(|m| m.version == version).expect("file"),
                ours.iter().find(|m| m.version == version).expect("ours"),
            );
            assert_eq!(file.checksum, run.checksum, "recorded as the file");
            assert!(file.sql.as_str().contains(CREATED_ROWS_DELETE));
            assert!(!run.sql.as_str().contains("DELETE"), "{}", run.sql.as_str());
            assert!(run.sql.as_str().contains(CREATED_ROWS.name));
            assert!(!ours.locking, "the runner holds the lock");
            assert_eq!(files.iter().count(), ours.iter().count());
        }
    }
}

/// What the upgrade tests of both backends share (`postgres/tests.rs`,
/// `mysql/tests.rs`).
#[cfg(test)]
pub(crate) mod fixture;
