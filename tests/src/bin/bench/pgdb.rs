//! The PostgreSQL server of the PG parts, through an admin connection: fresh
//! databases (`sb_bench_…`, empty or copies of a template), dropped at the end; and
//! what a drain costs there (`xact_commit`, backend CPU).

use crate::report::{proc_cpu_seconds, progress};
use anyhow::{Context, Result, bail};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool};
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Every database this bench creates starts with this.
const PREFIX: &str = "sb_bench_";

/// A database this bench made.
pub(crate) struct Database {
    pub(crate) name: String,
    pub(crate) url: String,
}

/// The PostgreSQL server, through an admin connection to its admin database (so
/// reading the statistics adds nothing to a bench database's).
pub(crate) struct Pg {
    admin: String,
    pool: PgPool,
    /// Whether the server runs on this machine (its backends' CPU is readable).
    pub(crate) local: bool,
    created: Mutex<Vec<String>>,
}

impl Pg {
    pub(crate) async fn connect(admin: &str) -> Result<Self> {
        let opts = PgConnectOptions::from_str(admin).context("parsing the PostgreSQL URL")?;
        let host = opts.get_host().to_owned();
        let local = host.starts_with('/') || ["localhost", "127.0.0.1", "::1"].contains(&&*host);
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts)
            .await
            .with_context(|| format!("connecting to PostgreSQL at {host}"))?;
        let pg = Self {
            admin: admin.to_owned(),
            pool,
            local,
            created: Mutex::new(Vec::new()),
        };
        let leftover: Vec<String> =
            sqlx::query_scalar("SELECT datname::text FROM pg_database WHERE datname LIKE $1")
                .bind(format!("{}%", PREFIX.replace('_', "\\_")))
                .fetch_all(&pg.pool)
                .await?;
        if !leftover.is_empty() {
            progress(format_args!(
                "PG: dropping what an earlier run left: {}",
                leftover.join(", ")
            ));
            pg.created.lock().expect("lock").extend(leftover);
            pg.drop_all().await?;
        }
        Ok(pg)
    }

    pub(crate) async fn exec(&self, sql: &str) -> Result<()> {
        sqlx::query(AssertSqlSafe(sql.to_owned()))
            .execute(&self.pool)
            .await
            .with_context(|| format!("running {sql}"))?;
        Ok(())
    }

    /// A new database `sb_bench_…`: empty, or a copy of `template`.
    pub(crate) async fn create(&self, template: Option<&str>) -> Result<Database> {
        let name = format!("{PREFIX}{}", uuid::Uuid::new_v4().simple());
        let Some(template) = template else {
            self.exec(&format!("CREATE DATABASE {name}")).await?;
            return Ok(self.created(name));
        };
        // The copy needs the template to have no session; a pool just closed may
        // still be logging out.
        for attempt in 0.. {
            sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(template)
            .execute(&self.pool)
            .await?;
            match self
                .exec(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
                .await
            {
                Ok(()) => break,
                Err(_) if attempt < 20 => tokio::time::sleep(Duration::from_millis(250)).await,
                Err(e) => return Err(e),
            }
        }
        Ok(self.created(name))
    }

    fn created(&self, name: String) -> Database {
        self.created.lock().expect("lock").push(name.clone());
        Database {
            url: switchboard_tests::with_database(&self.admin, &name),
            name,
        }
    }

    pub(crate) async fn drop_all(&self) -> Result<()> {
        let names = std::mem::take(&mut *self.created.lock().expect("lock"));
        for name in names {
            self.exec(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await?;
        }
        Ok(())
    }

    pub(crate) async fn xact_commit(&self, db: &str) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = $1")
                .bind(db)
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// CPU seconds so far of each backend connected to `db` (empty if not local).
    pub(crate) async fn backend_cpu(&self, db: &str) -> Result<HashMap<i32, f64>> {
        if !self.local {
            return Ok(HashMap::new());
        }
        let pids: Vec<i32> =
            sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
                .bind(db)
                .fetch_all(&self.pool)
                .await?;
        Ok(pids
            .into_iter()
            .filter_map(|pid| Some((pid, proc_cpu_seconds(&pid.to_string())?)))
            .collect())
    }

    /// Waits until no session is connected to `db` (each flushes its statistics as
    /// it exits); after 15 s, ends the ones left.
    pub(crate) async fn settle(&self, db: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let sessions: i64 =
                sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE datname = $1")
                    .bind(db)
                    .fetch_one(&self.pool)
                    .await?;
            if sessions == 0 {
                return Ok(());
            }
            if Instant::now() > deadline + Duration::from_secs(5) {
                bail!("{sessions} sessions stay connected to {db}");
            }
            if Instant::now() > deadline {
                sqlx::query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                )
                .bind(db)
                .execute(&self.pool)
                .await?;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
