//! W2: drain one agent's pre-loaded inbox over HTTP. `consumers` SDK clients (the
//! agent's own token) loop: claim(limit = batch), then ack what it claimed (one batch
//! ack, one transaction), until a claim comes back empty.
//!
//! Baseline: [`crate::raw`], the same SQL in a raw sqlx loop with the same consumer
//! count and no HTTP. The goal: batch 16 at ≥ 0.5× the raw loop.
//!
//! Terms:
//! - *template*: a database pre-loaded once through `SqliteStore` (tenant, the agent
//!   and its token, `events` pending events). Every drain, server or raw, starts
//!   from its own copy of it, so both sides read the same file and pre-loading is
//!   neither timed nor repeated.
//! - *repetition*: one raw drain and one server drain; the first side alternates,
//!   so a change in machine load hits both. A row reports each side's best.

use crate::Settings;
use crate::drain::{self, Drain, Http, best};
use crate::report::{Row, progress};
use crate::server::{BenchServer, DB_FILE, now_ms, payload, preload, temp_dir};
use anyhow::Result;
use futures::{StreamExt, TryStreamExt};
use std::path::Path;
use switchboard_sdk::proto::AgentId;
use switchboard_server::Hooks;
use switchboard_server::http::auth::{agent_scopes, generate_token, hash_token};
use switchboard_server::store::Store;
use switchboard_server::store::sqlite::SqliteStore;
use tempfile::TempDir;

/// The goal for batch 16, as a ratio to the raw loop.
const GOAL_BATCH_16: f64 = 0.5;
/// The name of the agent whose inbox is drained.
pub(crate) const AGENT: &str = "w2";

pub(crate) async fn run(s: &Settings) -> Result<Vec<Row>> {
    let reps = if s.quick { 1 } else { 2 };
    progress(format_args!(
        "W2: pre-loading {} events into a template database",
        s.w2_events
    ));
    let template = Template::build(&s.dir, s.w2_events).await?;
    let mut rows = Vec::new();
    for batch in [1, 16] {
        let (mut raw, mut server) = (Vec::new(), Vec::new());
        for rep in 0..reps {
            if rep % 2 == 0 {
                raw.push(raw_drain(s, &template, batch).await?);
                server.push(server_drain(s, &template, batch).await?);
            } else {
                server.push(server_drain(s, &template, batch).await?);
                raw.push(raw_drain(s, &template, batch).await?);
            }
        }
        rows.push(row(s, batch, &server, &raw));
    }
    Ok(rows)
}

fn row(s: &Settings, batch: u32, server: &[Drain], raw: &[Drain]) -> Row {
    let (srv, base) = (best(server, Drain::per_sec), best(raw, Drain::per_sec));
    let ratio = srv.per_sec() / base.per_sec();
    let goal = (batch == 16).then_some(GOAL_BATCH_16);
    Row {
        workload: "W2",
        variant: format!("batch_{batch}"),
        description: format!(
            "{} pre-loaded events (~{} B payload) of one agent drained by {} concurrent \
             consumers: claim(limit={batch}) then one batch ack, over HTTP with the agent token; \
             best of {}",
            s.w2_events,
            payload(0).to_string().len(),
            s.w2_consumers,
            server.len()
        ),
        baseline: format!(
            "raw sqlx loop, same SQL and pragmas (WAL, synchronous FULL), one writer \
             connection, BEGIN IMMEDIATE per claim and per claim's acks, {} consumers, no HTTP",
            s.w2_consumers
        ),
        messages: srv.messages,
        seconds: srv.seconds,
        msgs_per_sec: srv.per_sec(),
        baseline_messages: base.messages,
        baseline_seconds: base.seconds,
        baseline_msgs_per_sec: base.per_sec(),
        ratio,
        goal,
        goal_met: goal.map(|g| ratio >= g),
        cpu_us_per_msg: srv.cpu_us_per_msg(),
        baseline_cpu_us_per_msg: base.cpu_us_per_msg(),
        samples: server.iter().map(Drain::per_sec).collect(),
        baseline_samples: raw.iter().map(Drain::per_sec).collect(),
        quick: s.quick,
        latency: None,
    }
}

async fn raw_drain(s: &Settings, template: &Template, batch: u32) -> Result<Drain> {
    let dir = template.copy(&s.dir)?;
    let drain = crate::raw::drain(
        dir.path(),
        template.agent,
        batch,
        s.w2_consumers,
        s.w2_events,
    )
    .await?;
    progress(format_args!(
        "W2 batch {batch:>2} raw sqlx loop:    {:>6.0} msgs/s",
        drain.per_sec()
    ));
    Ok(drain)
}

async fn server_drain(s: &Settings, template: &Template, batch: u32) -> Result<Drain> {
    let server = BenchServer::start(template.copy(&s.dir)?).await?;
    let agents = [(AGENT.to_owned(), template.token.clone())];
    let drain = drain::run(
        Http::new(&server.url, &agents)?,
        s.w2_consumers,
        batch,
        s.w2_events,
    )
    .await;
    server.stop().await?;
    let drain = drain?;
    progress(format_args!(
        "W2 batch {batch:>2} switchboard HTTP: {:>6.0} msgs/s",
        drain.per_sec()
    ));
    Ok(drain)
}

/// The pre-loaded database every drain copies.
pub(crate) struct Template {
    pub(crate) dir: TempDir,
    pub(crate) agent: AgentId,
    /// The agent's bearer token (its hash is in the database).
    pub(crate) token: String,
}

impl Template {
    pub(crate) async fn build(parent: &Path, events: usize) -> Result<Self> {
        let dir = temp_dir(parent)?;
        let url = format!("sqlite://{}", dir.path().join(DB_FILE).display());
        // Setup only, so no fsync per event; every drain reopens with FULL.
        let store = SqliteStore::open(&url, "off", Hooks::default().store()).await?;
        let seeded = seed(&store, &[AGENT.to_owned()], events, 1).await;
        store.close().await;
        let agent = seeded?.pop().expect("one agent");
        Ok(Self {
            dir,
            agent: agent.id,
            token: agent.token,
        })
    }

    /// A fresh temp dir holding a copy of the database (and of its WAL, if closing
    /// left one; no connection is open, so the pair is consistent).
    pub(crate) fn copy(&self, parent: &Path) -> Result<TempDir> {
        let dir = temp_dir(parent)?;
        for suffix in ["", "-wal"] {
            let from = self.dir.path().join(format!("{DB_FILE}{suffix}"));
            if from.exists() {
                std::fs::copy(&from, dir.path().join(format!("{DB_FILE}{suffix}")))?;
            }
        }
        Ok(dir)
    }
}

/// An agent [`seed`] made.
pub(crate) struct Seeded {
    pub(crate) id: AgentId,
    pub(crate) name: String,
    /// Its bearer token (the database holds the hash).
    pub(crate) token: String,
}

/// Creates agents `names` in the default tenant and pre-loads `per_agent` pending
/// events into each inbox, `parallel` inboxes at a time (see [`preload`]).
pub(crate) async fn seed(
    store: &dyn Store,
    names: &[String],
    per_agent: usize,
    parallel: usize,
) -> Result<Vec<Seeded>> {
    let now = now_ms();
    let tenant = store.ensure_tenant("default", now).await?;
    futures::stream::iter(names)
        .map(|name| async move {
            let token = generate_token("sb_ag_");
            let agent = store
                .create_agent(
                    tenant,
                    name,
                    &hash_token(&token),
                    &agent_scopes(),
                    None,
                    now_ms(),
                )
                .await?;
            preload(store, tenant, agent.id, per_agent).await?;
            anyhow::Ok(Seeded {
                id: agent.id,
                name: name.clone(),
                token,
            })
        })
        .buffered(parallel.max(1))
        .try_collect()
        .await
}
