//! W1: enqueue over HTTP. `tasks` client tasks share one SDK client (one keep-alive
//! connection each) and send `POST /api/v1/agents/{agent}/messages` with a fresh
//! Idempotency-Key per message, round robin to [`RECIPIENTS`] agents, for a fixed
//! time, after a warm-up. Each send's latency (request to 201) is recorded.
//!
//! Baselines, each run on its own before the server:
//! - a minimal axum server with the same route that parses the same JSON body
//!   (`SendMessage`) and answers 201 with a `SendReceipt`-shaped body, driven by the
//!   same client loop: what durability, auth and idempotency cost on top of HTTP + JSON;
//! - (SQLite) the raw one-row commit loop: one connection on a fresh file in the same
//!   directory, WAL, `synchronous = FULL`, inserting one row of the same payload per
//!   transaction, one after the other. The disk's durable-commit rate; issue 16's goal
//!   is a keyed send over HTTP at least as fast (group commit lets 16 concurrent
//!   sends share one fsync).
//!
//! On SQLite the server side runs twice: with group commit (the default) and without.

use crate::Settings;
use crate::report::{Latency, Row, progress};
use crate::server::{BenchServer, payload, temp_dir};
use anyhow::{Context, Result};
use axum::extract::State;
use axum::http::StatusCode;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use switchboard_sdk::proto::{AgentId, EventId, SendMessage, SendReceipt};
use switchboard_sdk::{Client, new_idempotency_key};
use tokio::task::JoinSet;

/// The recipients of W1's sends (`w1-inbox-0` …), one per client task.
pub(crate) const RECIPIENTS: usize = 16;

fn recipient(i: usize) -> String {
    format!("w1-inbox-{}", i % RECIPIENTS)
}

/// Registers W1's recipients on `server`.
pub(crate) async fn recipients(server: &BenchServer) -> Result<()> {
    for i in 0..RECIPIENTS {
        server.agent(&recipient(i)).await?;
    }
    Ok(())
}

/// Completed operations over a wall-clock span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    /// CPU seconds of this process (server, client, SQLite) over the span.
    pub(crate) cpu_seconds: f64,
    /// Each operation's latency, start to answer.
    pub(crate) latency: Latency,
}

impl Rate {
    pub(crate) fn per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds
    }

    /// CPU microseconds per message.
    pub(crate) fn cpu_us_per_msg(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.messages.max(1) as f64
    }
}

pub(crate) async fn run(s: &Settings) -> Result<Vec<Row>> {
    let row = run_on(s, "W1", BenchServer::start(temp_dir(&s.dir)?)).await?;
    let (msgs, secs) = (row.messages, row.seconds);
    progress(format_args!(
        "W1 baseline: raw one-row commit loop, synchronous=FULL, {:.1} s",
        s.w1_measure.as_secs_f64()
    ));
    let raw = commit_loop(s).await.context("the raw commit loop")?;
    progress(format_args!("  {:.0} commits/s", raw.per_sec()));
    progress(format_args!("W1 switchboard, group commit off"));
    let server = BenchServer::start_ungrouped(temp_dir(&s.dir)?).await?;
    let (_, sender) = server.agent("w1-sender").await?;
    recipients(&server).await?;
    let alone = measure(s, &sender).await?;
    server.stop().await?;
    progress(format_args!("  {:.0} msgs/s", alone.per_sec()));
    let against_raw = |variant: &str, what: &str, rate: Rate, messages: u64, seconds: f64| {
        let ratio = (messages as f64 / seconds) / raw.per_sec();
        Row {
            variant: variant.to_owned(),
            description: format!("{} ({what})", row.description),
            baseline: "raw one-row commit loop: one connection, WAL, synchronous=FULL, \
                       same payload, same directory"
                .to_owned(),
            messages,
            seconds,
            msgs_per_sec: messages as f64 / seconds,
            baseline_messages: raw.messages,
            baseline_seconds: raw.seconds,
            baseline_msgs_per_sec: raw.per_sec(),
            ratio,
            goal: Some(1.0),
            goal_met: Some(ratio >= 1.0),
            cpu_us_per_msg: Some(rate.cpu_us_per_msg()),
            baseline_cpu_us_per_msg: Some(raw.cpu_us_per_msg()),
            samples: vec![messages as f64 / seconds],
            baseline_samples: vec![raw.per_sec()],
            latency: Some(rate.latency),
            ..row.clone()
        }
    };
    let grouped = against_raw("vs_raw_commit", "group commit", row.rate(), msgs, secs);
    let ungrouped = against_raw(
        "vs_raw_commit_ungrouped",
        "group commit off",
        alone,
        alone.messages,
        alone.seconds,
    );
    Ok(vec![row, grouped, ungrouped])
}

/// The raw one-row commit loop of W1's baseline, for `s.w1_measure` after a warm-up.
async fn commit_loop(s: &Settings) -> Result<Rate> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let dir = temp_dir(&s.dir)?;
    let opts = SqliteConnectOptions::new()
        .filename(dir.path().join("raw.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await?;
    sqlx::query("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .execute(&pool)
        .await?;
    let body = payload(0).to_string();
    let pool2 = pool.clone();
    let insert = move || {
        let (pool, body) = (pool2.clone(), body.clone());
        async move {
            sqlx::query("INSERT INTO rows (body) VALUES (?)")
                .bind(body)
                .execute(&pool)
                .await?;
            Ok(())
        }
    };
    drive(1, s.w1_warmup, insert.clone()).await?;
    let rate = drive(1, s.w1_measure, insert).await?;
    pool.close().await;
    Ok(rate)
}

/// W1 against the server `server` opens (after the baseline); `workload` names the
/// row and the progress lines.
pub(crate) async fn run_on(
    s: &Settings,
    workload: &'static str,
    server: impl Future<Output = Result<BenchServer>>,
) -> Result<Row> {
    progress(format_args!(
        "{workload} baseline: minimal axum route, {} tasks, {:.1} s",
        s.w1_tasks,
        s.w1_measure.as_secs_f64()
    ));
    let baseline = Baseline::start().await?;
    let client = Client::new(&baseline.url, "sb_bench_baseline")?;
    let base = measure(s, &client).await?;
    baseline.stop().await?;
    progress(format_args!("  {:.0} req/s", base.per_sec()));

    progress(format_args!(
        "{workload} switchboard: enqueue with Idempotency-Key, {} tasks, {:.1} s",
        s.w1_tasks,
        s.w1_measure.as_secs_f64()
    ));
    let server = server.await?;
    let (_, sender) = server.agent("w1-sender").await?;
    recipients(&server).await?;
    let rate = measure(s, &sender).await?;
    server.stop().await?;
    progress(format_args!(
        "  {:.0} msgs/s, latency p50 {:.1} ms, p99 {:.1} ms",
        rate.per_sec(),
        rate.latency.p50_ms,
        rate.latency.p99_ms
    ));

    Ok(Row {
        workload,
        variant: "enqueue_http_idempotency_key".to_owned(),
        description: format!(
            "POST /agents/{{agent}}/messages, fresh Idempotency-Key each, ~{} B payload, \
             {} client tasks to {RECIPIENTS} agents, agent token",
            payload(0).to_string().len(),
            s.w1_tasks
        ),
        baseline: "minimal axum route: same path, parses the same JSON body, 201 + small JSON"
            .to_owned(),
        messages: rate.messages,
        seconds: rate.seconds,
        msgs_per_sec: rate.per_sec(),
        baseline_messages: base.messages,
        baseline_seconds: base.seconds,
        baseline_msgs_per_sec: base.per_sec(),
        ratio: rate.per_sec() / base.per_sec(),
        goal: None,
        goal_met: None,
        cpu_us_per_msg: Some(rate.cpu_us_per_msg()),
        baseline_cpu_us_per_msg: Some(base.cpu_us_per_msg()),
        samples: vec![rate.per_sec()],
        baseline_samples: vec![base.per_sec()],
        quick: s.quick,
        latency: Some(rate.latency),
    })
}

/// Warm-up (not counted), then the measured run, both with `client`.
pub(crate) async fn measure(s: &Settings, client: &Client) -> Result<Rate> {
    let message = Arc::new(SendMessage {
        payload: payload(0),
        ..SendMessage::default()
    });
    let next = Arc::new(AtomicUsize::new(0));
    let send = {
        let client = client.clone();
        move || {
            let (client, message) = (client.clone(), message.clone());
            let to = recipient(next.fetch_add(1, Ordering::Relaxed));
            async move {
                client
                    .send_message(&to, &message, &new_idempotency_key())
                    .await?;
                Ok(())
            }
        }
    };
    drive(s.w1_tasks, s.w1_warmup, send.clone()).await?;
    drive(s.w1_tasks, s.w1_measure, send).await
}

/// Runs `op` from `tasks` concurrent tasks, each starting operations until `duration`
/// has passed. Counts completed operations and their latencies; the span ends when
/// the last one finished. The first failure ends the run with its error (the bench
/// is then invalid).
pub(crate) async fn drive<F, Fut>(tasks: usize, duration: Duration, op: F) -> Result<Rate>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let op = Arc::new(op);
    let cpu = crate::report::cpu_seconds();
    let start = Instant::now();
    let deadline = start + duration;
    let mut set = JoinSet::new();
    for _ in 0..tasks {
        let op = op.clone();
        set.spawn(async move {
            let mut took = Vec::new();
            while Instant::now() < deadline {
                let began = Instant::now();
                op().await?;
                took.push(began.elapsed());
            }
            anyhow::Ok(took)
        });
    }
    let mut took = Vec::new();
    while let Some(done) = set.join_next().await {
        took.extend(done??);
    }
    Ok(Rate {
        messages: took.len() as u64,
        seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: crate::report::cpu_seconds() - cpu,
        latency: Latency::of(&mut took),
    })
}

/// The minimal axum server of the W1 baseline.
struct Baseline {
    url: String,
    shutdown: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

struct BaselineState {
    agent: AgentId,
    seq: AtomicU64,
}

impl Baseline {
    async fn start() -> Result<Self> {
        let state = Arc::new(BaselineState {
            agent: AgentId::new(),
            seq: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .route(
                "/api/v1/agents/{agent}/messages",
                axum::routing::post(accept),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (shutdown, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = rx.await;
                })
                .await
        });
        Ok(Self {
            url,
            shutdown,
            handle,
        })
    }

    async fn stop(self) -> Result<()> {
        let _ = self.shutdown.send(());
        self.handle.await??;
        Ok(())
    }
}

/// Parses the body as the server does (`SendMessage`, unknown fields refused) and
/// answers like a send.
async fn accept(
    State(state): State<Arc<BaselineState>>,
    axum::Json(_message): axum::Json<SendMessage>,
) -> (StatusCode, axum::Json<SendReceipt>) {
    let seq = state.seq.fetch_add(1, Ordering::Relaxed) + 1;
    (
        StatusCode::CREATED,
        axum::Json(SendReceipt {
            event_id: EventId::new(),
            agent_id: state.agent,
            seq,
        }),
    )
}
