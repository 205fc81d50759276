//! MCP: `switchboard mcp` as an MCP client (a model's host) meets it, next to the
//! same calls through the SDK, on one in-process server.
//!
//! - *tool round trip*: `tools/call claim_work` on an empty inbox, one call at a
//!   time: JSON-RPC over the session's stdio, the tool, one HTTP claim, the answer
//!   back. Baseline: the same claim through the SDK's `Client::claim`.
//! - *notification*: from just before a send (through the SDK) to the
//!   `notifications/resources/updated` the subscribed session writes to its stdout,
//!   the session watching with `--no-poll` (the SSE wake-up alone). Baseline: from
//!   just before the same send to the SDK's own `inbox_updated` on an SSE stream.
//!   Both include the send's round trip, so the difference is what the session adds
//!   (its follower's read of the new page, the notification's JSON-RPC).
//!
//! The `switchboard` binary comes from `SWITCHBOARD_BENCH_CLI` (`cargo xtask bench`
//! builds it in release and sets it); unset, the workload is skipped with a note.
//! The JSON-RPC client here is the bench's own minimal one (line-delimited JSON,
//! what the stdio transport is): the tests drive the session with the official SDKs.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde_json::{Value, json};
use switchboard_sdk::new_idempotency_key;
use switchboard_sdk::proto::{ClaimRequest, SendMessage};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::Settings;
use crate::report::{Latency, Row, progress};
use crate::server::{BenchServer, temp_dir};

/// Where `cargo xtask bench` puts the path of the release `switchboard` binary.
pub(crate) const CLI_ENV: &str = "SWITCHBOARD_BENCH_CLI";

/// One `switchboard mcp` process and its stdio.
struct Session {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    /// Inbox notifications read so far (some while waiting for an answer).
    updates: Vec<Instant>,
}

impl Session {
    async fn start(cli: &Path, url: &str, token: &str, agent: &str, state: &Path) -> Result<Self> {
        let mut child = tokio::process::Command::new(cli)
            .args(["mcp", "--name", agent, "--no-poll"])
            .env("SWITCHBOARD_SERVER", url)
            .env("SWITCHBOARD_TOKEN", token)
            .env("SWITCHBOARD_STATE", state)
            .env("SWITCHBOARD_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", cli.display()))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut session = Self {
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            next_id: 1,
            updates: Vec::new(),
        };
        session
            .request(
                "initialize",
                json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "switchboard-bench", "version": "1"},
                }),
            )
            .await?;
        session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(session)
    }

    async fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await?;
        Ok(())
    }

    /// Reads one message; notes an inbox notification.
    async fn read(&mut self) -> Result<Value> {
        let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .context("no message from the session within 30 s")??
            .context("the session closed its stdout")?;
        let message: Value = serde_json::from_str(&line)?;
        if message["method"] == "notifications/resources/updated" {
            self.updates.push(Instant::now());
        }
        Ok(message)
    }

    async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let message = self.read().await?;
            if message["id"] == id {
                if let Some(error) = message.get("error") {
                    bail!("{method}: {error}");
                }
                return Ok(message["result"].clone());
            }
        }
    }

    /// The time of the `n`th inbox notification (1-based), reading until it comes.
    async fn update(&mut self, n: usize) -> Result<Instant> {
        while self.updates.len() < n {
            self.read().await?;
        }
        Ok(self.updates[n - 1])
    }

    async fn stop(mut self) {
        drop(self.stdin);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

pub(crate) async fn run(s: &Settings) -> Result<Option<Vec<Row>>> {
    let Some(cli) = std::env::var_os(CLI_ENV).filter(|v| !v.is_empty()) else {
        progress(format_args!(
            "MCP skipped: {CLI_ENV} does not name a switchboard binary (cargo xtask bench \
             builds one and sets it)"
        ));
        return Ok(None);
    };
    let cli = std::path::PathBuf::from(cli);
    let calls = if s.quick { 20 } else { 200 };
    let sends = if s.quick { 10 } else { 100 };
    let server = BenchServer::start(temp_dir(&s.dir)?).await?;
    let state = temp_dir(&s.dir)?;
    let (_, sender) = server.agent("mcp-sender").await?;
    let (bob, bob_sdk) = server.agent("mcp-bob").await?;
    let (carol, carol_sdk) = server.agent("mcp-carol").await?;

    progress(format_args!(
        "MCP tool round trip: {calls} claim_work calls on an empty inbox, MCP and SDK"
    ));
    let mut session = Session::start(
        &cli,
        &server.url,
        carol.token.as_str(),
        "mcp-carol",
        &state.path().join("carol.db"),
    )
    .await?;
    let mut mcp_took = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let result = session
            .request(
                "tools/call",
                json!({"name": "claim_work", "arguments": {"limit": 1}}),
            )
            .await?;
        mcp_took.push(started.elapsed());
        if result["isError"] == true {
            bail!("claim_work failed: {result}");
        }
    }
    session.stop().await;
    let mut sdk_took = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let request = ClaimRequest {
            limit: Some(1),
            lease_seconds: Some(300),
            attempt_id: Some(uuid::Uuid::now_v7()),
        };
        carol_sdk.claim("mcp-carol", &request).await?;
        sdk_took.push(started.elapsed());
    }
    let round_trip = row(
        s,
        "tool_round_trip",
        format!("{calls} tools/call claim_work, one at a time, empty inbox"),
        "the same claim through the SDK's Client::claim".to_owned(),
        mcp_took,
        sdk_took,
    );

    progress(format_args!(
        "MCP notification: {sends} sends, each until the subscribed session says so (SSE only)"
    ));
    let mut session = Session::start(
        &cli,
        &server.url,
        bob.token.as_str(),
        "mcp-bob",
        &state.path().join("bob.db"),
    )
    .await?;
    session
        .request("resources/subscribe", json!({"uri": "switchboard://inbox"}))
        .await?;
    // The session's SSE subscription is up once the server counts a subscriber.
    wait_subscribed(&server, "mcp-bob", 1).await?;
    let mut mcp_told = Vec::with_capacity(sends);
    for i in 0..sends {
        let started = Instant::now();
        send(&sender, "mcp-bob", i).await?;
        let told = session.update(i + 1).await?;
        mcp_told.push(told.saturating_duration_since(started));
    }
    session.stop().await;
    let mut stream = bob_sdk.subscribe("mcp-bob").await?;
    let mut sdk_told = Vec::with_capacity(sends);
    for i in 0..sends {
        let started = Instant::now();
        send(&sender, "mcp-bob", sends + i).await?;
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
                .await
                .context("no inbox_updated within 30 s")?
                .context("the SSE stream ended")??;
            if event.inbox_updated().is_some() {
                break;
            }
        }
        sdk_told.push(started.elapsed());
    }
    drop(stream);
    let notification = row(
        s,
        "notification",
        format!("{sends} sends, each until notifications/resources/updated (--no-poll)"),
        "the same sends until the SDK's inbox_updated on its own SSE stream".to_owned(),
        mcp_told,
        sdk_told,
    );
    server.stop().await?;
    Ok(Some(vec![round_trip, notification]))
}

async fn send(client: &switchboard_sdk::Client, to: &str, i: usize) -> Result<()> {
    let message = SendMessage {
        payload: json!({"text": format!("bench {i}")}),
        ..SendMessage::default()
    };
    client
        .send_message(to, &message, &new_idempotency_key())
        .await?;
    Ok(())
}

async fn wait_subscribed(server: &BenchServer, agent: &str, n: u64) -> Result<()> {
    for _ in 0..300 {
        let agents = server.operator.agents().await?;
        if agents.iter().any(|a| a.name == agent && a.subscribers >= n) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bail!("{agent}'s session never subscribed")
}

/// A row of operations per second (one at a time), MCP against the SDK, with the
/// MCP side's latency; both p50s printed.
fn row(
    s: &Settings,
    variant: &str,
    description: String,
    baseline: String,
    mut mcp: Vec<Duration>,
    mut sdk: Vec<Duration>,
) -> Row {
    let total = |took: &[Duration]| took.iter().map(Duration::as_secs_f64).sum::<f64>();
    let (seconds, base) = (total(&mcp), total(&sdk));
    let n = mcp.len() as u64;
    let (rate, base_rate) = (n as f64 / seconds, sdk.len() as f64 / base);
    let latency = Latency::of(&mut mcp);
    let sdk_latency = Latency::of(&mut sdk);
    progress(format_args!(
        "  MCP p50 {:.2} ms p99 {:.2} ms; SDK p50 {:.2} ms p99 {:.2} ms",
        latency.p50_ms, latency.p99_ms, sdk_latency.p50_ms, sdk_latency.p99_ms
    ));
    Row {
        workload: "MCP",
        variant: variant.to_owned(),
        description,
        baseline,
        messages: n,
        seconds,
        msgs_per_sec: rate,
        baseline_messages: sdk.len() as u64,
        baseline_seconds: base,
        baseline_msgs_per_sec: base_rate,
        ratio: rate / base_rate,
        goal: None,
        goal_met: None,
        cpu_us_per_msg: None,
        baseline_cpu_us_per_msg: None,
        samples: vec![rate],
        baseline_samples: vec![base_rate],
        quick: s.quick,
        latency: Some(latency),
    }
}
