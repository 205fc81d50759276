//! The database's checks: reachable, the schema against this binary's migrations,
//! SQLite's settings and lock, PostgreSQL's and MariaDB's version, connections,
//! autovacuum, binary log and clock.

// Without a networked driver (the desktop app's build) their checks are left out.
#![cfg_attr(
    not(all(feature = "postgres", feature = "mysql")),
    allow(unused_imports, unused_variables, dead_code)
)]

use super::{Finding, Thresholds};
use crate::clock::Clock;
use crate::config::{Config, redact_url};
use crate::store::sqlite::file_of as sqlite_file;
use sqlx::Connection;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

pub(super) async fn check(config: &Config, thresholds: &Thresholds) -> Vec<Finding> {
    let url = &config.database_url;
    let shown = redact_url(url);
    if url.starts_with("sqlite:") {
        sqlite(config, &shown).await
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return match sqlx::PgConnection::connect(url).await {
            Ok(mut conn) => {
                let mut found = vec![Finding::ok("database", format!("{shown} is reachable"))];
                found.extend(postgres(&mut conn, config, config.clock.as_ref(), thresholds).await);
                let _ = conn.close().await;
                found
            }
            Err(e) => vec![unreachable(&shown, &e)],
        };
        #[cfg(not(feature = "postgres"))]
        vec![not_built(&shown, "PostgreSQL")]
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        #[cfg(feature = "mysql")]
        return match sqlx::MySqlConnection::connect(&url.replacen("mariadb://", "mysql://", 1))
            .await
        {
            Ok(mut conn) => {
                let mut found = vec![Finding::ok("database", format!("{shown} is reachable"))];
                found.extend(mysql(&mut conn, config, config.clock.as_ref(), thresholds).await);
                let _ = conn.close().await;
                found
            }
            Err(e) => vec![unreachable(&shown, &e)],
        };
        #[cfg(not(feature = "mysql"))]
        vec![not_built(&shown, "MariaDB / MySQL")]
    } else {
        vec![Finding::error(
            "database",
            format!("{shown} is no database URL switchboard knows"),
            "use sqlite://PATH, postgres://USER:PASSWORD@HOST/DB or mysql://USER:PASSWORD@HOST/DB",
        )]
    }
}

/// A database this build cannot open (the desktop app embeds SQLite only).
#[cfg(not(all(feature = "postgres", feature = "mysql")))]
fn not_built(shown: &str, backend: &str) -> Finding {
    Finding::error(
        "database",
        format!("{shown}: this build has no {backend} driver"),
        "run `switchboard doctor` of the CLI, which has every driver",
    )
}

fn unreachable(shown: &str, e: &sqlx::Error) -> Finding {
    Finding::error(
        "database",
        format!("cannot connect to {shown}: {e}"),
        "check that the database server runs and listens there, and the user, password \
         and database name in the URL",
    )
}

async fn sqlite(config: &Config, shown: &str) -> Vec<Finding> {
    let mut found = vec![sqlite_synchronous(&config.sqlite_synchronous)];
    let Some(file) = sqlite_file(&config.database_url) else {
        found.push(Finding::ok("database", format!("{shown}: in memory")));
        return found;
    };
    if !Path::new(file).exists() {
        found.push(Finding::warning(
            "database",
            format!("{file} does not exist yet"),
            "`switchboard serve` creates it at start; check the path if you expected data there",
        ));
        return found;
    }
    let options = match sqlx::sqlite::SqliteConnectOptions::from_str(&config.database_url) {
        Ok(o) => o.read_only(true),
        Err(e) => {
            found.push(Finding::error(
                "database",
                format!("{shown} is not a valid SQLite URL: {e}"),
                "use sqlite://PATH",
            ));
            return found;
        }
    };
    let mut conn = match sqlx::SqliteConnection::connect_with(&options).await {
        Ok(c) => c,
        Err(e) => {
            found.push(Finding::error(
                "database",
                format!("cannot open {file}: {e}"),
                "check the file's permissions and that it is a SQLite database",
            ));
            return found;
        }
    };
    found.push(Finding::ok("database", format!("{file} opens")));
    let has_table: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap_or(0);
    let applied = if has_table > 0 {
        Some(sqlx::query_as(APPLIED).fetch_all(&mut conn).await)
    } else {
        None
    };
    found.push(migrations(
        applied,
        &sqlx::migrate!("../../migrations/sqlite"),
    ));
    found.extend(super::signatures::finding(
        sqlx::query_as(super::signatures::QUERY)
            .fetch_all(&mut conn)
            .await,
    ));
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap_or_default();
    found.push(if mode.eq_ignore_ascii_case("wal") {
        Finding::ok("sqlite_journal", "the file is in WAL mode")
    } else {
        Finding::warning(
            "sqlite_journal",
            format!("the file is in {mode} journal mode, not WAL"),
            "`switchboard serve` sets WAL at start; if it does not stay WAL, the file system \
             cannot share memory between connections (a network file system): keep the \
             database on a local disk",
        )
    });
    let _ = conn.close().await;
    found.push(sqlite_lock(file));
    found
}

fn sqlite_synchronous(value: &str) -> Finding {
    match value.to_ascii_lowercase().as_str() {
        "full" | "extra" => Finding::ok(
            "sqlite_synchronous",
            format!("synchronous = {value}: a commit is on disk before it is answered"),
        ),
        "normal" => Finding::warning(
            "sqlite_synchronous",
            "synchronous = normal: a power loss or OS crash may lose the last commits \
             (already answered 2xx)",
            "drop --sqlite-synchronous (full is the default) unless losing answered writes \
             on a power loss is acceptable",
        ),
        other => Finding::error(
            "sqlite_synchronous",
            format!("synchronous = {other}: the server refuses it, or it loses answered writes"),
            "set --sqlite-synchronous full (the default)",
        ),
    }
}

/// Whether a server holds the file's lock (informational: one server per file).
fn sqlite_lock(file: &str) -> Finding {
    let lock = format!("{file}.lock");
    let Ok(handle) = std::fs::File::open(&lock) else {
        return Finding::ok("sqlite_lock", "no server is running on this file");
    };
    match handle.try_lock_shared() {
        Ok(()) => Finding::ok("sqlite_lock", "no server is running on this file"),
        Err(std::fs::TryLockError::WouldBlock) => Finding::ok(
            "sqlite_lock",
            format!("a server is running on this file (it holds {lock})"),
        ),
        Err(std::fs::TryLockError::Error(e)) => Finding::error(
            "sqlite_lock",
            format!("cannot lock {lock}: {e}"),
            "the file system must support file locks (flock): keep the database on a local disk",
        ),
    }
}

/// What `SELECT version, success FROM _sqlx_migrations` gives, on every backend.
const APPLIED: &str = "SELECT version, success FROM _sqlx_migrations ORDER BY version";

/// The schema against the migrations this binary carries; `applied` is `None` when
/// the database has no migration table.
fn migrations(
    applied: Option<Result<Vec<(i64, bool)>, sqlx::Error>>,
    migrator: &sqlx::migrate::Migrator,
) -> Finding {
    let applied = match applied {
        None => {
            return Finding::warning(
                "migrations",
                "the database has no schema yet",
                "`switchboard serve` creates it at start",
            );
        }
        Some(Ok(rows)) => rows,
        Some(Err(e)) => {
            return Finding::error(
                "migrations",
                format!("cannot read the migration table: {e}"),
                "check that the database user may read _sqlx_migrations",
            );
        }
    };
    let known: Vec<i64> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .map(|m| m.version)
        .collect();
    verdict(&applied, &known)
}

/// The pure part of [`migrations`].
fn verdict(applied: &[(i64, bool)], known: &[i64]) -> Finding {
    if let Some((v, _)) = applied.iter().find(|(_, ok)| !ok) {
        return Finding::error(
            "migrations",
            format!("migration {v} failed part way: the schema is in an unknown state"),
            "restore the database from a backup taken before the upgrade",
        );
    }
    if let Some((v, _)) = applied.iter().find(|(v, _)| !known.contains(v)) {
        return Finding::error(
            "migrations",
            format!(
                "the database was migrated by a newer switchboard (migration {v} is unknown to \
                 this {})",
                env!("CARGO_PKG_VERSION")
            ),
            "run that newer version (or later); an older binary must not write a newer schema",
        );
    }
    let pending: Vec<i64> = known
        .iter()
        .copied()
        .filter(|v| !applied.iter().any(|(a, _)| a == v))
        .collect();
    let latest = applied.last().map(|(v, _)| *v).unwrap_or_default();
    if pending.is_empty() {
        Finding::ok(
            "migrations",
            format!("the schema is at migration {latest}, up to date"),
        )
    } else {
        Finding::warning(
            "migrations",
            format!(
                "{} migration(s) pending ({}), the schema is at {latest}",
                pending.len(),
                pending
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "`switchboard serve` applies them at start (several instances: the first one does, \
             under a lock); take a backup first",
        )
    }
}

/// The pool this configuration asks for against what the server allows.
pub(super) fn connections(check_max: i64, reserved: i64, pool: u32) -> Finding {
    let available = check_max - reserved;
    let pool = i64::from(pool);
    if pool > available {
        return Finding::error(
            "connections",
            format!(
                "one instance's pool ({pool}) is more than the server allows ({available} of \
                 max_connections {check_max})"
            ),
            "lower --database-max-connections, or raise the server's max_connections",
        );
    }
    let instances = available / pool.max(1);
    if instances < 2 {
        Finding::warning(
            "connections",
            format!(
                "the server has room for {instances} instance(s) at {pool} connections each \
                 ({available} available)"
            ),
            "lower --database-max-connections, or raise max_connections, to run a second \
             instance (and for a rolling restart)",
        )
    } else {
        Finding::ok(
            "connections",
            format!(
                "room for {instances} instances at {pool} connections each ({available} \
                 available)"
            ),
        )
    }
}

/// This machine's clock against the database's, the round trip allowed for.
pub(super) fn skew(
    check: &'static str,
    local_before: i64,
    db: i64,
    local_after: i64,
    t: &Thresholds,
) -> Finding {
    let middle = (local_before + local_after) / 2;
    let half_trip = (local_after - local_before).max(0) / 2;
    let off = ((db - middle).abs() - half_trip).max(0);
    let off = Duration::from_millis(off as u64);
    let message = format!(
        "this machine's clock is {} ms {} the database's",
        off.as_millis(),
        if db > middle { "behind" } else { "ahead of" }
    );
    let fix = "synchronize both clocks (chrony or systemd-timesyncd): leases, retention and \
               the console's ages read both";
    if off > t.error_skew {
        Finding::error(check, message, fix)
    } else if off > t.warn_skew {
        Finding::warning(check, message, fix)
    } else {
        Finding::ok(check, message)
    }
}

#[cfg(feature = "postgres")]
async fn postgres(
    conn: &mut sqlx::PgConnection,
    config: &Config,
    clock: &dyn Clock,
    t: &Thresholds,
) -> Vec<Finding> {
    let mut found = Vec::new();
    let setting = |name: &'static str| format!("SELECT current_setting('{name}')");
    let mut read = async |name: &'static str| -> Option<String> {
        sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(setting(name)))
            .fetch_one(&mut *conn)
            .await
            .ok()
    };
    let version: i64 = read("server_version_num")
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    found.push(if version >= 130000 {
        Finding::ok(
            "server_version",
            format!("PostgreSQL {}.{}", version / 10000, version % 10000),
        )
    } else {
        Finding::error(
            "server_version",
            format!("PostgreSQL server_version_num {version} is older than 13"),
            "upgrade PostgreSQL to 13 or later (15 is tested)",
        )
    });
    let max: i64 = read("max_connections")
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let reserved: i64 = read("superuser_reserved_connections")
        .await
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    found.push(connections(max, reserved, config.database_max_connections));
    let autovacuum = read("autovacuum").await.unwrap_or_default();
    let off_tables: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' \
         AND c.reloptions @> ARRAY['autovacuum_enabled=false'] ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    found.push(if autovacuum != "on" {
        Finding::warning(
            "autovacuum",
            "autovacuum is off on this server: the queue's tables bloat with every ack",
            "set autovacuum = on in postgresql.conf and reload",
        )
    } else if !off_tables.is_empty() {
        Finding::warning(
            "autovacuum",
            format!("autovacuum is disabled on {}", off_tables.join(", ")),
            format!(
                "ALTER TABLE … RESET (autovacuum_enabled) on {}",
                off_tables.join(", ")
            ),
        )
    } else {
        Finding::ok("autovacuum", "autovacuum is on")
    });
    let before = clock.now_ms();
    let db: Option<i64> =
        sqlx::query_scalar("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .fetch_one(&mut *conn)
            .await
            .ok();
    if let Some(db) = db {
        found.push(skew("clock_skew", before, db, clock.now_ms(), t));
    }
    let has_table: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(false);
    let applied = if has_table {
        Some(sqlx::query_as(APPLIED).fetch_all(&mut *conn).await)
    } else {
        None
    };
    found.push(migrations(
        applied,
        &sqlx::migrate!("../../migrations/postgres"),
    ));
    found.extend(super::signatures::finding(
        sqlx::query_as(super::signatures::QUERY)
            .fetch_all(&mut *conn)
            .await,
    ));
    found
}

#[cfg(feature = "mysql")]
pub(super) async fn mysql(
    conn: &mut sqlx::MySqlConnection,
    config: &Config,
    clock: &dyn Clock,
    t: &Thresholds,
) -> Vec<Finding> {
    use crate::store::mysql::server;
    let mut found = Vec::new();
    found.push(match server::check_server(conn).await {
        Ok(s) => Finding::ok(
            "server_version",
            format!(
                "{:?} {}.{}.{}",
                s.flavor, s.version.0, s.version.1, s.version.2
            ),
        ),
        Err(e) => Finding::error(
            "server_version",
            e.to_string(),
            "upgrade to MariaDB 10.6+ or MySQL 8.0.1+",
        ),
    });
    found.push(match server::check_binlog(conn).await {
        Ok(()) => Finding::ok("binlog_format", "binary logging is off, or ROW"),
        Err(e) => Finding::error("binlog_format", e.to_string(), "binlog_format = ROW"),
    });
    let max: i64 = sqlx::query_scalar("SELECT CAST(@@max_connections AS SIGNED)")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(0);
    found.push(connections(max, 0, config.database_max_connections));
    let before = clock.now_ms();
    let db: Option<i64> =
        sqlx::query_scalar("SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)")
            .fetch_one(&mut *conn)
            .await
            .ok();
    if let Some(db) = db {
        found.push(skew("clock_skew", before, db, clock.now_ms(), t));
    }
    let has_table: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = '_sqlx_migrations'",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap_or(0);
    let applied = if has_table > 0 {
        Some(sqlx::query_as(APPLIED).fetch_all(&mut *conn).await)
    } else {
        None
    };
    found.push(migrations(
        applied,
        &sqlx::migrate!("../../migrations/mysql"),
    ));
    found.extend(super::signatures::finding(
        sqlx::query_as(super::signatures::QUERY)
            .fetch_all(&mut *conn)
            .await,
    ));
    found
}
