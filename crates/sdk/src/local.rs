//! [`LocalDb`]: the agent's local SQLite file, shared by the [`Outbox`] and the
//! [`Consumer`].
//!
//! One file per profile (the CLI keeps it under `$XDG_DATA_HOME/switchboard/`). WAL,
//! `synchronous=FULL` (a committed outbox entry survives power loss: invariant I10),
//! and a busy timeout, so `switchboard agent send` and a running `switchboard agent
//! run` can share the file. Every write is one statement, so no transaction ever has
//! to upgrade from a read lock.
//!
//! [`Outbox`]: crate::outbox::Outbox
//! [`Consumer`]: crate::consumer::Consumer

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

/// An error of the local store (the file cannot be opened, is locked for longer than
/// the busy timeout, the disk is full…).
#[derive(Debug, thiserror::Error)]
#[error("local state {path}: {source}")]
pub struct LocalError {
    path: String,
    #[source]
    source: sqlx::Error,
}

/// The agent's local state file. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LocalDb {
    pool: SqlitePool,
    path: PathBuf,
}

impl LocalDb {
    /// Opens (creating it and its migrations when needed) the state file at `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, LocalError> {
        let path = path.as_ref().to_path_buf();
        let fail = |source| LocalError {
            path: path.display().to_string(),
            source,
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| fail(sqlx::Error::Io(e)))?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(fail)?
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // A few connections: the outbox dispatcher, the consumer and a status
        // reader may work at once; writes queue on SQLite's lock.
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(fail)?;
        sqlx::migrate!("./migrations")
            .run(&pool)
            .await
            .map_err(|e| fail(e.into()))?;
        Ok(Self { pool, path })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(crate) fn error(&self, source: sqlx::Error) -> LocalError {
        LocalError {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// The saved cursor called `name`, if any.
    pub async fn cursor(&self, name: &str) -> Result<Option<u64>, LocalError> {
        let row = sqlx::query("SELECT cursor FROM cursors WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.error(e))?;
        Ok(row.map(|r| r.get::<i64, _>(0).max(0) as u64))
    }

    /// Saves the cursor called `name`.
    pub async fn save_cursor(&self, name: &str, cursor: u64) -> Result<(), LocalError> {
        sqlx::query(
            "INSERT INTO cursors (name, cursor, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET cursor = excluded.cursor, \
             updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(i64::try_from(cursor).unwrap_or(i64::MAX))
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Removes the saved cursor called `name` (a reader that will not come back,
    /// such as one `switchboard mcp` session's).
    pub async fn forget_cursor(&self, name: &str) -> Result<(), LocalError> {
        sqlx::query("DELETE FROM cursors WHERE name = ?")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// A value a running process published about itself (see
    /// [`LocalDb::publish`]), with when it did.
    pub async fn published(&self, name: &str) -> Result<Option<(String, i64)>, LocalError> {
        let row = sqlx::query("SELECT value, updated_at FROM agent_state WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.error(e))?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Publishes `value` under `name` for other processes (`switchboard agent
    /// status` reads the running consumer's connection mode this way).
    pub async fn publish(&self, name: &str, value: &str) -> Result<(), LocalError> {
        sqlx::query(
            "INSERT INTO agent_state (name, value, updated_at) VALUES (?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value, \
             updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(value)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Closes the pool (waits for connections to return).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Wall-clock Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Milliseconds of a duration, saturating.
pub(crate) fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// `text` cut to at most `max` characters (the last one an ellipsis when cut).
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if text.chars().count() > max => format!("{}…", &text[..at]),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_keeps_short_text_and_cuts_long_text_to_max_chars() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "ab…");
        assert_eq!(clip("ééééé", 4).chars().count(), 4);
        assert_eq!(clip("", 3), "");
    }
}
