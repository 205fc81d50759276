//! MariaDB / MySQL: W1 and W2 with the server on MariaDB, and W2's raw limit on the
//! same server ([`crate::myraw`], the store's SQL in a sqlx loop).
//!
//! - *MY-W1*: W1 (see [`crate::w1`], same baseline) with the server on a fresh
//!   database.
//! - *MY-W2*: PG-W2's shape: 20,000 events over 100 agents (200 each), drained by 8
//!   consumers with claim batch 1 and 16 ([`crate::drain`]). Each drain runs on its
//!   own copy of a database pre-loaded once (MySQL has no `CREATE DATABASE …
//!   TEMPLATE`: each table is made from the template's `SHOW CREATE TABLE` and
//!   filled by `INSERT … SELECT`), so both sides read the same data and pre-loading
//!   is not timed. Repetitions alternate the order of the two sides; rows report
//!   each side's best.
//!
//! Databases are `sb_t_bench_…` (the test user of `cargo xtask mariadb` may make
//! `sb_t_…` ones), on the server's durability settings, and dropped at the end, as
//! are those a killed run left.

use crate::Settings;
use crate::drain::{self, Drain, Http};
use crate::myraw::Inboxes;
use crate::report::{Row, progress, write_json};
use crate::server::{BenchServer, payload};
use anyhow::{Context, Result};
use sqlx::{AssertSqlSafe, Connection, MySqlConnection};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;
use switchboard_server::Hooks;
use switchboard_server::store::mysql::MySqlStore;

const W2_EVENTS: usize = 20_000;
const W2_EVENTS_QUICK: usize = 2_000;
const W2_AGENTS: usize = 100;
const W2_CONSUMERS: usize = 8;
/// The store-engine issue's goal for batch 16 against the raw limit (as on
/// PostgreSQL).
const GOAL_VS_RAW: f64 = 0.8;
const PREFIX: &str = "sb_t_bench_";

/// The MariaDB server, through `admin` (a URL whose user may create `sb_t_…`
/// databases).
struct My {
    admin: String,
    created: Mutex<Vec<String>>,
}

impl My {
    async fn connect(admin: &str) -> Result<Self> {
        let my = Self {
            admin: admin.to_owned(),
            created: Mutex::new(Vec::new()),
        };
        let mut conn = my.conn().await?;
        let leftover: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
             WHERE schema_name LIKE 'sb\\_t\\_bench\\_%'",
        )
        .fetch_all(&mut conn)
        .await?;
        my.created.lock().expect("lock").extend(leftover);
        Ok(my)
    }

    async fn conn(&self) -> Result<MySqlConnection> {
        MySqlConnection::connect(&self.admin)
            .await
            .context("connecting to MariaDB")
    }

    /// A fresh empty database: (name, URL).
    async fn create(&self) -> Result<(String, String)> {
        let name = format!("{PREFIX}{}", uuid::Uuid::new_v4().simple());
        let mut conn = self.conn().await?;
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await?;
        self.created.lock().expect("lock").push(name.clone());
        let url = switchboard_tests::with_database(&self.admin, &name);
        Ok((name, url))
    }

    /// A fresh database with `template`'s tables and rows: (name, URL).
    async fn copy(&self, template: &str) -> Result<(String, String)> {
        let (name, url) = self.create().await?;
        let mut conn = self.conn().await?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = ?",
        )
        .bind(template)
        .fetch_all(&mut conn)
        .await?;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET foreign_key_checks = 0; USE {name}"
        )))
        .execute(&mut conn)
        .await?;
        for table in &tables {
            let (_, create): (String, String) = sqlx::query_as(AssertSqlSafe(format!(
                "SHOW CREATE TABLE {template}.`{table}`"
            )))
            .fetch_one(&mut conn)
            .await?;
            sqlx::raw_sql(AssertSqlSafe(create))
                .execute(&mut conn)
                .await?;
            sqlx::raw_sql(AssertSqlSafe(format!(
                "INSERT INTO `{table}` SELECT * FROM {template}.`{table}`"
            )))
            .execute(&mut conn)
            .await?;
        }
        Ok((name, url))
    }

    async fn drop_all(&self) -> Result<()> {
        let names = std::mem::take(&mut *self.created.lock().expect("lock"));
        let mut conn = self.conn().await?;
        for name in names {
            sqlx::raw_sql(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}")))
                .execute(&mut conn)
                .await?;
        }
        Ok(())
    }
}

/// Runs MY-W1 and/or MY-W2 on the server at `admin`, writes their JSON into `out`,
/// and drops every database it made.
pub(crate) async fn run(
    s: &Settings,
    admin: &str,
    w1: bool,
    w2: bool,
    out: &Path,
) -> Result<Vec<Row>> {
    let start = Instant::now();
    let my = My::connect(admin).await?;
    let result = async {
        let mut rows = Vec::new();
        if w1 {
            let (_, url) = my.create().await?;
            let mut row = crate::w1::run_on(s, "MY-W1", BenchServer::open(url, None))
                .await
                .context("MY-W1")?;
            row.description += ", server on MariaDB";
            write_json(&out.join("my-w1.json"), std::slice::from_ref(&row))?;
            rows.push(row);
        }
        if w2 {
            let w2 = run_w2(s, &my).await.context("MY-W2")?;
            write_json(&out.join("my-w2.json"), &w2)?;
            rows.extend(w2);
        }
        anyhow::Ok(rows)
    }
    .await;
    progress(format_args!("MY: dropping the bench databases"));
    let dropped = my.drop_all().await;
    progress(format_args!(
        "MY: took {:.0} s",
        start.elapsed().as_secs_f64()
    ));
    let rows = result?;
    dropped?;
    Ok(rows)
}

/// The pre-loaded database every MY-W2 drain copies.
struct Template {
    name: String,
    /// (name, token) and (id, name) of each agent, in queue order.
    tokens: Vec<(String, String)>,
    ids: Vec<(String, String)>,
    events: usize,
}

async fn run_w2(s: &Settings, my: &My) -> Result<Vec<Row>> {
    let events = if s.quick { W2_EVENTS_QUICK } else { W2_EVENTS };
    let per_agent = events / W2_AGENTS;
    progress(format_args!(
        "MY-W2: pre-loading {} events over {W2_AGENTS} agents",
        per_agent * W2_AGENTS
    ));
    let (name, url) = my.create().await?;
    let store = MySqlStore::open(&url, 8, Hooks::default().store()).await?;
    let names: Vec<String> = (0..W2_AGENTS).map(|i| format!("w2-{i:03}")).collect();
    let seeded = crate::w2::seed(&store, &names, per_agent, 8).await?;
    switchboard_server::store::Store::close(&store).await;
    let t = Template {
        name,
        tokens: seeded
            .iter()
            .map(|a| (a.name.clone(), a.token.clone()))
            .collect(),
        ids: seeded
            .iter()
            .map(|a| (a.id.to_string(), a.name.clone()))
            .collect(),
        events: per_agent * W2_AGENTS,
    };
    let reps = if s.quick { 1 } else { 2 };
    let mut rows = Vec::new();
    for batch in [1, 16] {
        let (mut server, mut raw) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            for raw_side in [rep % 2 == 0, rep % 2 == 1] {
                let d = drain_once(my, &t, raw_side, batch).await?;
                progress(format_args!(
                    "MY-W2 batch {batch:>2} {:<17} {:>6.0} msgs/s",
                    if raw_side {
                        "raw sqlx loop:"
                    } else {
                        "switchboard HTTP:"
                    },
                    d.per_sec()
                ));
                if raw_side { &mut raw } else { &mut server }.push(d);
            }
        }
        rows.push(row(s, &t, batch, &server, &raw));
    }
    Ok(rows)
}

/// One drain, by the server over HTTP or by the raw loop, on a fresh copy.
async fn drain_once(my: &My, t: &Template, raw: bool, batch: u32) -> Result<Drain> {
    let (_, url) = my.copy(&t.name).await?;
    if raw {
        let queues = Inboxes::open(&url, &t.ids).await?;
        let pool = queues.pool.clone();
        let drain = drain::run(queues, W2_CONSUMERS, batch, t.events).await;
        pool.close().await;
        drain
    } else {
        let server = BenchServer::open(url, None).await?;
        let queues = Http::new(&server.url, &t.tokens)?;
        let drain = drain::run(queues, W2_CONSUMERS, batch, t.events).await;
        server.stop().await?;
        drain
    }
}

fn row(s: &Settings, t: &Template, batch: u32, server: &[Drain], raw: &[Drain]) -> Row {
    let per_sec = |d: &Drain| d.per_sec();
    let (srv, b) = (drain::best(server, per_sec), drain::best(raw, per_sec));
    let ratio = srv.per_sec() / b.per_sec();
    let goal = (batch == 16).then_some(GOAL_VS_RAW);
    Row {
        workload: "MY-W2",
        variant: format!("batch_{batch}_vs_raw"),
        description: format!(
            "{} pre-loaded events (~{} B payload) over {W2_AGENTS} agents drained by \
             {W2_CONSUMERS} consumers: claim(limit={batch}) then ack each, over HTTP with \
             each agent's token, server on MariaDB; best of {}",
            t.events,
            payload(0).to_string().len(),
            server.len()
        ),
        baseline: format!(
            "raw sqlx loop, the store's MySQL claim and ack SQL (claim: one transaction; \
             ack: one transaction per claim), {W2_CONSUMERS} consumers, no HTTP"
        ),
        messages: srv.messages,
        seconds: srv.seconds,
        msgs_per_sec: srv.per_sec(),
        baseline_messages: b.messages,
        baseline_seconds: b.seconds,
        baseline_msgs_per_sec: b.per_sec(),
        ratio,
        goal,
        goal_met: goal.map(|g| ratio >= g),
        cpu_us_per_msg: srv.cpu_us_per_msg(),
        baseline_cpu_us_per_msg: b.cpu_us_per_msg(),
        samples: server.iter().map(Drain::per_sec).collect(),
        baseline_samples: raw.iter().map(Drain::per_sec).collect(),
        quick: s.quick,
        latency: None,
    }
}
