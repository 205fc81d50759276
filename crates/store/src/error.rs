//! What the store answers when it cannot do what it was asked: the store's own
//! errors, with no HTTP in them. The HTTP layer maps each to a problem document
//! (the server's `ApiError` has a `From<StoreError>`).

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// The cursor is below the retention low-water mark.
    #[error("cursor {cursor} is below the low-water mark {oldest}")]
    CursorGone { cursor: u64, oldest: u64 },
    /// The claim token is not the event's current one, or its lease is over.
    #[error("stale claim: {0}")]
    StaleClaim(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("invalid: {0}")]
    Invalid(String),
    /// The name or the memory has another live lease (or is in its lock delay).
    /// `retry_after_ms`: how long until it may be free, when what holds it is the
    /// caller's own tenant's; `None` when it is another tenant's, whose timings the
    /// caller must not learn (I9): the server then answers a coarse wait.
    #[error("lease held: {why}")]
    LeaseHeld {
        why: String,
        retry_after_ms: Option<crate::clock::Millis>,
    },
    /// A fencing token lower than the current one.
    #[error("stale fence: {0}")]
    StaleFence(String),
    /// A data-plane call with a fencing token that was not issued to the caller.
    #[error("not the lease holder: {0}")]
    NotHolder(String),
    /// If-Match / If-None-Match did not hold.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// An update without If-Match.
    #[error("precondition required: {0}")]
    PreconditionRequired(String),
    /// The lease ran out (and nobody took over yet).
    #[error("lease expired: {0}")]
    LeaseExpired(String),
    /// The name's skeleton is leased under a different canonical name.
    #[error("confusable name")]
    Confusable { canonical: String, skeleton: String },
    /// More events match than an immediate action may change (make it a job).
    #[error("{0} events match")]
    TooMany(u64),
    /// The request's idempotency key is no longer this attempt's: its lock ran out
    /// and another instance took the request over. The business change is rolled
    /// back, so only the attempt that holds the key commits (I8).
    #[error("idempotency key taken over")]
    KeyTakenOver,
    /// A test hook or a commit failure rolled the transaction back.
    #[error("aborted: {0}")]
    Aborted(String),
    #[error("database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// The database's disk is full (SQLite `SQLITE_FULL`, PostgreSQL 53100, MySQL
    /// 1021 / 1114): the transaction rolled back, nothing was written.
    #[error("the database's disk is full")]
    StorageFull(#[source] sqlx::Error),
    #[error("an internal database error occurred")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(e),
            sqlx::Error::Database(ref db) if disk_full(db.as_ref()) => Self::StorageFull(e),
            sqlx::Error::Database(ref db) if sqlite_unwritable(db.as_ref()) => Self::Unavailable(e),
            sqlx::Error::Database(ref db) if db.code().as_deref().is_some_and(transient) => {
                Self::Unavailable(e)
            }
            sqlx::Error::Database(ref db) if mysql_transient(db.as_ref()) => Self::Unavailable(e),
            other => Self::Database(other),
        }
    }
}

/// A full disk: SQLite's `SQLITE_FULL` (13), PostgreSQL's `disk_full` (53100),
/// MariaDB / MySQL's disk full (1021) and table full (1114).
fn disk_full(db: &dyn sqlx::error::DatabaseError) -> bool {
    if let Some(number) = mysql_number(db) {
        return matches!(number, 1021 | 1114);
    }
    sqlite_primary(db) == Some(13) || db.code().as_deref() == Some("53100")
}

/// SQLite could not write its file now (`SQLITE_READONLY` 8, `SQLITE_IOERR` 10,
/// `SQLITE_CANTOPEN` 14, in any extended form): a read-only or failing file system.
fn sqlite_unwritable(db: &dyn sqlx::error::DatabaseError) -> bool {
    matches!(sqlite_primary(db), Some(8 | 10 | 14))
}

/// Whether `e` says SQLite could not write its file (read-only, I/O error, cannot
/// open) or found it full: the writer connection may not recover by itself.
pub(crate) fn file_unwritable(e: &StoreError) -> bool {
    match e {
        StoreError::Unavailable(sqlx::Error::Database(db))
        | StoreError::StorageFull(sqlx::Error::Database(db)) => {
            matches!(sqlite_primary(db.as_ref()), Some(8 | 10 | 13 | 14))
        }
        _ => false,
    }
}

/// A MariaDB / MySQL error's number; `None` for another database's error (or in a
/// build without the `mysql` driver).
pub(crate) fn mysql_number(db: &dyn sqlx::error::DatabaseError) -> Option<u16> {
    #[cfg(feature = "mysql")]
    return db
        .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .map(|e| e.number());
    #[cfg(not(feature = "mysql"))]
    {
        let _ = db;
        None
    }
}

/// The primary result code of a SQLite error (its code may be an extended one);
/// `None` for any other database's error, whose codes mean other things.
fn sqlite_primary(db: &dyn sqlx::error::DatabaseError) -> Option<i64> {
    db.try_downcast_ref::<sqlx::sqlite::SqliteError>()?;
    db.code()?.parse::<i64>().ok().map(|c| c & 0xff)
}

/// Database error codes that mean "not now" rather than "wrong": the request gets a
/// 503 with Retry-After.
fn transient(code: &str) -> bool {
    matches!(
        code,
        // SQLITE_BUSY past busy_timeout.
        "5"
        // PostgreSQL: serialization failure and deadlock (after our retries),
        // statement or lock timeout, shutdown and restart, too many connections.
        | "40001" | "40P01" | "57014" | "55P03" | "57P01" | "57P02" | "57P03" | "53300"
        // The database does not accept connections (ALTER DATABASE … ALLOW_CONNECTIONS
        // false, during maintenance). Our statements raise 55000 for nothing else.
        | "55000"
    ) || code.starts_with("08")
}

/// MariaDB / MySQL errors that mean "not now" (their SQLSTATE is often the generic
/// HY000, so by number): lock wait timeout and deadlock (after our retries), a
/// statement over its time limit (MariaDB 1969, MySQL 3024), a query or connection
/// killed, shutdown, too many connections, and a server that went read-only (a
/// failover in progress).
fn mysql_transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    mysql_number(db).is_some_and(|number| {
        matches!(
            number,
            1205 | 1213 | 1969 | 3024 | 1317 | 1927 | 1053 | 1040 | 1203 | 1290 | 1836
        )
    })
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Database(sqlx::Error::Migrate(Box::new(e)))
    }
}

#[cfg(test)]
mod disk_tests {
    use super::*;
    use sqlx::Connection;

    /// A SQLite file that may not grow fails with `SQLITE_FULL`, as on a full disk.
    #[tokio::test]
    async fn a_full_sqlite_file_is_storage_full() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("open");
        sqlx::raw_sql("CREATE TABLE t (v BLOB); PRAGMA max_page_count = 8;")
            .execute(&mut conn)
            .await
            .expect("setup");
        let e = sqlx::query("INSERT INTO t VALUES (zeroblob(1000000))")
            .execute(&mut conn)
            .await
            .expect_err("the file may not grow");
        assert!(matches!(StoreError::from(e), StoreError::StorageFull(_)));
    }
}
