//! R1: bulk replay of every quarantined event of an agent (10,000 in a full run) as a
//! server job (`POST /api/v1/ops/jobs`, unpaced), followed on the operator stream
//! until it completes, while a prober keeps sending messages to another agent one at
//! a time. Reports the job's time and events/s, and the prober's send latency during
//! the job next to the same prober on the same idle server: the job must not block
//! other requests.
//!
//! Baseline: the job's SQL in a raw sqlx loop over a copy of the same database:
//! batches of the same size, each one `BEGIN IMMEDIATE` transaction that selects the
//! next quarantined ids, updates each event, writes its history row and the audit
//! count. Statements copied from `crates/store/src/statements/bulk.rs`.

use crate::Settings;
use crate::report::{Row, cpu_seconds, progress};
use crate::server::{BenchServer, DB_FILE, now_ms};
use crate::w2::{AGENT, Template};
use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};
use switchboard_sdk::proto::{
    BulkAction, EventFilter, EventStatus, Job, JobState, SendMessage, StartJob,
};
use switchboard_sdk::{Client, new_idempotency_key};
use tokio::sync::watch;

/// Events per batch: the server's `jobs::BATCH`.
const BATCH: i64 = 500;
/// Sends the prober makes on the idle server.
const IDLE_SENDS: usize = 200;

/// The prober's send latencies, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Responsiveness {
    pub(crate) idle_sends: usize,
    pub(crate) idle_p50_ms: f64,
    pub(crate) idle_p99_ms: f64,
    pub(crate) during_sends: usize,
    pub(crate) during_p50_ms: f64,
    pub(crate) during_p99_ms: f64,
    pub(crate) during_max_ms: f64,
    /// `job` events the stream delivered while the job ran.
    pub(crate) progress_events: usize,
}

pub(crate) async fn run(s: &Settings) -> Result<(Row, Responsiveness)> {
    let events = if s.quick { 2_000 } else { 10_000 };
    progress(format_args!(
        "R1: pre-loading {events} quarantined events into a template database"
    ));
    let template = Template::build(&s.dir, events).await?;
    quarantine_all(template.dir.path()).await?;

    // Repetitions alternate the side that goes first; each side reports its best.
    let reps = if s.quick { 1 } else { 2 };
    let (mut raw_runs, mut server_runs) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        if rep % 2 == 1 {
            server_runs.push(server_replay(s, &template, events).await?);
        }
        let raw = raw_replay(template.copy(&s.dir)?.path(), events).await?;
        progress(format_args!(
            "R1 raw sqlx batches:       {:>6.0} events/s ({:.2} s)",
            events as f64 / raw.0,
            raw.0
        ));
        raw_runs.push(raw);
        if rep % 2 == 0 {
            server_runs.push(server_replay(s, &template, events).await?);
        }
    }
    let raw = raw_runs
        .iter()
        .copied()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .context("no raw run")?;
    let (seconds, cpu, responsiveness) = server_runs
        .into_iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .context("no server run")?;
    let per_sec = events as f64 / seconds;
    let base_per_sec = events as f64 / raw.0;
    let row = Row {
        workload: "R1",
        variant: "replay_job".to_owned(),
        description: format!(
            "replay of {events} quarantined events as an unpaced server job (batches of \
             {BATCH}), from POST /ops/jobs to the stream's completed job event, while a \
             prober sends one message at a time to another agent"
        ),
        baseline: format!(
            "raw sqlx loop, the job's SQL in batches of {BATCH}, one BEGIN IMMEDIATE per batch, no HTTP"
        ),
        messages: events as u64,
        seconds,
        msgs_per_sec: per_sec,
        baseline_messages: events as u64,
        baseline_seconds: raw.0,
        baseline_msgs_per_sec: base_per_sec,
        ratio: per_sec / base_per_sec,
        goal: None,
        goal_met: None,
        cpu_us_per_msg: (cpu > 0.0).then(|| cpu * 1e6 / events as f64),
        baseline_cpu_us_per_msg: (raw.1 > 0.0).then(|| raw.1 * 1e6 / events as f64),
        samples: vec![per_sec],
        baseline_samples: vec![base_per_sec],
        quick: s.quick,
        latency: None,
    };
    Ok((row, responsiveness))
}

/// Setup, not measured: every pending event of the template becomes quarantined, as
/// if its attempts ran out.
async fn quarantine_all(dir: &Path) -> Result<()> {
    let url = format!("sqlite://{}", dir.join(DB_FILE).display());
    let pool = crate::raw::writer(&url).await?;
    sqlx::query(
        "UPDATE events SET status = 'quarantined', attempts = max_attempts, \
         last_error = 'bench: attempts ran out' WHERE status = 'pending'",
    )
    .execute(&pool)
    .await?;
    // Every copy starts from a checkpointed file, not a long WAL.
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&pool)
        .await?;
    pool.close().await;
    Ok(())
}

/// The job's statements, verbatim in substance (`statements/bulk.rs`: `push_scope`,
/// `find_targets`, `apply_to`).
async fn raw_replay(dir: &Path, expected: usize) -> Result<(f64, f64)> {
    let url = format!("sqlite://{}", dir.join(DB_FILE).display());
    let pool = crate::raw::writer(&url).await?;
    let cpu = cpu_seconds();
    let start = Instant::now();
    let audit: i64 = sqlx::query_scalar(
        "INSERT INTO audit_log (tenant_id, actor, action, filter, count, at, job_state, job_total) \
         SELECT tenant_id, 'operator', 'replay', '{}', 0, ?, 'running', ? FROM agents WHERE name = ? \
         RETURNING id",
    )
    .bind(now_ms())
    .bind(expected as i64)
    .bind(AGENT)
    .fetch_one(&pool)
    .await?;
    let mut after = String::new();
    let mut done = 0usize;
    loop {
        let now = now_ms();
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT e.id, e.agent_id, e.seq FROM events e JOIN agents a ON a.id = e.agent_id \
             WHERE e.status IN ('quarantined') AND a.name = ? AND e.status = 'quarantined' \
             AND e.id > ? ORDER BY e.id LIMIT ?",
        )
        .bind(AGENT)
        .bind(&after)
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        for (id, _, _) in &rows {
            // The row's claim and ack steps, to move them into history rows first
            // (`EventStatements::move_steps`; a quarantined event holds none).
            sqlx::query(
                "SELECT id, created_at, sender_agent_id, sender_name, claimed_at, claimed_by, \
                 attempts, max_attempts, completed_at FROM events WHERE id = ?",
            )
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE events SET status = 'pending', attempts = 0, claim_token = NULL, \
                 lease_expires_at = NULL, available_at = ?1, updated_at = ?1 WHERE id = ?2",
            )
            .bind(now)
            .bind(id)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO event_history (event_id, at, action, actor, detail) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(now)
            .bind("replayed")
            .bind("operator")
            .bind(Option::<String>::None)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("UPDATE audit_log SET count = count + ? WHERE id = ?")
            .bind(rows.len() as i64)
            .bind(audit)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        done += rows.len();
        match rows.last() {
            Some((id, ..)) if rows.len() as i64 == BATCH => after = id.clone(),
            _ => break,
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    pool.close().await;
    ensure!(
        done == expected,
        "the raw loop replayed {done} of {expected}"
    );
    Ok((seconds, cpu))
}

async fn server_replay(
    s: &Settings,
    template: &Template,
    events: usize,
) -> Result<(f64, f64, Responsiveness)> {
    let server = BenchServer::start(template.copy(&s.dir)?).await?;
    server.agent("probe").await?;
    let op = server.operator.clone();

    let idle = probe_n(&op, IDLE_SENDS).await?;

    let mut stream = op.ops_stream().await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let prober = tokio::spawn(probe_until(op.clone(), stop_rx));
    let cpu = cpu_seconds();
    let start = Instant::now();
    let job = op
        .start_job(&StartJob {
            action: BulkAction::Replay,
            ids: None,
            filter: Some(EventFilter {
                agent: Some(AGENT.to_owned()),
                status: Some(EventStatus::Quarantined),
                ..EventFilter::default()
            }),
            rate_per_second: None,
        })
        .await?;
    ensure!(
        job.total == events as u64,
        "the job covers {} of {events}",
        job.total
    );
    let mut progress_events = 0;
    let ended = loop {
        let event = tokio::time::timeout(Duration::from_secs(300), stream.next())
            .await
            .context("no job event within 300 s")?
            .context("the operator stream ended")??;
        if event.event != "job" {
            continue;
        }
        let j: Job = event.json()?;
        if j.job_id != job.job_id {
            continue;
        }
        progress_events += 1;
        if !j.state.is_live() {
            break j;
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let _ = stop_tx.send(true);
    let during = prober.await??;
    server.stop().await?;
    if ended.state != JobState::Completed || ended.done != events as u64 {
        bail!(
            "the job ended {:?} after {} of {events}",
            ended.state,
            ended.done
        );
    }
    progress(format_args!(
        "R1 switchboard replay job: {:>6.0} events/s ({seconds:.2} s)",
        events as f64 / seconds
    ));
    let (idle_p50, idle_p99, _) = percentiles(&idle);
    let (p50, p99, max) = percentiles(&during);
    Ok((
        seconds,
        cpu,
        Responsiveness {
            idle_sends: idle.len(),
            idle_p50_ms: idle_p50,
            idle_p99_ms: idle_p99,
            during_sends: during.len(),
            during_p50_ms: p50,
            during_p99_ms: p99,
            during_max_ms: max,
            progress_events,
        },
    ))
}

async fn send_once(op: &Client) -> Result<f64> {
    let started = Instant::now();
    let message = SendMessage {
        payload: crate::server::payload(0),
        ..SendMessage::default()
    };
    op.send_message("probe", &message, &new_idempotency_key())
        .await?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

async fn probe_n(op: &Client, n: usize) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(send_once(op).await?);
    }
    Ok(out)
}

async fn probe_until(op: Client, stop: watch::Receiver<bool>) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    while !*stop.borrow() {
        out.push(send_once(&op).await?);
    }
    Ok(out)
}

/// p50, p99 and max of `ms` (0 when empty).
fn percentiles(ms: &[f64]) -> (f64, f64, f64) {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() - 1) as f64 * q).round() as usize]
        }
    };
    (at(0.5), at(0.99), v.last().copied().unwrap_or(0.0))
}

impl Responsiveness {
    pub(crate) fn print(&self) {
        println!(
            "R1 other requests during the job: {} sends, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
             (idle server: {} sends, p50 {:.1} ms, p99 {:.1} ms); {} progress events on the stream",
            self.during_sends,
            self.during_p50_ms,
            self.during_p99_ms,
            self.during_max_ms,
            self.idle_sends,
            self.idle_p50_ms,
            self.idle_p99_ms,
            self.progress_events
        );
    }
}
