//! Test support, for this crate's tests and (feature `testing`) the server's.
//!
//! A fresh database of its own on the PostgreSQL or MariaDB server whose admin URL
//! an environment variable gives (`cargo xtask test` sets them), for the store's
//! tests that need a server: made at the start, dropped at the end.

use sqlx::{AssertSqlSafe, Database, Executor, Pool};

pub struct ServerDb<DB: Database> {
    admin: Pool<DB>,
    name: String,
    /// The database's URL: the admin URL with its database replaced.
    pub url: String,
}

impl<DB: Database> ServerDb<DB>
where
    for<'e> &'e Pool<DB>: Executor<'e, Database = DB>,
{
    /// `sb_t_<prefix>_…` on the server `var` names.
    pub async fn create(var: &str, prefix: &str) -> Self {
        let admin_url = std::env::var(var)
            .unwrap_or_else(|_| panic!("set {var} to an admin URL (cargo xtask test does)"));
        let name = format!("sb_t_{prefix}_{}", uuid::Uuid::new_v4().simple());
        let admin = Pool::<DB>::connect(&admin_url).await.expect("connect");
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await
            .expect("create the database");
        let (base, _) = admin_url
            .rsplit_once('/')
            .expect("an admin URL ends in /database");
        let url = format!("{base}/{name}");
        Self { admin, name, url }
    }

    /// Drops it; `how` is what follows the name (PostgreSQL: ` WITH (FORCE)`, so
    /// sessions left open do not hold it).
    pub async fn drop(self, how: &str) {
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {}{how}",
            self.name
        )))
        .execute(&self.admin)
        .await
        .expect("drop the database");
        self.admin.close().await;
    }
}
