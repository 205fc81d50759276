//! MariaDB / MySQL's migration runner (`store/migrate.rs` says what it is for).
//!
//! - **A session without limits.** It runs on a connection of its own whose session
//!   has no `max_statement_time` (MariaDB; MySQL's `max_execution_time` limits only
//!   reads) nor `idle_transaction_timeout`, and waits up to a minute for a row lock:
//!   the pool's 15 s would cut a long migration short, and MariaDB's DDL is not
//!   transactional, so a migration cut after its first statement is left *dirty*
//!   (sqlx records it as failed and refuses to start until someone repairs it).
//! - **Our own lock.** sqlx's lock is `GET_LOCK(name, -1)`, which MySQL reads as "wait
//!   for ever" and MariaDB refuses at once (NULL): three instances starting together
//!   each ran the migrations. So the runner takes `GET_LOCK('switchboard_migrate_' ‖
//!   SHA1(database), 1)` in a loop, logging while it waits, until
//!   [`LOCK_DEADLINE`](crate::migrate::LOCK_DEADLINE), and runs sqlx's
//!   migrator with its locking off. (One long `GET_LOCK(…, 300)` was cut short by
//!   the session's `max_statement_time` too.)
//! - **Dirty 0008 repaired.** A database an earlier version left dirty at 0008 (its
//!   `DELETE` over the statement limit, after its `ALTER` had committed) is finished
//!   here: the `ALTER` is atomic, so either the three columns exist (then the rest
//!   of the schema part, an idempotent `UPDATE`, runs again, the `DELETE` becomes
//!   the batched step and the migration is marked applied) or none does (then the
//!   failed record is removed and the migration applied anew).

use super::server::Flavor;
use crate::dialect::Dialect;
use crate::migrate::{self, CREATED_ROWS, CREATED_ROWS_DELETE, Deferred, LockWait};
use crate::{StoreError, StoreResult};
use sqlx::migrate::Migrate;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::{Connection, Executor, MySqlConnection};
use std::time::Duration;

/// The shipped migration whose last statement is a batched step instead.
const DEFERRED: &[Deferred] = &[Deferred {
    version: 8,
    statement: CREATED_ROWS_DELETE,
    step: &CREATED_ROWS,
}];

/// The migration lock of this database (a MariaDB / MySQL named lock).
pub(super) const LOCK: &str = "CONCAT('switchboard_migrate_', SHA1(DATABASE()))";
/// How long one `GET_LOCK` waits, in seconds, before the runner logs and tries again.
const LOCK_TRY_SECONDS: i64 = 1;

/// 0008's statement after its `ALTER`, exactly as in the file (a test checks it):
/// what a repair of a dirty 0008 runs again. Idempotent.
const MYSQL_0008_UPDATE: &str = "UPDATE events e JOIN agents a ON a.id = e.agent_id \
SET e.claimed_by = CONCAT('agent:', a.name)\n    WHERE e.status = 'claimed';";
/// The columns 0008's `ALTER` adds, all or none.
const MYSQL_0008_COLUMNS: &str = "SELECT COUNT(*) FROM information_schema.columns \
     WHERE table_schema = DATABASE() AND table_name = 'events' \
     AND column_name IN ('claimed_at', 'claimed_by', 'completed_at')";

/// Applies the migrations under the migration lock, on a connection of its own
/// (`opts`; the session set here, without the pool's limits).
pub(super) async fn migrate(opts: &MySqlConnectOptions, flavor: Flavor) -> StoreResult<()> {
    let mut conn = MySqlConnection::connect_with(opts).await?;
    super::session(&mut conn, flavor, super::Limits::MIGRATION).await?;
    let mut wait = LockWait::new(Duration::ZERO);
    loop {
        let got: Option<i64> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT GET_LOCK({LOCK}, ?)")))
                .bind(LOCK_TRY_SECONDS)
                .fetch_one(&mut conn)
                .await?;
        match got {
            Some(1) => break,
            Some(_) => wait.pause("GET_LOCK('switchboard_migrate_…')").await?,
            None => {
                return Err(StoreError::Invalid(
                    "the server refused the migration lock (GET_LOCK gave NULL)".into(),
                ));
            }
        }
    }
    let applied = apply(&mut conn).await;
    let release = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT RELEASE_LOCK({LOCK})")));
    migrate::release_and_close(conn, applied, release).await
}

async fn apply(conn: &mut MySqlConnection) -> StoreResult<()> {
    conn.execute(migrate::steps_table(Dialect::MySql)).await?;
    let files = sqlx::migrate!("../../migrations/mysql");
    repair(conn, &files).await?;
    // `run_direct`, not `run`: `run`'s future is not `Send` (sqlx's `Acquire` is
    // not general enough), and `open`'s must be.
    migrate::migrator(&files, DEFERRED, Dialect::MySql)?
        .run_direct(None, conn, false)
        .await?;
    Ok(())
}

/// Finishes a 0008 left dirty (see the module's notes); any other dirty migration
/// is left to sqlx, which refuses to go on.
async fn repair(conn: &mut MySqlConnection, files: &sqlx::migrate::Migrator) -> StoreResult<()> {
    conn.ensure_migrations_table("_sqlx_migrations").await?;
    let dirty: Option<(i64, Vec<u8>)> = sqlx::query_as(
        "SELECT version, checksum FROM _sqlx_migrations WHERE success = FALSE \
         ORDER BY version LIMIT 1",
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some((version, checksum)) = dirty else {
        return Ok(());
    };
    let Some(deferred) = DEFERRED.iter().find(|d| d.version == version) else {
        return Ok(());
    };
    if !files
        .iter()
        .any(|m| m.version == version && *m.checksum == *checksum)
    {
        return Ok(());
    }
    let columns: i64 = sqlx::query_scalar(MYSQL_0008_COLUMNS)
        .fetch_one(&mut *conn)
        .await?;
    match columns {
        0 => {
            tracing::warn!(
                version,
                "a migration had failed before it changed anything; applying it again"
            );
            sqlx::query("DELETE FROM _sqlx_migrations WHERE version = ? AND success = FALSE")
                .bind(version)
                .execute(&mut *conn)
                .await?;
        }
        3 => {
            tracing::warn!(
                version,
                "a migration had failed part way (its bulk delete over the statement time limit); \
                 finishing it, the delete as a batched step"
            );
            conn.execute(MYSQL_0008_UPDATE).await?;
            conn.execute(sqlx::AssertSqlSafe(migrate::register(
                deferred.step,
                Dialect::MySql,
            )))
            .await?;
            sqlx::query("UPDATE _sqlx_migrations SET success = TRUE WHERE version = ?")
                .bind(version)
                .execute(&mut *conn)
                .await?;
        }
        n => {
            return Err(StoreError::Invalid(format!(
                "migration {version} failed part way and the events table has {n} of its 3 \
                 new columns; restore the database from a backup taken before the upgrade"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repair_reruns_the_file_s_own_update() {
        let files = sqlx::migrate!("../../migrations/mysql");
        let file = files.iter().find(|m| m.version == 8).expect("0008");
        let sql = file.sql.as_str();
        let update = sql.find(MYSQL_0008_UPDATE).expect("the UPDATE, verbatim");
        assert!(
            update < sql.find(CREATED_ROWS_DELETE).expect("the DELETE"),
            "before the DELETE"
        );
        assert_eq!(sql.matches(';').count(), 3, "ALTER, UPDATE, DELETE: {sql}");
    }
}
