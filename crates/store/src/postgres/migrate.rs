//! PostgreSQL's migration runner (`store/migrate.rs` says what it is for).
//!
//! It runs on a connection of its own whose session has no `statement_timeout`,
//! `lock_timeout` or `idle_in_transaction_session_timeout`: the pool's 15 s statement
//! limit would cut a long migration short (sqlx sends a migration's file as one
//! query, so the limit is for the whole file), and sqlx's own lock wait,
//! `pg_advisory_lock`, with it. The lock is sqlx's advisory lock, same key, so an
//! instance of an older version migrating the same database excludes this one and
//! the reverse; this runner takes it with `pg_try_advisory_lock` in a loop, so a
//! second instance waits, says so in the log, and gives up only after
//! [`LOCK_DEADLINE`](crate::migrate::LOCK_DEADLINE).

use crate::StoreResult;
use crate::dialect::Dialect;
use crate::migrate::{self, CREATED_ROWS, CREATED_ROWS_DELETE, Deferred, LockWait};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, Executor, PgConnection};
use std::time::Duration;

/// The shipped migration whose last statement is a batched step instead.
const DEFERRED: &[Deferred] = &[Deferred {
    version: 9,
    statement: CREATED_ROWS_DELETE,
    step: &CREATED_ROWS,
}];

/// Between two tries of the lock.
const LOCK_POLL: Duration = Duration::from_millis(250);

/// sqlx's migration lock key for `database` (`sqlx-postgres`' `generate_lock_id`):
/// the same, so this runner and sqlx's migrator of an older version exclude each
/// other.
fn lock_key(database: &str) -> i64 {
    let mut crc = flate2::Crc::new();
    crc.update(database.as_bytes());
    0x3d32ad9e * i64::from(crc.sum())
}

/// Applies the migrations under the migration lock, on a connection of its own
/// (`opts` without the pool's limits).
pub(super) async fn migrate(opts: &PgConnectOptions) -> StoreResult<()> {
    let opts = opts.clone().options([
        ("statement_timeout", "0"),
        ("lock_timeout", "0"),
        ("idle_in_transaction_session_timeout", "0"),
    ]);
    let mut conn = PgConnection::connect_with(&opts).await?;
    let database: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&mut conn)
        .await?;
    let key = lock_key(&database);
    let mut wait = LockWait::new(LOCK_POLL);
    while !sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
        .bind(key)
        .fetch_one(&mut conn)
        .await?
    {
        wait.pause(&format!("pg_advisory_lock({key})")).await?;
    }
    let applied = apply(&mut conn).await;
    let release = sqlx::query("SELECT pg_advisory_unlock($1)").bind(key);
    migrate::release_and_close(conn, applied, release).await
}

async fn apply(conn: &mut PgConnection) -> StoreResult<()> {
    conn.execute(migrate::steps_table(Dialect::Postgres))
        .await?;
    let files = sqlx::migrate!("../../migrations/postgres");
    // `run_direct`, not `run`: `run`'s future is not `Send` (sqlx's `Acquire` is
    // not general enough), and `open`'s must be.
    migrate::migrator(&files, DEFERRED, Dialect::Postgres)?
        .run_direct(None, conn, false)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_lock_key_is_sqlx_s() {
        // 0x3d32ad9e × CRC-32 ("postgres") = 0x156a8775 (Python's `zlib.crc32`, the
        // CRC sqlx-postgres 0.9 takes). The PostgreSQL tests also wait on the lock
        // sqlx's migrator takes itself.
        assert_eq!(super::lock_key("postgres"), 368_907_709_894_077_238);
    }
}
