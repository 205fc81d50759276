//! W2: drain one agent's pre-loaded inbox over HTTP. `consumers` SDK clients (the
//! agent's own token) loop: claim(limit = batch), then ack each claimed event, until
//! a claim comes back empty.
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
use crate::report::{Row, cpu_seconds, progress};
use crate::server::{BenchServer, DB_FILE, now_ms, payload, preload, temp_dir};
use anyhow::{Result, ensure};
use std::path::Path;
use std::time::Instant;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{AgentId, ClaimRequest};
use switchboard_server::Hooks;
use switchboard_server::http::auth::{agent_scopes, generate_token, hash_token};
use switchboard_server::store::Store;
use switchboard_server::store::sqlite::SqliteStore;
use tempfile::TempDir;
use tokio::task::JoinSet;

/// The goal for batch 16, as a ratio to the raw loop.
const GOAL_BATCH_16: f64 = 0.5;
/// The name of the agent whose inbox is drained.
pub(crate) const AGENT: &str = "w2";

/// One drain: events acked, wall time, and process CPU time spent meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drain {
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    pub(crate) cpu_seconds: f64,
}

impl Drain {
    fn per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds
    }

    fn cpu_us_per_msg(&self) -> Option<f64> {
        (self.cpu_seconds > 0.0).then(|| self.cpu_seconds * 1e6 / self.messages as f64)
    }
}

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
    let best = |drains: &[Drain]| {
        drains
            .iter()
            .copied()
            .max_by(|a, b| a.per_sec().total_cmp(&b.per_sec()))
            .expect("at least one repetition")
    };
    let (srv, base) = (best(server), best(raw));
    let ratio = srv.per_sec() / base.per_sec();
    let goal = (batch == 16).then_some(GOAL_BATCH_16);
    Row {
        workload: "W2",
        variant: format!("batch_{batch}"),
        description: format!(
            "{} pre-loaded events (~{} B payload) of one agent drained by {} concurrent \
             consumers: claim(limit={batch}) then ack each, over HTTP with the agent token; \
             best of {}",
            s.w2_events,
            payload(0).to_string().len(),
            s.w2_consumers,
            server.len()
        ),
        baseline: format!(
            "raw sqlx loop, same SQL and pragmas (WAL, synchronous FULL), one writer \
             connection, BEGIN IMMEDIATE per claim and per ack, {} consumers, no HTTP",
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
    let client = Client::new(&server.url, template.token.as_str())?;
    let cpu = cpu_seconds();
    let start = Instant::now();
    let mut set = JoinSet::new();
    for _ in 0..s.w2_consumers {
        let client = client.clone();
        set.spawn(async move {
            let request = ClaimRequest {
                limit: Some(batch),
                lease_seconds: None,
            };
            let mut done = 0u64;
            loop {
                let claimed = client.claim(AGENT, &request).await?;
                if claimed.events.is_empty() {
                    return anyhow::Ok(done);
                }
                for e in claimed.events {
                    client.ack(AGENT, e.event.event_id, e.claim_token).await?;
                    done += 1;
                }
            }
        });
    }
    let mut messages = 0;
    while let Some(done) = set.join_next().await {
        messages += done??;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu_seconds() - cpu;
    server.stop().await?;
    ensure!(
        messages == s.w2_events as u64,
        "the consumers acked {messages} of {} events",
        s.w2_events
    );
    let drain = Drain {
        messages,
        seconds,
        cpu_seconds,
    };
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
        let store = SqliteStore::open(&url, "off", Hooks::default()).await?;
        let now = now_ms();
        let tenant = store.ensure_tenant("default", now).await?;
        let token = generate_token("sb_ag_");
        let agent = store
            .create_agent(tenant, AGENT, &hash_token(&token), &agent_scopes(), now)
            .await?;
        preload(&store, tenant, agent.id, events).await?;
        store.close().await;
        Ok(Self {
            dir,
            agent: agent.id,
            token,
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
