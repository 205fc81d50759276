//! The store engine: each piece of store logic written once, over a small driver
//! per backend (River's `riverdriver` shape). A driver holds the pools, the SQL of
//! each statement, row mapping and what a backend alone has (PostgreSQL's
//! `FOR UPDATE` / `FOR SHARE` and its NOTIFY at commit, SQLite's single writer); the
//! engine holds the order of the steps, the checks between them and the rules.
//!
//! Each area has a `…Statements` trait (the statements every backend writes alike,
//! implemented once in `statements/`), where needed a `…Driver` trait (what a
//! backend does in its own shape, with a portable default), and its logic as
//! functions generic over them, behind the one `impl` of the area's store trait
//! for [`Engine`].

use crate::dialect::Dialect;
use crate::{StoreError, StoreResult, Wake};
use async_trait::async_trait;
use std::future::Future;
use std::time::Duration;

mod area;
pub(crate) mod audit;
pub(crate) mod callbacks;
pub(crate) mod deletion;
pub(crate) mod directory;
pub(crate) mod directory_store;
pub(crate) mod events;
pub(crate) mod idempotency;
pub(crate) mod identity;
pub(crate) mod inbox;
pub(crate) mod inbox_transactions;
pub(crate) mod instances;
pub(crate) mod jobs;
pub(crate) mod lease_audit;
pub(crate) mod lease_store;
pub(crate) mod leases;
pub(crate) mod lineage;
pub(crate) mod maintenance;
pub(crate) mod memories;
pub(crate) mod ops;
pub(crate) mod records;
pub(crate) mod request_keys;
pub(crate) mod send;
pub(crate) mod signin;
#[cfg(test)]
pub(crate) mod suite;
pub(crate) mod timeline;
pub(crate) mod trim;

/// The store: the engine's logic over one driver, and the one implementation of
/// every area trait of the public [`Store`](crate::Store) (`engine/<area>.rs`, each
/// impl running the area's functions, generic over the driver's statements).
/// A backend's store is `Engine<ItsDriver>` (`SqliteStore`, `PgStore`,
/// `MySqlStore`); what only the backend knows (`backend`, `ping`, `listen`, …) is
/// its own `impl Store`. It derefs to the driver, for the driver suite and the
/// drivers' tests.
#[derive(Clone)]
pub struct Engine<D>(pub(crate) D);

impl<D> std::ops::Deref for Engine<D> {
    type Target = D;

    fn deref(&self) -> &D {
        &self.0
    }
}

/// [`sql!`] in the dialect of the driver whose statements are being implemented
/// (`Self`, in a `…Statements` impl of `statements/`): `stmt!("SELECT … $1")`.
macro_rules! stmt {
    ($($template:tt)+) => {
        $crate::dialect::sql!(<Self as $crate::engine::Driver>::DIALECT, $($template)+)
    };
}
pub(crate) use stmt;

/// What every driver has: write transactions and read snapshots.
#[async_trait]
pub(crate) trait Driver: Send + Sync + 'static {
    /// One write transaction. SQLite: on the single writer (`BEGIN IMMEDIATE`);
    /// PostgreSQL: READ COMMITTED, rows locked by the statements that need it.
    type Tx: Send;
    /// The SQL this backend speaks.
    const DIALECT: Dialect;

    async fn begin_write(&self) -> StoreResult<Self::Tx>;

    /// One read-only transaction that sees one snapshot throughout (SQLite: a WAL
    /// read transaction on the read pool; PostgreSQL: REPEATABLE READ, READ ONLY;
    /// MySQL: REPEATABLE READ WITH CONSISTENT SNAPSHOT for this transaction alone).
    /// It ends with [`commit`](Self::commit), with no wake-ups.
    async fn begin_read(&self) -> StoreResult<Self::Tx>;

    /// The instance this store runs in, recorded as the owner of the jobs it starts,
    /// where several instances share the database; `None` where one process owns it
    /// (SQLite), so that every live job is its process's.
    fn job_owner(&self) -> Option<&str>;

    /// The test seams (no-ops in production).
    fn hooks(&self) -> &crate::hooks::StoreHooks;

    /// Commits. `wakes` are for other instances: PostgreSQL queues them as
    /// notifications inside the transaction, delivered only by its commit (I1); a
    /// backend of one process ignores them (its handler wakes its own hub after this
    /// returns).
    async fn commit(&self, tx: Self::Tx, wakes: &[Wake]) -> StoreResult<()>;

    /// Commits work whose durability the caller need not wait for: an idempotency
    /// key recorded in flight on a database one process owns (SQLite: it joins the
    /// writer's next group commit, usually the one of the request's own business
    /// change; a key in flight at start is forgotten anyway). Elsewhere a commit.
    async fn commit_later(&self, tx: Self::Tx) -> StoreResult<()> {
        self.commit(tx, &[]).await
    }

    /// Runs `attempt`, one whole transaction, again while the backend says a retry
    /// may cure its failure (PostgreSQL: serialization failures and deadlocks;
    /// MySQL: deadlocks and lock wait timeouts), in [`retry_transaction`]'s loop.
    async fn retrying<T, F, Fut>(&self, mut attempt: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: Future<Output = StoreResult<T>> + Send,
    {
        attempt().await
    }
}

/// The database's own error behind `e`, if any. A failure that a retry may cure is
/// a transient one (`Unavailable`, a 503 once the retries are spent), so both
/// variants are looked into.
pub(crate) fn database_error(
    e: &StoreError,
) -> Option<&(dyn sqlx::error::DatabaseError + 'static)> {
    match e {
        StoreError::Database(sqlx::Error::Database(db))
        | StoreError::Unavailable(sqlx::Error::Database(db)) => Some(db.as_ref()),
        _ => None,
    }
}

/// Runs `attempt` (one whole transaction) again while `retryable` says a retry may
/// cure its failure, at most 5 times, waiting 5..=100 ms with full jitter in
/// between. The loop of every driver's [`Driver::retrying`]; each driver says which
/// failures, by the database's code it answers for them (PostgreSQL: 40001 /
/// 40P01; MySQL: 1213 / 1205), and each retry is counted under that code in
/// `retries` (the store's, read by `Store::transaction_retries`).
pub(crate) async fn retry_transaction<T, F, Fut>(
    attempt: F,
    retryable: fn(&StoreError) -> Option<&'static str>,
    retries: &crate::retries::Retries,
) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    use backon::{ExponentialBuilder, Retryable};
    attempt
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(5))
                .with_max_delay(Duration::from_millis(100))
                .with_max_times(5)
                .with_jitter(),
        )
        .when(|e| retryable(e).is_some())
        // Called once per retry, right before its wait: not for the last failure.
        .notify(|e, wait| {
            if let Some(code) = retryable(e) {
                retries.record(code);
            }
            tracing::debug!(error = %e, ?wait, "transaction retried");
        })
        .await
}
