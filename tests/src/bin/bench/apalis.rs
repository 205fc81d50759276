//! apalis 1.0 (`apalis-sqlite`, `apalis-postgres`): the W2 drain as apalis does it.
//!
//! apalis is a worker framework, not a claim/ack API: a worker polls its backend
//! for a batch (`Config::batch_size`), runs the handler on each task, and writes
//! the task's lock and result back through the backend (apalis 1.0 sends those
//! events down a channel and writes them in batches). So the W2 drain here is:
//! `consumers` workers on one queue of pre-loaded tasks, each with
//! `batch_size(batch)` and `concurrency(batch)` (at most one claim's worth in
//! flight, as a W2 consumer has), and a handler that only counts. The drain is
//! timed from the workers' start until every task has run and every worker has
//! stopped (a stopping worker writes its pending lock/ack events first), then the
//! table is checked: every task `Done`. Everything else is apalis's default
//! (`lock_tasks` and `persist_results` on, heartbeats every 30 s).
//!
//! Pre-loading (`TaskSink::push_stream`) is not timed and runs without flushes:
//! SQLite with `synchronous = OFF` (what `SqliteStorage::setup` sets), PostgreSQL
//! with `synchronous_commit = off` on the database; the drain then opens new
//! connections with our durability: SQLite WAL + `synchronous = FULL`, PostgreSQL
//! the cluster default (`synchronous_commit = on`). SQLite connections wait up to
//! 60 s for the write lock (sqlx's default is 5 s).
//!
//! apalis 1.0's SQL backends are on sqlx 0.9 as we are, so they share our driver.

use crate::drain::Drain;
use crate::report::cpu_seconds;
use crate::server::payload;
use anyhow::{Context, Result, ensure};
use apalis::prelude::{
    BoxDynError, Data, TaskSink, WorkerBuilder, WorkerBuilderExt, WorkerContext,
};
use apalis_postgres::PostgresStorage;
use apalis_sqlite::SqliteStorage;
use serde_json::Value;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::Notify;

/// The pinned version (tests/Cargo.toml).
pub(crate) const VERSION: &str = "1.0.0";

/// The queue every task goes to.
const QUEUE: &str = "w2";

/// Counts handled tasks and wakes the bench at `total`.
struct Done {
    count: AtomicUsize,
    total: usize,
    all: Notify,
}

async fn handle(_task: Value, done: Data<Arc<Done>>) -> Result<(), BoxDynError> {
    if done.count.fetch_add(1, Ordering::AcqRel) + 1 == done.total {
        done.all.notify_one();
    }
    Ok(())
}

/// Runs one worker per backend until `total` tasks were handled, then stops them
/// all and waits for them to finish (a macro: apalis's worker types are deep).
macro_rules! run_workers {
    ($backends:expr, $total:expr, $batch:expr) => {{
        let done = Arc::new(Done {
            count: AtomicUsize::new(0),
            total: $total,
            all: Notify::new(),
        });
        let cpu = cpu_seconds();
        let start = Instant::now();
        let mut contexts = Vec::new();
        let mut set = tokio::task::JoinSet::new();
        for (i, backend) in $backends.into_iter().enumerate() {
            let ctx = WorkerContext::new(&format!("w2-{i}"));
            contexts.push(ctx.clone());
            let worker = WorkerBuilder::new(ctx)
                .backend(backend)
                .data(done.clone())
                .concurrency($batch as usize)
                .build(handle);
            set.spawn(worker.run());
        }
        let finished = tokio::select! {
            _ = done.all.notified() => Ok(()),
            ended = set.join_next() => Err(anyhow::anyhow!("a worker ended early: {ended:?}")),
            _ = tokio::time::sleep(TIMEOUT) => Err(anyhow::anyhow!(
                "{} of {} tasks after {TIMEOUT:?}",
                done.count.load(Ordering::Acquire),
                $total
            )),
        };
        for ctx in &contexts {
            let _ = ctx.stop();
        }
        while let Some(ended) = set.join_next().await {
            ended?.map_err(|e| anyhow::anyhow!("apalis worker: {e}"))?;
        }
        finished?;
        anyhow::Ok(Drain {
            messages: done.count.load(Ordering::Acquire) as u64,
            seconds: start.elapsed().as_secs_f64(),
            cpu_seconds: cpu_seconds() - cpu,
        })
    }};
}

/// The longest a drain may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

fn tasks(n: usize) -> impl futures::Stream<Item = Value> + Unpin {
    futures::stream::iter((0..n).map(payload))
}

/// W2 on SQLite: a fresh file in `dir`, `events` tasks, `consumers` workers.
pub(crate) async fn sqlite_drain(
    dir: &Path,
    events: usize,
    consumers: usize,
    batch: u32,
) -> Result<Drain> {
    let file = dir.join("apalis.db");
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", file.display()))?
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // Its workers write from several connections; sqlx's 5 s wait for the
        // write lock ran out once on a loaded machine ("database is locked").
        .busy_timeout(std::time::Duration::from_secs(60));
    let config = || {
        apalis_sqlite::Config::default()
            .queue(QUEUE)
            .batch_size(batch as usize)
    };
    {
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone().synchronous(SqliteSynchronous::Off))
            .await?;
        SqliteStorage::setup(&pool)
            .await
            .context("apalis-sqlite setup")?;
        let mut sink = SqliteStorage::<Value>::new(&pool).with_config(config());
        sink.push_stream(&mut tasks(events))
            .await
            .map_err(|e| anyhow::anyhow!("pre-loading apalis-sqlite: {e}"))?;
        pool.close().await;
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(u32::try_from(consumers)? + 1)
        .connect_with(options.synchronous(SqliteSynchronous::Full))
        .await?;
    let backends: Vec<_> = (0..consumers)
        .map(|_| SqliteStorage::<Value>::new(&pool).with_config(config()))
        .collect();
    let drain = run_workers!(backends, events, batch);
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM Jobs WHERE status = 'Done'")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    let drain = drain?;
    ensure!(
        done == events as i64,
        "apalis-sqlite: {done} of {events} tasks Done"
    );
    Ok(drain)
}

/// W2 on PostgreSQL: the fresh database `url` (named `name`; `admin` sets its
/// durability for pre-loading), `events` tasks, `consumers` workers.
pub(crate) async fn postgres_drain(
    pg: &crate::pgdb::Pg,
    db: &crate::pgdb::Database,
    events: usize,
    consumers: usize,
    batch: u32,
) -> Result<Drain> {
    let config = || {
        apalis_postgres::Config::default()
            .queue(QUEUE)
            .batch_size(batch as usize)
    };
    pg.exec(&format!(
        "ALTER DATABASE {} SET synchronous_commit = off",
        db.name
    ))
    .await?;
    {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect(&db.url)
            .await?;
        PostgresStorage::setup(&pool)
            .await
            .context("apalis-postgres setup")?;
        let mut sink = PostgresStorage::<Value>::new(&pool).with_config(config());
        sink.push_stream(&mut tasks(events))
            .await
            .map_err(|e| anyhow::anyhow!("pre-loading apalis-postgres: {e}"))?;
        pool.close().await;
    }
    pg.exec(&format!(
        "ALTER DATABASE {} RESET synchronous_commit",
        db.name
    ))
    .await?;
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(consumers)? + 2)
        .connect(&db.url)
        .await?;
    let backends: Vec<_> = (0..consumers)
        .map(|_| PostgresStorage::<Value>::new(&pool).with_config(config()))
        .collect();
    let drain = run_workers!(backends, events, batch);
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM apalis.jobs WHERE status = 'Done'")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    let drain = drain?;
    ensure!(
        done == events as i64,
        "apalis-postgres: {done} of {events} tasks Done"
    );
    Ok(drain)
}
