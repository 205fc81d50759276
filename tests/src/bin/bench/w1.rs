//! W1: enqueue over HTTP. `tasks` client tasks share one SDK client (one keep-alive
//! connection each) and send `POST /api/v1/agents/{agent}/messages` with a fresh
//! Idempotency-Key per message for a fixed time, after a warm-up.
//!
//! Baseline: a minimal axum server with the same route that parses the same JSON body
//! (`SendMessage`) and answers 201 with a `SendReceipt`-shaped body, driven by the
//! same client loop. The ratio is what durability, auth and idempotency cost on top of
//! HTTP + JSON.

use crate::Settings;
use crate::report::{Row, progress};
use crate::server::{BenchServer, payload, temp_dir};
use anyhow::Result;
use axum::extract::State;
use axum::http::StatusCode;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchboard_sdk::proto::{AgentId, EventId, SendMessage, SendReceipt};
use switchboard_sdk::{Client, new_idempotency_key};
use tokio::task::JoinSet;

pub(crate) const RECIPIENT: &str = "w1-inbox";

/// Completed operations over a wall-clock span.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rate {
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    /// CPU seconds of this process (server, client, SQLite) over the span.
    pub(crate) cpu_seconds: f64,
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

pub(crate) async fn run(s: &Settings) -> Result<Row> {
    run_on(s, "W1", BenchServer::start(temp_dir(&s.dir)?)).await
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
    server.agent(RECIPIENT).await?;
    let rate = measure(s, &sender).await?;
    server.stop().await?;
    progress(format_args!("  {:.0} msgs/s", rate.per_sec()));

    Ok(Row {
        workload,
        variant: "enqueue_http_idempotency_key".to_owned(),
        description: format!(
            "POST /agents/{{agent}}/messages, fresh Idempotency-Key each, ~{} B payload, \
             {} client tasks, agent token",
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
        cpu_us_per_msg: None,
        baseline_cpu_us_per_msg: None,
        samples: vec![rate.per_sec()],
        baseline_samples: vec![base.per_sec()],
        quick: s.quick,
    })
}

/// Warm-up (not counted), then the measured run, both with `client`.
pub(crate) async fn measure(s: &Settings, client: &Client) -> Result<Rate> {
    let message = Arc::new(SendMessage {
        payload: payload(0),
        ..SendMessage::default()
    });
    let send = {
        let client = client.clone();
        move || {
            let (client, message) = (client.clone(), message.clone());
            async move {
                client
                    .send_message(RECIPIENT, &message, &new_idempotency_key())
                    .await?;
                Ok(())
            }
        }
    };
    drive(s.w1_tasks, s.w1_warmup, send.clone()).await?;
    drive(s.w1_tasks, s.w1_measure, send).await
}

/// Runs `op` from `tasks` concurrent tasks, each starting operations until `duration`
/// has passed. Counts completed operations; the span ends when the last one finished.
/// The first failure ends the run with its error (the bench is then invalid).
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
            let mut done = 0u64;
            while Instant::now() < deadline {
                op().await?;
                done += 1;
            }
            anyhow::Ok(done)
        });
    }
    let mut messages = 0;
    while let Some(done) = set.join_next().await {
        messages += done??;
    }
    Ok(Rate {
        messages,
        seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: crate::report::cpu_seconds() - cpu,
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
