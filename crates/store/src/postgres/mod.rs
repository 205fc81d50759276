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
//!   backoff, a few times (`Driver::retrying`), and counted
//!   (`Store::transaction_retries`); every pooled session has a statement timeout.
//! - Migrations run on a connection of their own, without that timeout, under
//!   sqlx's advisory lock, which a second instance waits for ([`migrate`]).
//! - Wake-ups are `pg_notify` calls inside the committing transaction, so they are
//!   delivered to every instance after (and only after) the commit (I1).

mod bulk;
mod health;
mod inbox;
mod leases;
mod maintenance;
mod migrate;
#[cfg(test)]
mod tests;
mod timeline;
mod wakes;

use super::*;
use crate::hooks::StoreHooks;
use crate::migrate::OpenOptions;
use crate::retries::Retries;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use std::str::FromStr;
use std::time::Duration;

pub use wakes::WAKE_CHANNEL;

/// Every statement ends within this, or fails (and the request gets a 503); not the
/// migrations' (their runner's session has no limit).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(15);
/// A transaction left idle (a crashed request) is ended by the server.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "60s";
/// How long a request waits for a pooled connection before it answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct PgDriver {
    pool: PgPool,
    hooks: StoreHooks,
    /// Where wake-ups go (`Store::deliver_wakes_to`).
    wakes_out: crate::WakeOut,
    /// This process; wake-ups it published itself are not delivered twice.
    instance: String,
    /// LISTENing since `open`, so no wake-up committed after the server started is
    /// missed; `listen` takes it.
    listener: std::sync::Arc<std::sync::Mutex<Option<sqlx::postgres::PgListener>>>,
    /// Transactions run again, by SQLSTATE (`Store::transaction_retries`).
    retries: std::sync::Arc<Retries>,
    /// Stops the batched migration steps running in the background (at `close`).
    steps: tokio_util::sync::CancellationToken,
}

/// The PostgreSQL store: the engine over [`PgDriver`].
pub type PgStore = crate::Engine<PgDriver>;

impl PgStore {
    /// Connects to `url` and applies migrations. Several instances may open the same
    /// database: the migrations run under an advisory lock, which a second instance
    /// waits for ([`migrate`]); then the batched steps they left run in the
    /// background.
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
        PgDriver::connect(url, max_connections, hooks, options)
            .await
            .map(crate::Engine)
    }
}

impl PgDriver {
    /// Connects and migrates: [`PgStore::open`].
    async fn connect(
        url: &str,
        max_connections: u32,
        hooks: StoreHooks,
        options: OpenOptions,
    ) -> StoreResult<Self> {
        let base = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL: {e}")))?
            .application_name("switchboard");
        migrate::migrate(&base).await?;
        let statement_timeout = format!("{}ms", options.statement_timeout.as_millis());
        let opts = base.options([
            ("statement_timeout", statement_timeout.as_str()),
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
        let listener = wakes::connect(&pool).await?;
        let store = Self {
            pool,
            hooks,
            wakes_out: crate::WakeOut::default(),
            instance: uuid::Uuid::now_v7().to_string(),
            listener: std::sync::Arc::new(std::sync::Mutex::new(Some(listener))),
            retries: std::sync::Arc::new(Retries::new("postgres")),
            steps: tokio_util::sync::CancellationToken::new(),
        };
        if options.background_steps {
            crate::migrate::spawn_steps(store.clone(), store.steps.clone());
        }
        Ok(store)
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
        self.wakes_out.wake(wakes);
        Ok(())
    }

    /// Where this store's wake-ups go.
    pub(crate) fn wakes_out(&self) -> &crate::WakeOut {
        &self.wakes_out
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

/// The SQLSTATE of an error a retry of the whole transaction may cure: a
/// serialization failure (40001) or a deadlock (40P01).
fn retryable(e: &StoreError) -> Option<&'static str> {
    match crate::engine::database_error(e)?.code().as_deref()? {
        "40001" => Some("40001"),
        "40P01" => Some("40P01"),
        _ => None,
    }
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
        // A batch in flight ends and gives its connection back; no other starts.
        self.steps.cancel();
        // The first listener holds a pooled connection; close would wait for it.
        drop(self.take_listener());
        self.pool.close().await;
    }

    fn deliver_wakes_to(&self, sink: std::sync::Arc<dyn crate::WakeSink>) {
        self.wakes_out.set(sink);
    }

    async fn listen(&self, stop: tokio_util::sync::CancellationToken) {
        wakes::listen(self, stop).await;
    }

    async fn health(&self) -> StoreResult<Option<switchboard_proto::QueueTableHealth>> {
        health::table_health(self).await.map(Some)
    }

    fn transaction_retries(&self) -> Vec<crate::RetryCount> {
        self.retries.counts()
    }
}

#[async_trait]
impl crate::engine::Driver for PgDriver {
    type Tx = sqlx::Transaction<'static, Postgres>;
    const DIALECT: crate::dialect::Dialect = crate::dialect::Dialect::Postgres;

    /// Several instances share the database: each job's owner is the instance
    /// running it, live while its heartbeat is fresh.
    fn job_owner(&self) -> Option<&str> {
        Some(self.instance())
    }

    fn hooks(&self) -> &StoreHooks {
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
        PgDriver::commit(self, tx, wakes).await
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

crate::statements::shared_statements!(PgDriver);
crate::migrate::step_statements!(PgDriver);
