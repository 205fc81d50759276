//! PY-W1: keyed sends from Python through the durable outbox, against the Rust SDK
//! doing the same in the same run (issue 40's goal: at least 0.8× of it).
//!
//! Each side is its own process sending to this process's server (a fresh SQLite
//! server, W1's 16 recipients), so they are measured alike: the Python side is
//! `switchboard.Agent(deliver=False)` from the package's release wheel, `send` ×
//! N then `flush()`; the Rust side is this binary started again as
//! [`OUTBOX_CHILD`], `Outbox::try_enqueue` × N then the same delivery passes
//! (`Outbox::dispatch_due` until nothing is open) that `flush()` runs. Both use
//! one privacy gate schema for the payload (`task`), round robin to the 16
//! recipients (so 16 lanes flow at once), and a fresh state directory per
//! round; each send is a durable local write (`synchronous=FULL`) before any
//! network I/O, and each message then one POST with its stored Idempotency-Key.
//! The time is the child's own, from its first send to the end of the flush;
//! the rounds alternate sides and each side's best counts (noise only slows).
//!
//! The Python interpreter is `$SWITCHBOARD_BENCH_PYTHON`, one that can `import
//! switchboard` (`cargo xtask bench` installs the release wheel in a virtual
//! environment and sets it); without it PY-W1 is skipped.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::path::Path;
use std::time::{Duration, Instant};
use switchboard_sdk::outbox::{OutboxConfig, Target};
use switchboard_sdk::privacy::Gate;
use switchboard_sdk::proto::SendMessage;
use switchboard_sdk::{Client, LocalDb, Outbox};

use crate::Settings;
use crate::report::{Row, cpu_seconds, progress};
use crate::server::{BenchServer, now_ms, payload, temp_dir};
use crate::w1::{RECIPIENTS, recipients};

/// The argument that starts this binary as PY-W1's Rust side.
pub(crate) const OUTBOX_CHILD: &str = "--outbox-child";
/// The variable naming the Python interpreter.
pub(crate) const PYTHON_ENV: &str = "SWITCHBOARD_BENCH_PYTHON";

/// The gate's schema for the bench payload ([`payload`]), on both sides.
const SCHEMAS: &str = r#"{"task": {"fields": {"kind": "text", "task_id": "integer", "title": "text", "detail": "text"}}}"#;

/// The Python side: the same sends and flush through the package.
const PYTHON_SIDE: &str = r#"
import json, os, sys, time
import switchboard

url, token, state, n, schemas = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
payloads = [json.loads(p) for p in sys.stdin.read().splitlines()]
agent = switchboard.Agent(server=url, token=token, state=state, schemas=schemas, deliver=False)
cpu, start = time.process_time(), time.perf_counter()
for i in range(n):
    agent.send(f"w1-inbox-{i % 16}", payloads[i], message_type="task")
enqueued = time.perf_counter()
agent.flush(timeout=600)
done = time.perf_counter()
cpu = time.process_time() - cpu
assert agent.pending() == 0
agent.close()
print(json.dumps({"enqueue_s": enqueued - start, "total_s": done - start, "cpu_s": cpu}))
"#;

/// What one side's round reports.
#[derive(Debug, Deserialize, serde::Serialize, Clone, Copy)]
struct Round {
    enqueue_s: f64,
    total_s: f64,
    cpu_s: f64,
}

fn recipient(i: usize) -> String {
    format!("w1-inbox-{}", i % RECIPIENTS)
}

/// PY-W1, or `None` (with a note) when no Python is given.
pub(crate) async fn run(s: &Settings) -> Result<Option<Row>> {
    let Some(python) = std::env::var_os(PYTHON_ENV).filter(|p| !p.is_empty()) else {
        progress(format_args!(
            "PY-W1 skipped: no {PYTHON_ENV} (`cargo xtask bench` sets it to a Python with \
             the package's release wheel)"
        ));
        return Ok(None);
    };
    let (n, rounds) = if s.quick { (200, 1) } else { (2_000, 3) };
    progress(format_args!(
        "PY-W1: {n} keyed sends through the outbox then flush, Python vs the Rust SDK, \
         {rounds} round(s) each"
    ));
    let server = BenchServer::start(temp_dir(&s.dir)?).await?;
    let (sender, _) = server.agent("py-w1-sender").await?;
    recipients(&server).await?;
    let token = sender.token.as_str().to_owned();
    let payloads: String = (0..n).map(|i| payload(i).to_string() + "\n").collect();
    let (mut rust, mut py) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        // Round 0 warms both sides up (the server's caches, the page cache, the
        // interpreter's imports) and is not counted.
        let count = if round == 0 { n / 10 } else { n };
        let state = temp_dir(&s.dir)?;
        let r = rust_side(&server.url, &token, state.path(), count).await?;
        let state = temp_dir(&s.dir)?;
        let p = python_side(&python, &server.url, &token, state.path(), count, &payloads).await?;
        if round > 0 {
            progress(format_args!(
                "  rust {:.0} msgs/s (sends {:.2} s, total {:.2} s), python {:.0} msgs/s \
                 (sends {:.2} s, total {:.2} s)",
                n as f64 / r.total_s,
                r.enqueue_s,
                r.total_s,
                n as f64 / p.total_s,
                p.enqueue_s,
                p.total_s
            ));
            rust.push(r);
            py.push(p);
        }
    }
    server.stop().await?;
    let best = |rounds: &[Round]| {
        *rounds
            .iter()
            .min_by(|a, b| a.total_s.total_cmp(&b.total_s))
            .expect("at least one round")
    };
    let (r, p) = (best(&rust), best(&py));
    let rate = |round: &Round| n as f64 / round.total_s;
    let ratio = rate(&p) / rate(&r);
    Ok(Some(Row {
        workload: "PY-W1",
        variant: "outbox_send_flush".to_owned(),
        description: format!(
            "Agent.send × {n} then flush(), round robin to {RECIPIENTS} agents, \
             ~{} B payload; client process only (server in the bench process)",
            payload(0).to_string().len()
        ),
        baseline: "the Rust SDK: Outbox::try_enqueue × N, then dispatch_due until empty".to_owned(),
        messages: n as u64,
        seconds: p.total_s,
        msgs_per_sec: rate(&p),
        baseline_messages: n as u64,
        baseline_seconds: r.total_s,
        baseline_msgs_per_sec: rate(&r),
        ratio,
        goal: Some(0.8),
        goal_met: Some(ratio >= 0.8),
        cpu_us_per_msg: Some(p.cpu_s * 1e6 / n as f64),
        baseline_cpu_us_per_msg: Some(r.cpu_s * 1e6 / n as f64),
        samples: py.iter().map(rate).collect(),
        baseline_samples: rust.iter().map(rate).collect(),
        quick: s.quick,
        latency: None,
    }))
}

async fn rust_side(url: &str, token: &str, state: &Path, n: usize) -> Result<Round> {
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .arg(OUTBOX_CHILD)
        .args([url, token])
        .arg(state)
        .arg(n.to_string())
        .kill_on_drop(true)
        .output()
        .await
        .context("starting the Rust side")?;
    parse("the Rust side", &out)
}

async fn python_side(
    python: &std::ffi::OsStr,
    url: &str,
    token: &str,
    state: &Path,
    n: usize,
    payloads: &str,
) -> Result<Round> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(python)
        .args(["-c", PYTHON_SIDE, url, token])
        .arg(state)
        .args([&n.to_string(), SCHEMAS])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the Python side")?;
    let mut stdin = child.stdin.take().context("the Python side's stdin")?;
    stdin.write_all(payloads.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    parse("the Python side", &out)
}

fn parse(side: &str, out: &std::process::Output) -> Result<Round> {
    if !out.status.success() {
        bail!(
            "{side} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("{side} printed {text:?}"))
}

/// PY-W1's Rust side, in this process: `<url> <token> <state dir> <n>`.
pub(crate) async fn outbox_child(mut args: impl Iterator<Item = String>) -> Result<()> {
    let mut arg = |what: &str| {
        args.next()
            .with_context(|| format!("{OUTBOX_CHILD} needs {what}"))
    };
    let (url, token, state) = (arg("a URL")?, arg("a token")?, arg("a state dir")?);
    let n: usize = arg("a count")?.parse()?;
    let client = Client::new(&url, token)?;
    let db = LocalDb::open(&Path::new(&state).join("switchboard.db")).await?;
    let gate = Gate::new()
        .load_schemas(SCHEMAS)
        .map_err(|e| anyhow::anyhow!("schemas: {e}"))?;
    let outbox = Outbox::open(db, &client, gate, OutboxConfig::default()).await?;
    let payloads: Vec<_> = (0..n).map(payload).collect();
    let (cpu, start) = (cpu_seconds(), Instant::now());
    for (i, payload) in payloads.into_iter().enumerate() {
        let message = SendMessage {
            payload,
            ..SendMessage::default()
        };
        outbox
            .try_enqueue(Target::Agent(recipient(i)), "task", message)
            .await?;
    }
    let enqueued = start.elapsed();
    // What the Python package's flush() does (crates/python/src/agent.rs, drain).
    loop {
        let pass = outbox.dispatch_due(now_ms()).await?;
        if outbox.counts().await?.open() == 0 {
            break;
        }
        let due = pass
            .next_due
            .map_or(200, |due| due - now_ms())
            .clamp(10, 1000);
        tokio::time::sleep(Duration::from_millis(u64::try_from(due).unwrap_or(10))).await;
    }
    let round = Round {
        enqueue_s: enqueued.as_secs_f64(),
        total_s: start.elapsed().as_secs_f64(),
        cpu_s: cpu_seconds() - cpu,
    };
    println!("{}", serde_json::to_string(&round)?);
    Ok(())
}
