//! The database under a [`TestServer`]: a SQLite file of its own by default, or a
//! fresh database on the PostgreSQL (`SWITCHBOARD_TEST_POSTGRES`) or MariaDB /
//! MySQL (`SWITCHBOARD_TEST_MYSQL`) server the run is given, so the same tests
//! are the conformance suite of every backend. `cargo xtask test` sets one at a
//! time; with both set, PostgreSQL is used.

use crate::TestServer;
use sqlx::Connection;

/// The backend this run's servers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    pub fn current() -> Self {
        if postgres_url().is_some() {
            Self::Postgres
        } else if mysql_url().is_some() {
            Self::MySql
        } else {
            Self::Sqlite
        }
    }

    /// What `/api/v1/system` names it: `sqlite`, `postgres` or `mysql`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
            Self::MySql => "mysql",
        }
    }

    /// Whether several server instances may share one database.
    pub fn shared(self) -> bool {
        self != Self::Sqlite
    }
}

fn env_url(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|u| !u.is_empty())
}

/// The PostgreSQL admin URL the suite runs against, if any.
pub fn postgres_url() -> Option<String> {
    env_url("SWITCHBOARD_TEST_POSTGRES")
}

/// The MariaDB / MySQL admin URL the suite runs against, if any.
pub fn mysql_url() -> Option<String> {
    env_url("SWITCHBOARD_TEST_MYSQL")
}

/// `sqlite`, `postgres` or `mysql`: the backend this run's servers use.
pub fn backend() -> &'static str {
    Backend::current().name()
}

/// A fresh database on the run's server. It is not dropped with the fixture: DROP
/// DATABASE waits on every session using it, including those of servers still
/// shutting down, and a test must not wait on that. `cargo xtask test` drops every
/// `sb_t_…` database after the suite (and before the next).
pub struct TestDatabase {
    pub backend: Backend,
    pub name: String,
    pub url: String,
}

impl TestDatabase {
    /// `None` on SQLite (the server's file is the database).
    pub async fn create() -> Option<Self> {
        let name = format!("sb_t_{}", uuid::Uuid::new_v4().simple());
        let (backend, admin) = match Backend::current() {
            Backend::Sqlite => return None,
            Backend::Postgres => (Backend::Postgres, postgres_url()?),
            Backend::MySql => (Backend::MySql, mysql_url()?),
        };
        // As the SQLite servers run `synchronous = normal`: durability across a
        // crash of the machine is not under test, and a flush per commit only slows
        // the suite (MariaDB's flush is server-wide; `cargo xtask mariadb` sets it).
        let sql = match backend {
            Backend::Postgres => vec![
                format!("CREATE DATABASE {name}"),
                format!("ALTER DATABASE {name} SET synchronous_commit = off"),
            ],
            _ => vec![format!("CREATE DATABASE {name}")],
        };
        for statement in sql {
            admin_execute(backend, &admin, &statement).await;
        }
        let url = crate::with_database(&admin, &name);
        Some(Self { backend, name, url })
    }
}

impl TestDatabase {
    /// Ends every session on this database but the caller's, as an operator's
    /// `pg_terminate_backend` or MariaDB's `KILL CONNECTION` would (PostgreSQL sends
    /// the backend's FATAL `57P01` first; MariaDB just closes); how many it ended.
    pub async fn kill_sessions(&self) -> u64 {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url)
                    .await
                    .expect("connect to the test database");
                let killed: i64 = sqlx::query_scalar(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
                     FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                )
                .bind(&self.name)
                .fetch_one(&mut conn)
                .await
                .expect("terminate the database's sessions");
                let _ = conn.close().await;
                killed as u64
            }
            Backend::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.url)
                    .await
                    .expect("connect to the test database");
                let ids: Vec<i64> = sqlx::query_scalar(
                    "SELECT id FROM information_schema.processlist \
                     WHERE db = ? AND id <> CONNECTION_ID()",
                )
                .bind(&self.name)
                .fetch_all(&mut conn)
                .await
                .expect("list the database's sessions");
                let mut killed = 0;
                for id in ids {
                    // Gone meanwhile is as good as killed.
                    if sqlx::raw_sql(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                        .execute(&mut conn)
                        .await
                        .is_ok()
                    {
                        killed += 1;
                    }
                }
                let _ = conn.close().await;
                killed
            }
            Backend::Sqlite => unreachable!("SQLite has no sessions to kill"),
        }
    }
}

async fn admin_execute(backend: Backend, admin: &str, sql: &str) {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    match backend {
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(admin)
                .await
                .expect("connect to the test PostgreSQL (SWITCHBOARD_TEST_POSTGRES)");
            sqlx::raw_sql(sql)
                .execute(&mut conn)
                .await
                .expect("create or change a test database");
            let _ = conn.close().await;
        }
        Backend::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(admin)
                .await
                .expect("connect to the test MariaDB (SWITCHBOARD_TEST_MYSQL)");
            sqlx::raw_sql(sql)
                .execute(&mut conn)
                .await
                .expect("create or change a test database");
            let _ = conn.close().await;
        }
        Backend::Sqlite => unreachable!("SQLite has no admin server"),
    }
}

/// The rows of `rows` as text, column by column.
fn texts<R: sqlx::Row>(rows: Vec<R>) -> Vec<Vec<Option<String>>>
where
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    usize: sqlx::ColumnIndex<R>,
{
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| r.try_get(i).expect("a text column"))
                .collect()
        })
        .collect()
}

/// Runs `$body` with `$conn`, a connection of the right type to `$server`'s
/// database, and closes it after.
macro_rules! with_connection {
    ($server:expr, $conn:ident => $body:expr) => {{
        let server = $server;
        match server.backend() {
            Backend::Sqlite => {
                let url = format!("sqlite://{}", server.db_path.display());
                let mut $conn = sqlx::SqliteConnection::connect(&url).await.expect("open");
                let out = $body;
                let _ = $conn.close().await;
                out
            }
            Backend::Postgres => {
                let url = &server.database_url;
                let mut $conn = sqlx::PgConnection::connect(url).await.expect("connect");
                let out = $body;
                let _ = $conn.close().await;
                out
            }
            Backend::MySql => {
                let url = &server.database_url;
                let mut $conn = sqlx::MySqlConnection::connect(url).await.expect("connect");
                let out = $body;
                let _ = $conn.close().await;
                out
            }
        }
    }};
}

impl TestServer {
    /// The backend this server runs on.
    pub fn backend(&self) -> Backend {
        if self.database_url.starts_with("postgres") {
            Backend::Postgres
        } else if self.database_url.starts_with("mysql") {
            Backend::MySql
        } else {
            Backend::Sqlite
        }
    }

    /// Everything the server stored, as bytes to scan for what must not be there
    /// (I11): every file of the SQLite database (main file, WAL, shared memory), or
    /// every row of every table as text.
    pub async fn stored_bytes(&self) -> Vec<u8> {
        match self.backend() {
            Backend::Sqlite => {
                let dir = self.db_path.parent().expect("db dir").to_owned();
                let mut bytes = Vec::new();
                for entry in std::fs::read_dir(&dir).expect("db dir is readable") {
                    let path = entry.expect("entry").path();
                    if path.is_file() {
                        bytes.extend(std::fs::read(&path).expect("db file is readable"));
                    }
                }
                bytes
            }
            Backend::Postgres => {
                let pool = sqlx::PgPool::connect(&self.database_url)
                    .await
                    .expect("connect");
                let tables: Vec<String> = sqlx::query_scalar(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = 'public'",
                )
                .fetch_all(&pool)
                .await
                .expect("list tables");
                let mut bytes = Vec::new();
                for table in tables {
                    let text: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                        "SELECT string_agg(t::text, E'\\n') FROM \"{table}\" t"
                    )))
                    .fetch_one(&pool)
                    .await
                    .expect("read a table");
                    bytes.extend(text.unwrap_or_default().into_bytes());
                }
                pool.close().await;
                bytes
            }
            Backend::MySql => {
                let pool = sqlx::MySqlPool::connect(&self.database_url)
                    .await
                    .expect("connect");
                let columns: Vec<(String, String)> = sqlx::query_as(
                    "SELECT CAST(table_name AS CHAR), CAST(column_name AS CHAR) \
                     FROM information_schema.columns WHERE table_schema = DATABASE() \
                     ORDER BY table_name, ordinal_position",
                )
                .fetch_all(&pool)
                .await
                .expect("list columns");
                let mut bytes = Vec::new();
                for (table, column) in columns {
                    let values: Vec<Option<Vec<u8>>> = sqlx::query_scalar(sqlx::AssertSqlSafe(
                        format!("SELECT CAST(`{column}` AS BINARY) FROM `{table}`"),
                    ))
                    .fetch_all(&pool)
                    .await
                    .expect("read a column");
                    for value in values.into_iter().flatten() {
                        bytes.extend(value);
                        bytes.push(b'\n');
                    }
                }
                pool.close().await;
                bytes
            }
        }
    }

    /// The rows of `sql` (text columns) read straight from the server's database.
    pub async fn stored_rows(&self, sql: &'static str) -> Vec<Vec<Option<String>>> {
        with_connection!(self, conn => {
            texts(sqlx::query(sql).fetch_all(&mut conn).await.expect("query"))
        })
    }

    /// The one integer `sql` reads (`SELECT COUNT(*) …`), straight from the server's
    /// database, without locks.
    pub async fn stored_number(&self, sql: &'static str) -> i64 {
        with_connection!(self, conn => {
            sqlx::query_scalar(sql).fetch_one(&mut conn).await.expect("query")
        })
    }

    /// Runs `sql` on the server's database: rows only another process could have
    /// left behind (a job of an instance that died), which no API writes.
    pub async fn seed(&self, sql: &str) {
        let mysql = self.backend() == Backend::MySql;
        with_connection!(self, conn => {
            if mysql {
                // The server's sessions quote names as the other dialects do.
                sqlx::raw_sql("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
                    .execute(&mut conn)
                    .await
                    .expect("sql_mode");
            }
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut conn)
                .await
                .expect("seed");
        })
    }

    /// Takes the server's database away while the server keeps running, until
    /// [`DatabaseOutage::end`]:
    /// - PostgreSQL: the database refuses connections and every one it had is
    ///   terminated;
    /// - MariaDB / MySQL: another session holds every table locked (`LOCK TABLES …
    ///   WRITE`), so every statement on them waits out the server's statement time
    ///   limit (15 s) and fails;
    /// - SQLite: another connection holds the file's write lock, so every write waits
    ///   out the busy timeout (10 s) and fails.
    pub async fn database_outage(&self) -> DatabaseOutage {
        match self.backend() {
            Backend::Postgres => {
                let name = self
                    .database
                    .as_ref()
                    .map(|d| d.name.clone())
                    .expect("the fixture made the database");
                let admin = postgres_url().expect("a PostgreSQL server");
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .expect("connect as admin");
                for sql in [
                    format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"),
                    format!(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                         WHERE datname = '{name}'"
                    ),
                ] {
                    sqlx::query(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await
                        .expect("take the database away");
                }
                DatabaseOutage::Postgres(conn, name)
            }
            Backend::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.database_url)
                    .await
                    .expect("connect");
                let tables: Vec<String> = sqlx::query_scalar(
                    "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                     WHERE table_schema = DATABASE()",
                )
                .fetch_all(&mut conn)
                .await
                .expect("list tables");
                let locks: Vec<String> = tables.iter().map(|t| format!("`{t}` WRITE")).collect();
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "LOCK TABLES {}",
                    locks.join(", ")
                )))
                .execute(&mut conn)
                .await
                .expect("lock every table");
                DatabaseOutage::MySql(conn)
            }
            Backend::Sqlite => {
                let url = format!("sqlite://{}", self.db_path.display());
                let mut conn = sqlx::SqliteConnection::connect(&url).await.expect("open");
                sqlx::query("BEGIN EXCLUSIVE")
                    .execute(&mut conn)
                    .await
                    .expect("take the write lock");
                DatabaseOutage::Sqlite(conn)
            }
        }
    }
}

/// The database of a [`TestServer`], taken away by [`TestServer::database_outage`].
pub enum DatabaseOutage {
    Postgres(sqlx::PgConnection, String),
    MySql(sqlx::MySqlConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl DatabaseOutage {
    /// Gives the database back.
    pub async fn end(self) {
        match self {
            Self::Postgres(mut conn, name) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "ALTER DATABASE {name} ALLOW_CONNECTIONS true"
                )))
                .execute(&mut conn)
                .await
                .expect("give the database back");
                let _ = conn.close().await;
            }
            Self::MySql(mut conn) => {
                sqlx::raw_sql("UNLOCK TABLES")
                    .execute(&mut conn)
                    .await
                    .expect("unlock the tables");
                let _ = conn.close().await;
            }
            Self::Sqlite(mut conn) => {
                sqlx::query("ROLLBACK")
                    .execute(&mut conn)
                    .await
                    .expect("release the write lock");
                let _ = conn.close().await;
            }
        }
    }
}
