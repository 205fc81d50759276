//! The SQLite backend: the embedded default.
//!
//! Writes are serialized through a pool of exactly one connection and start with
//! `BEGIN IMMEDIATE`, so per-agent sequence numbers are allocated in commit order
//! (I2) and no writer ever sees `SQLITE_BUSY` from another writer of this process.
//! Reads use a separate pool; in WAL mode they run concurrently with the writer and
//! each read transaction sees one consistent snapshot.

mod group;
mod leases;

use super::*;
use crate::hooks::StoreHooks;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::str::FromStr;
use std::time::Duration;

#[derive(Clone)]
pub struct SqliteDriver {
    /// The single writer connection. One connection, so writes never contend.
    write: SqlitePool,
    /// Write transactions on `write`, committed in groups (`group.rs`).
    group: std::sync::Arc<group::Group>,
    /// Readers (WAL snapshots). The same pool as `write` for an in-memory database.
    read: SqlitePool,
    hooks: StoreHooks,
    /// Where wake-ups go (`Store::deliver_wakes_to`).
    wakes_out: crate::WakeOut,
    /// Set when a write failed because the file could not be written (a read-only
    /// or failing file system, an immutable file): SQLite's connection may stay
    /// read-only after that, so the writer is replaced before its next use.
    writer_suspect: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// An exclusive lock on `<file>.lock`, held while the store lives: one process
    /// owns a database file, which is what makes the single writer safe.
    _owner: Option<std::sync::Arc<std::fs::File>>,
}

/// The SQLite store: the engine over [`SqliteDriver`].
pub type SqliteStore = crate::Engine<SqliteDriver>;

impl SqliteStore {
    /// Opens the store: [`SqliteDriver::connect`].
    pub async fn open(url: &str, synchronous: &str, hooks: StoreHooks) -> StoreResult<Self> {
        SqliteDriver::connect(url, synchronous, hooks)
            .await
            .map(crate::Engine)
    }
}

impl SqliteDriver {
    /// Opens (creating if missing) the database at `url` and applies migrations.
    pub(crate) async fn connect(
        url: &str,
        synchronous: &str,
        hooks: StoreHooks,
    ) -> StoreResult<Self> {
        let sync = match synchronous.to_ascii_lowercase().as_str() {
            "full" => SqliteSynchronous::Full,
            "normal" => SqliteSynchronous::Normal,
            "extra" => SqliteSynchronous::Extra,
            "off" => SqliteSynchronous::Off,
            other => {
                return Err(StoreError::Invalid(format!(
                    "sqlite synchronous must be full, normal, extra or off, not {other:?}"
                )));
            }
        };
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let owner = if memory {
            None
        } else {
            Some(std::sync::Arc::new(lock_owner(url)?))
        };
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL {url:?}: {e}")))?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .synchronous(sync);
        let opts = if memory {
            opts
        } else {
            opts.journal_mode(SqliteJournalMode::Wal)
        };
        let writer_suspect = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let suspect = writer_suspect.clone();
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // A local file cannot drop a connection; the ping per acquire only costs
            // a round trip to the SQLite worker thread.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            // A COMMIT that fails (a full disk: SQLITE_FULL) leaves SQLite's
            // transaction open, and the writer came back with it: every later
            // write then failed ("non-zero transaction depth") until a restart.
            // Such a connection is closed (which rolls back) and a new one opened.
            .after_release(|conn, _| {
                Box::pin(async move { Ok(!sqlx::Connection::is_in_transaction(conn)) })
            })
            // After the file could not be written, a fresh connection (see
            // `writer_suspect`); the first write once the file is writable works.
            .before_acquire(move |_, _| {
                let suspect = suspect.clone();
                Box::pin(
                    async move { Ok(!suspect.swap(false, std::sync::atomic::Ordering::SeqCst)) },
                )
            })
            .connect_with(opts.clone())
            .await?;
        sqlx::migrate!("../../migrations/sqlite")
            .run(&write)
            .await?;
        let read = if memory {
            write.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts.read_only(true))
                .await?
        };
        let wakes_out = crate::WakeOut::default();
        Ok(Self {
            group: group::Group::new(write.clone(), wakes_out.clone()),
            write,
            read,
            hooks,
            wakes_out,
            writer_suspect,
            _owner: owner,
        })
    }

    /// One write transaction: a member of the writer's next group commit.
    pub(crate) async fn begin_write(&self) -> StoreResult<SqliteTx> {
        Ok(SqliteTx::Write(self.group.begin().await?))
    }

    /// Off: every write transaction commits alone (for comparisons; on by default).
    pub fn set_group_commit(&self, on: bool) {
        self.group.set_enabled(on);
    }

    /// Physical commits of the writer since the store opened (group commit makes
    /// them fewer than write transactions).
    pub fn commits(&self) -> u64 {
        self.group.commits()
    }

    pub(crate) fn read(&self) -> &SqlitePool {
        &self.read
    }

    /// Where the shared statements read outside a write transaction.
    pub(crate) fn read_pool(&self) -> &SqlitePool {
        &self.read
    }

    /// Where a shared statement writes alone: the single writer.
    pub(crate) fn write_pool(&self) -> &SqlitePool {
        &self.write
    }

    /// The `synchronous` pragma in force (for `switchboard doctor` and diagnostics).
    pub async fn synchronous(&self) -> StoreResult<i64> {
        let row = sqlx::query("PRAGMA synchronous")
            .fetch_one(&self.write)
            .await?;
        Ok(row.try_get(0)?)
    }
}

/// The file of a `sqlite:` URL (`sqlite://PATH?…`), none for `:memory:` or another
/// backend.
pub fn file_of(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let file = rest.split('?').next().unwrap_or_default();
    (!file.is_empty() && !file.contains(":memory:")).then_some(file)
}

/// Takes the exclusive lock that makes this process the file's only server.
fn lock_owner(url: &str) -> StoreResult<std::fs::File> {
    let path = file_of(url).unwrap_or_default();
    let lock_path = format!("{path}.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError::Invalid(format!("cannot open {lock_path}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Invalid(format!(
            "another switchboard process is serving {path}; stop it, or pass another --database-url"
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StoreError::Invalid(format!("cannot lock {lock_path}: {e}")))
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }

    /// Nobody else writes this file: `listen` has nothing to hear. The group
    /// commit delivers its members' wake-ups itself, after the commit.
    fn deliver_wakes_to(&self, sink: std::sync::Arc<dyn crate::WakeSink>) {
        self.wakes_out.set(sink);
    }
}

/// A SQLite transaction: a read snapshot on the read pool, or a member of the
/// writer's group commit. Both deref to their connection.
pub(crate) enum SqliteTx {
    Read(sqlx::Transaction<'static, sqlx::Sqlite>),
    Write(group::Member),
}

impl std::ops::Deref for SqliteTx {
    type Target = sqlx::SqliteConnection;
    fn deref(&self) -> &Self::Target {
        match self {
            Self::Read(tx) => tx,
            Self::Write(member) => member,
        }
    }
}

impl std::ops::DerefMut for SqliteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Self::Read(tx) => tx,
            Self::Write(member) => member,
        }
    }
}

#[async_trait::async_trait]
impl crate::engine::Driver for SqliteDriver {
    type Tx = SqliteTx;
    const DIALECT: crate::dialect::Dialect = crate::dialect::Dialect::Sqlite;

    /// One process owns the file (`_owner`): every live job is its own.
    fn job_owner(&self) -> Option<&str> {
        None
    }

    fn hooks(&self) -> &StoreHooks {
        &self.hooks
    }

    async fn begin_write(&self) -> StoreResult<Self::Tx> {
        SqliteDriver::begin_write(self).await
    }

    /// In WAL mode a read transaction sees one snapshot and never blocks the writer.
    async fn begin_read(&self) -> StoreResult<Self::Tx> {
        Ok(SqliteTx::Read(self.read.begin().await?))
    }

    /// One process owns the file: nobody else needs to hear of `wakes`, unless the
    /// caller goes away while its commit waits for its group (then the group sends
    /// them).
    async fn commit(&self, tx: Self::Tx, wakes: &[Wake]) -> StoreResult<()> {
        match tx {
            SqliteTx::Read(tx) => Ok(tx.commit().await?),
            SqliteTx::Write(member) => member.commit(wakes).await,
        }
    }

    /// The writer's next group commit takes it; the caller goes on at once.
    async fn commit_later(&self, tx: Self::Tx) -> StoreResult<()> {
        match tx {
            SqliteTx::Read(tx) => Ok(tx.commit().await?),
            SqliteTx::Write(member) => member.commit_later().await,
        }
    }

    /// One attempt (the single writer never deadlocks); a failure to write the
    /// file marks the writer for replacement.
    async fn retrying<T, F, Fut>(&self, mut attempt: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = StoreResult<T>> + Send,
    {
        let result = attempt().await;
        if result.as_ref().is_err_and(crate::error::file_unwritable) {
            self.writer_suspect
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        result
    }
}

crate::statements::shared_statements!(SqliteDriver);

impl crate::engine::ops::bulk::BulkDriver for SqliteDriver {}

impl crate::engine::inbox_transactions::InboxDriver for SqliteDriver {}
impl crate::engine::maintenance::MaintenanceDriver for SqliteDriver {}
