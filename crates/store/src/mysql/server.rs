//! What the store checks about the server before it uses it: a version with
//! `SKIP LOCKED`, and row-based binary logging where binary logging is on. Both are
//! pure functions of what the server says, so they are tested without one.

use crate::{StoreError, StoreResult};
use sqlx::MySqlConnection;

/// Which server, and so which session settings it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql,
}

/// The server as `SELECT VERSION()` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pub flavor: Flavor,
    pub version: (u32, u32, u32),
}

/// `SKIP LOCKED` came with MariaDB 10.6 and MySQL 8.0.1; 10.11 is what is tested.
const MARIADB_MIN: (u32, u32, u32) = (10, 6, 0);
const MYSQL_MIN: (u32, u32, u32) = (8, 0, 1);

/// Reads `VERSION()`: `10.11.19-MariaDB-0+deb12u1-log`, `8.0.36`, `8.4.3-log`, or
/// from old proxies `5.5.5-10.11.2-MariaDB`. Refuses a server without `SKIP LOCKED`.
pub(crate) fn server(version: &str) -> Result<Server, String> {
    let mariadb = version.contains("MariaDB");
    let text = match version.strip_prefix("5.5.5-") {
        Some(rest) if mariadb => rest,
        _ => version,
    };
    let numbers: Vec<u32> = text
        .split(|c: char| !c.is_ascii_digit() && c != '.')
        .next()
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let part = |i: usize| numbers.get(i).copied().unwrap_or(0);
    let found = (part(0), part(1), part(2));
    let (flavor, min, name) = if mariadb {
        (Flavor::MariaDb, MARIADB_MIN, "MariaDB")
    } else {
        (Flavor::MySql, MYSQL_MIN, "MySQL")
    };
    if found < min {
        return Err(format!(
            "{name} {version} is too old: Switchboard needs MariaDB 10.6 or later (10.11 is \
             tested) or MySQL 8.0.1 or later, whose FOR UPDATE SKIP LOCKED lets claimers on \
             several instances pass each other's rows"
        ));
    }
    Ok(Server {
        flavor,
        version: found,
    })
}

/// With binary logging on, only ROW format replicates what the store does: under
/// statement-based logging `SKIP LOCKED` (which rows a replica would skip) and
/// `LIMIT` in an `UPDATE` or `DELETE` are unsafe, and the replicas would diverge.
pub(crate) fn binlog(log_bin: bool, format: &str) -> Result<(), String> {
    if !log_bin || format.eq_ignore_ascii_case("ROW") {
        return Ok(());
    }
    Err(format!(
        "the database server writes its binary log in {format} format, and Switchboard \
         needs ROW: statement-based replication of FOR UPDATE SKIP LOCKED is unsafe (a \
         replica would skip other rows). Set `binlog_format = ROW` in the server's \
         configuration ([mysqld] or [mariadb] section) and restart it, or run \
         SET GLOBAL binlog_format = 'ROW' (new connections use it), or turn binary \
         logging off if nothing replicates from this server"
    ))
}

/// The real check, on `conn`'s session (a new session has the server's format).
pub async fn check_binlog(conn: &mut MySqlConnection) -> StoreResult<()> {
    let (log_bin, format): (i64, String) =
        sqlx::query_as("SELECT CAST(@@log_bin AS SIGNED), CAST(@@SESSION.binlog_format AS CHAR)")
            .fetch_one(&mut *conn)
            .await?;
    binlog(log_bin != 0, &format).map_err(StoreError::Invalid)
}

/// The server, checked for `SKIP LOCKED`.
pub async fn check_server(conn: &mut MySqlConnection) -> StoreResult<Server> {
    let version: String = sqlx::query_scalar("SELECT CAST(VERSION() AS CHAR)")
        .fetch_one(&mut *conn)
        .await?;
    server(&version).map_err(StoreError::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_with_skip_locked_pass() {
        let s = server("10.11.19-MariaDB-0+deb12u1-log").expect("10.11");
        assert_eq!((s.flavor, s.version), (Flavor::MariaDb, (10, 11, 19)));
        let s = server("5.5.5-10.6.2-MariaDB").expect("10.6 behind a proxy");
        assert_eq!((s.flavor, s.version), (Flavor::MariaDb, (10, 6, 2)));
        assert_eq!(server("11.4.2-MariaDB").unwrap().version, (11, 4, 2));
        let s = server("8.0.36").expect("8.0.36");
        assert_eq!((s.flavor, s.version), (Flavor::MySql, (8, 0, 36)));
        assert_eq!(server("8.4.3-log").unwrap().version, (8, 4, 3));
        assert_eq!(server("8.0.1").unwrap().flavor, Flavor::MySql);
    }

    #[test]
    fn older_servers_are_refused_and_told_what_is_needed() {
        for old in [
            "10.5.24-MariaDB",
            "10.1.48-MariaDB-0+deb9u2",
            "5.7.44-log",
            "8.0.0-dmr",
        ] {
            let e = server(old).expect_err(old);
            assert!(
                e.contains("MariaDB 10.6") && e.contains("MySQL 8.0.1"),
                "{e}"
            );
            assert!(e.contains(old), "{e}");
        }
    }

    #[test]
    fn binary_logging_must_be_row_based() {
        assert!(binlog(false, "STATEMENT").is_ok(), "no binary log, no risk");
        assert!(binlog(false, "MIXED").is_ok());
        assert!(binlog(true, "ROW").is_ok());
        assert!(binlog(true, "row").is_ok());
        for format in ["STATEMENT", "MIXED"] {
            let e = binlog(true, format).expect_err(format);
            assert!(e.contains(&format!("in {format} format")), "{e}");
            assert!(e.contains("binlog_format = ROW"), "says how to fix it: {e}");
        }
    }
}
