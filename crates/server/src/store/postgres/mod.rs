//! The PostgreSQL backend: several server instances on one database.
//!
//! Transactions run at READ COMMITTED. What SQLite gets from its single writer, this
//! backend gets from row locks:
//! - **I2**, per-agent order: a send locks the agent's row to take the next
//!   sequence number (`UPDATE agents SET head_seq = head_seq + 1 … RETURNING`), so a
//!   second sender to the same agent waits for the first commit and numbers after it.
//! - **Claims** lock the rows they hand out with `FOR UPDATE SKIP LOCKED`, so
//!   claimers of different agents on any instance never wait for, nor take, each
//!   other's rows; claims of one agent take turns under a transaction-level advisory
//!   lock (`InboxDriver::order_claims`), so none skips an earlier event that an
//!   unfinished (or dead) claim still holds.
//! - Serialization failures and deadlocks (40001, 40P01) are retried with jittered
//!   backoff, a few times ([`retrying`]); every session has a statement timeout.
//! - Wake-ups are `pg_notify` calls inside the committing transaction, so they are
//!   delivered to every instance after (and only after) the commit (I1).

mod bulk;
mod directory;
mod health;
mod inbox;
mod leases;
mod maintenance;
mod timeline;
mod wakes;

use super::*;
use crate::hooks::Hooks;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

pub use wakes::WAKE_CHANNEL;

/// Every statement ends within this, or fails (and the request gets a 503).
const STATEMENT_TIMEOUT: &str = "15s";
/// A transaction left idle (a crashed request) is ended by the server.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "60s";
/// How long a request waits for a pooled connection before it answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    hooks: Hooks,
    /// This process; wake-ups it published itself are not delivered twice.
    instance: String,
    /// LISTENing since `open`, so no wake-up committed after the server started is
    /// missed; `listen` takes it.
    listener: std::sync::Arc<std::sync::Mutex<Option<sqlx::postgres::PgListener>>>,
}

impl PgStore {
    /// Connects to `url` and applies migrations. Several instances may open the same
    /// database: the migrator takes an advisory lock.
    pub async fn open(url: &str, max_connections: u32, hooks: Hooks) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL: {e}")))?
            .application_name("switchboard")
            .options([
                ("statement_timeout", STATEMENT_TIMEOUT),
                (
                    "idle_in_transaction_session_timeout",
                    IDLE_IN_TRANSACTION_TIMEOUT,
                ),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A connection that died with a database restart is found and replaced
            // before a request gets it.
            .test_before_acquire(true)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("../../migrations/postgres")
            .run(&pool)
            .await?;
        let listener = wakes::connect(&pool).await?;
        Ok(Self {
            pool,
            hooks,
            instance: uuid::Uuid::now_v7().to_string(),
            listener: std::sync::Arc::new(std::sync::Mutex::new(Some(listener))),
        })
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Where the shared statements read outside a write transaction.
    pub(crate) fn read_pool(&self) -> &PgPool {
        &self.pool
    }

    /// Where a shared statement writes alone.
    pub(crate) fn write_pool(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) async fn begin(&self) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// Publishes `wakes` to the other instances, then commits: the notifications are
    /// delivered at commit, and only if it succeeds.
    pub(crate) async fn commit(
        &self,
        mut tx: sqlx::Transaction<'static, Postgres>,
        wakes: &[Wake],
    ) -> StoreResult<()> {
        wakes::publish(&mut tx, &self.instance, wakes).await?;
        tx.commit().await?;
        Ok(())
    }

    fn take_listener(&self) -> Option<sqlx::postgres::PgListener> {
        self.listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }
}

/// True for errors a retry of the whole transaction may cure: a serialization
/// failure (40001) or a deadlock (40P01).
fn retryable(e: &StoreError) -> bool {
    crate::store::engine::database_error(e)
        .is_some_and(|db| matches!(db.code().as_deref(), Some("40001" | "40P01")))
}

/// Runs `attempt` (one whole transaction) again on 40001 / 40P01 (the engine's
/// loop: at most 5 times, with jittered backoff).
pub(crate) async fn retrying<T, F, Fut>(attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    crate::store::engine::retry_transaction(attempt, retryable).await
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        // The first listener holds a pooled connection; close would wait for it.
        drop(self.take_listener());
        self.pool.close().await;
    }

    async fn listen(
        &self,
        remote: crate::store::RemoteWakes,
        stop: tokio_util::sync::CancellationToken,
    ) {
        wakes::listen(self, remote, stop).await;
    }

    async fn health(&self) -> StoreResult<Option<switchboard_proto::QueueTableHealth>> {
        health::table_health(self).await.map(Some)
    }
}

#[async_trait]
impl crate::store::engine::Driver for PgStore {
    type Tx = sqlx::Transaction<'static, Postgres>;
    const DIALECT: crate::store::dialect::Dialect = crate::store::dialect::Dialect::Postgres;

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    async fn begin_write(&self) -> StoreResult<Self::Tx> {
        self.begin().await
    }

    /// One snapshot for the whole read: REPEATABLE READ, READ ONLY.
    async fn begin_read(&self) -> StoreResult<Self::Tx> {
        Ok(self
            .pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await?)
    }

    async fn commit(&self, tx: Self::Tx, wakes: &[Wake]) -> StoreResult<()> {
        PgStore::commit(self, tx, wakes).await
    }

    async fn retrying<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = StoreResult<T>> + Send,
    {
        retrying(attempt).await
    }
}

crate::store::statements::shared_statements!(PgStore);

impl crate::store::engine::events::EventDriver for PgStore {}

/// Other instances share the database: their in-flight keys are live.
impl crate::store::engine::idempotency::IdemDriver for PgStore {}
