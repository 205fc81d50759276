//! The MariaDB / MySQL backend: several server instances on one database, as with
//! PostgreSQL. MariaDB 10.11 is tested; MariaDB 10.6+ and MySQL 8.0.1+ are accepted
//! (they have `SKIP LOCKED`).
//!
//! Transactions run at READ COMMITTED on InnoDB, and row locks give what SQLite gets
//! from its single writer:
//! - **I2**, per-agent order: a send takes the next sequence number with
//!   `UPDATE agents SET head_seq = head_seq + 1` (then reads it back: MySQL has no
//!   `UPDATE … RETURNING`), which locks the agent's row until the commit, so a second
//!   sender to the same agent waits for the first commit and numbers after it.
//! - **Claims** `SELECT … FOR UPDATE SKIP LOCKED` on an index that leads with the
//!   recipient, then `UPDATE` the rows they got, in the same transaction.
//! - Deadlocks and lock wait timeouts (1213, 1205) are retried with jittered backoff,
//!   a few times (the engine's loop), and counted (`Store::transaction_retries`);
//!   every pooled session has a lock wait timeout and (MariaDB) a statement time
//!   limit.
//! - Migrations run on a connection of their own, without that limit, under a named
//!   lock that a second instance waits for ([`migrate`]).
//! - Wake-ups for other instances are rows of the `wakes` table, inserted in the
//!   committing transaction and polled by every instance ([`wakes`]).
//! - At open the server must have `SKIP LOCKED`, and write its binary log (if on) in
//!   ROW format ([`server`]).

mod leases;
mod migrate;
pub mod server;
#[cfg(test)]
mod tests;
mod wakes;

use crate::hooks::StoreHooks;
use crate::migrate::OpenOptions;
use crate::retries::Retries;
use crate::{Store, StoreError, StoreResult, Wake};
use async_trait::async_trait;
use server::Flavor;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySql, MySqlConnection, MySqlPool};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A statement waits at most this long for a row lock (1205, then retried).
const LOCK_WAIT_TIMEOUT_SECONDS: u32 = 5;
/// Every statement ends within this, or fails (and the request gets a 503). MariaDB
/// limits every statement; MySQL only reads (`max_execution_time`). Not the
/// migrations' (their runner's session has no limit).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(15);
/// A transaction left idle (a crashed request) is ended by the server (MariaDB).
const IDLE_IN_TRANSACTION_SECONDS: u32 = 60;
/// How long a request waits for a pooled connection before it answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// `ANSI_QUOTES`: `"key"` is a column, as in the other dialects; strict, so a value
/// that does not fit is an error, never truncated.
const SQL_MODE: &str = "ANSI_QUOTES,PIPES_AS_CONCAT,STRICT_ALL_TABLES,NO_ZERO_DATE,\
                        NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION";

#[derive(Clone)]
pub struct MySqlDriver {
    pool: MySqlPool,
    hooks: StoreHooks,
    /// Where wake-ups go (`Store::deliver_wakes_to`).
    wakes_out: crate::WakeOut,
    /// This process; wake-ups it published itself are not delivered twice.
    instance: String,
    /// The wake-up table as it was at `open`, so nothing committed after the server
    /// started is missed; `listen` takes it.
    watch: Arc<Mutex<Option<wakes::Watch>>>,
    /// Transactions run again, by error number (`Store::transaction_retries`).
    retries: Arc<Retries>,
    /// Stops the batched migration steps running in the background (at `close`).
    steps: tokio_util::sync::CancellationToken,
}

/// The MariaDB / MySQL store: the engine over [`MySqlDriver`].
pub type MySqlStore = crate::Engine<MySqlDriver>;

impl MySqlStore {
    /// Connects to `url` (`mysql://user:password@host:3306/database`), checks the
    /// server and applies migrations. Several instances may open the same database
    /// at once: migrations run under a named lock, which a second instance waits
    /// for ([`migrate`]); then the batched steps they left run in the background.
    pub async fn open(url: &str, max_connections: u32, hooks: StoreHooks) -> StoreResult<Self> {
        let options = OpenOptions::serving(STATEMENT_TIMEOUT);
        Self::open_with(url, max_connections, hooks, options).await
    }

    /// [`open`](Self::open) with other limits (tests).
    pub(crate) async fn open_with(
        url: &str,
        max_connections: u32,
        hooks: StoreHooks,
        options: OpenOptions,
    ) -> StoreResult<Self> {
        MySqlDriver::connect(url, max_connections, hooks, options)
            .await
            .map(crate::Engine)
    }
}

impl MySqlDriver {
    /// Connects and migrates: [`MySqlStore::open`].
    async fn connect(
        url: &str,
        max_connections: u32,
        hooks: StoreHooks,
        options: OpenOptions,
    ) -> StoreResult<Self> {
        let opts = MySqlConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL: {e}")))?
            // The session is set in full by `session` below.
            .pipes_as_concat(false)
            .no_engine_substitution(false)
            .timezone(None);
        let flavor = {
            let mut conn = MySqlConnection::connect_with(&opts).await?;
            let server = server::check_server(&mut conn).await?;
            server::check_binlog(&mut conn).await?;
            conn.close().await?;
            server.flavor
        };
        migrate::migrate(&opts, flavor).await?;
        let limits = Limits {
            statement: options.statement_timeout,
            ..Limits::POOL
        };
        let pool = MySqlPoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A connection that died with a database restart is found and replaced
            // before a request gets it.
            .test_before_acquire(true)
            .after_connect(move |conn, _| {
                Box::pin(async move { session(conn, flavor, limits).await })
            })
            .connect_with(opts)
            .await?;
        let watch = {
            let mut conn = pool.acquire().await?;
            wakes::Watch::start(&mut conn).await?
        };
        let store = Self {
            pool,
            hooks,
            wakes_out: crate::WakeOut::default(),
            instance: uuid::Uuid::now_v7().to_string(),
            watch: Arc::new(Mutex::new(Some(watch))),
            retries: Arc::new(Retries::new("mysql")),
            steps: tokio_util::sync::CancellationToken::new(),
        };
        if options.background_steps {
            crate::migrate::spawn_steps(store.clone(), store.steps.clone());
        }
        Ok(store)
    }

    pub(crate) fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Where the shared statements read outside a write transaction.
    pub(crate) fn read_pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Where a shared statement that is a transaction of its own runs (autocommit).
    pub(crate) fn write_pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Where this store's wake-ups go.
    pub(crate) fn wakes_out(&self) -> &crate::WakeOut {
        &self.wakes_out
    }

    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }

    fn take_watch(&self) -> Option<wakes::Watch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A session's time limits; zero is none.
#[derive(Debug, Clone, Copy)]
struct Limits {
    /// MariaDB `max_statement_time` (MySQL `max_execution_time`, reads only).
    statement: Duration,
    /// MariaDB `idle_transaction_timeout`.
    idle_transaction_seconds: u32,
    /// `innodb_lock_wait_timeout` (at least 1).
    lock_wait_seconds: u32,
}

impl Limits {
    /// The pool's sessions (the statement limit is `OpenOptions`').
    const POOL: Self = Self {
        statement: STATEMENT_TIMEOUT,
        idle_transaction_seconds: IDLE_IN_TRANSACTION_SECONDS,
        lock_wait_seconds: LOCK_WAIT_TIMEOUT_SECONDS,
    };
    /// The migration runner's: no statement or idle limit; a row lock held by a
    /// running instance of the previous version is waited for a while.
    const MIGRATION: Self = Self {
        statement: Duration::ZERO,
        idle_transaction_seconds: 0,
        lock_wait_seconds: 60,
    };
}

/// Every session: READ COMMITTED, the SQL mode the shared statements are written
/// for, UTC, and `limits` (the pool's: short lock waits and a statement time limit).
async fn session(conn: &mut MySqlConnection, flavor: Flavor, limits: Limits) -> sqlx::Result<()> {
    (&mut *conn)
        .execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    let time = match flavor {
        Flavor::MariaDb => format!(
            "max_statement_time = {:.3}, idle_transaction_timeout = {}",
            limits.statement.as_secs_f64(),
            limits.idle_transaction_seconds
        ),
        Flavor::MySql => format!("max_execution_time = {}", limits.statement.as_millis()),
    };
    (&mut *conn)
        .execute(sqlx::AssertSqlSafe(format!(
            "SET SESSION sql_mode = '{SQL_MODE}', time_zone = '+00:00', \
         innodb_lock_wait_timeout = {}, {time}",
            limits.lock_wait_seconds
        )))
        .await?;
    Ok(())
}

/// The error number (as text) of an error a retry of the whole transaction may
/// cure: a deadlock (1213, which rolled the transaction back) or a lock wait
/// timeout (1205; the attempt's transaction is rolled back when it is dropped).
fn retryable(e: &StoreError) -> Option<&'static str> {
    let db =
        crate::engine::database_error(e)?.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()?;
    match db.number() {
        1213 => Some("1213"),
        1205 => Some("1205"),
        _ => None,
    }
}

#[async_trait]
impl Store for MySqlStore {
    fn backend(&self) -> &'static str {
        "mysql"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        // A batch in flight ends and gives its connection back; no other starts.
        self.steps.cancel();
        self.pool.close().await;
    }

    fn transaction_retries(&self) -> Vec<crate::RetryCount> {
        self.retries.counts()
    }

    fn deliver_wakes_to(&self, sink: std::sync::Arc<dyn crate::WakeSink>) {
        self.wakes_out.set(sink);
    }

    async fn listen(&self, stop: tokio_util::sync::CancellationToken) {
        wakes::listen(self, stop).await;
    }
}

#[async_trait]
impl crate::engine::Driver for MySqlDriver {
    type Tx = sqlx::Transaction<'static, MySql>;
    const DIALECT: crate::dialect::Dialect = crate::dialect::Dialect::MySql;

    fn job_owner(&self) -> Option<&str> {
        Some(&self.instance)
    }

    fn hooks(&self) -> &StoreHooks {
        &self.hooks
    }

    async fn begin_write(&self) -> StoreResult<Self::Tx> {
        Ok(self.pool.begin().await?)
    }

    /// A read-only transaction on one snapshot (REPEATABLE READ for it alone).
    async fn begin_read(&self) -> StoreResult<Self::Tx> {
        Ok(self
            .pool
            .begin_with(crate::dialect::MYSQL_READ_SNAPSHOT)
            .await?)
    }

    /// Inserts the wake-ups last, then commits: other instances see them with the
    /// commit, and never if it fails.
    async fn commit(&self, mut tx: Self::Tx, wakes: &[Wake]) -> StoreResult<()> {
        wakes::publish(&mut tx, &self.instance, wakes).await?;
        tx.commit().await?;
        self.wakes_out.wake(wakes);
        Ok(())
    }

    async fn retrying<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = StoreResult<T>> + Send,
    {
        crate::engine::retry_transaction(attempt, retryable, &self.retries).await
    }
}

crate::statements::shared_statements!(MySqlDriver);
crate::migrate::step_statements!(MySqlDriver);

// The other areas' portable shapes.
impl crate::engine::ops::bulk::BulkDriver for MySqlDriver {}
#[async_trait]
impl crate::engine::inbox_transactions::InboxDriver for MySqlDriver {
    /// The agent's row, `FOR UPDATE`: the claim writes `last_seen_at` there before it
    /// commits anyway, so this takes the same lock earlier (sends, which lock the row
    /// to number their event, take it in the same order).
    async fn order_claims(
        &self,
        tx: &mut Self::Tx,
        agent: switchboard_proto::AgentId,
    ) -> StoreResult<()> {
        sqlx::query("SELECT id FROM agents WHERE id = ? FOR UPDATE")
            .bind(agent)
            .fetch_optional(&mut **tx)
            .await?;
        Ok(())
    }
}
impl crate::engine::maintenance::MaintenanceDriver for MySqlDriver {}
