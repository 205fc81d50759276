//! W3I: 10,000 idle SSE connections on one server process. What one idle
//! subscriber costs the server in memory, and what the server burns while every
//! subscriber idles (heartbeats included).
//!
//! The server runs as a child process so that its memory and CPU are its own: this
//! binary started again as `bench --serve-child DATABASE_URL`, which serves
//! [`BenchServer`]'s configuration (`Config::default()`: heartbeat every 30 s,
//! workers every second, rate limits off) on `127.0.0.1:0` and stops when its stdin
//! closes. The database is seeded first with 10,000 agents, each with its own token:
//! "10,000 idle agents", one SSE connection each on its own `subscribe` stream (the
//! server has no per-agent connection limit, but one stream per agent is the real
//! shape: 10,000 hub channels, 10,000 cached agent records). The connections are
//! held by this process (SDK clients sharing one pool), each read by a task that
//! counts heartbeats.
//!
//! Measured on the child, from `/proc/<pid>/`:
//! - *memory per connection*: (PSS after opening − PSS before) ÷ connections, PSS
//!   from `smaps_rollup` (RSS beside it), each read after the process settled.
//! - *idle CPU*: (utime + stime) of the child over a window as % of one core: once
//!   with no connection (what the workers cost alone) and once with all open, over a
//!   whole heartbeat interval (30 s) so every connection sends its heartbeat once.
//!
//! The bench raises its RLIMIT_NOFILE soft limit to the hard limit before spawning
//! the child, which inherits it.

use crate::Settings;
use crate::report::{proc_cpu_seconds, progress};
use crate::server::{BenchServer, DB_FILE, temp_dir};
use crate::w2::seed;
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde::Serialize;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchboard_sdk::Client;
use switchboard_server::Hooks;
use switchboard_server::store::Store;
use switchboard_server::store::sqlite::SqliteStore;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The hidden argument that makes this binary the W3I server child.
pub(crate) const SERVE_CHILD: &str = "--serve-child";
/// Goals: bytes of PSS per idle connection; idle CPU in % of one core.
const GOAL_BYTES_PER_CONN: f64 = 8.0 * 1024.0;
const GOAL_IDLE_CPU_PCT: f64 = 2.0;
/// The server's heartbeat interval (`Config::default()`).
const HEARTBEAT: Duration = Duration::from_secs(30);

/// The result, written to `w3idle.json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W3Idle {
    pub(crate) connections: usize,
    /// Seconds to open them all (64 at a time).
    pub(crate) open_seconds: f64,
    pub(crate) server: String,
    pub(crate) nofile_limit: u64,
    pub(crate) pss_before_kib: u64,
    pub(crate) pss_after_kib: u64,
    pub(crate) rss_before_kib: u64,
    pub(crate) rss_after_kib: u64,
    pub(crate) pss_bytes_per_conn: f64,
    pub(crate) rss_bytes_per_conn: f64,
    /// The child's CPU with no connection, % of one core, over `base_window_s`.
    pub(crate) idle_cpu_pct_no_conns: f64,
    pub(crate) base_window_s: f64,
    /// The child's CPU with every connection open, % of one core, over `window_s`.
    pub(crate) idle_cpu_pct: f64,
    pub(crate) window_s: f64,
    /// Heartbeats the clients received in that window (about one per connection
    /// per 30 s).
    pub(crate) heartbeats_in_window: u64,
    pub(crate) heartbeat_s: f64,
    /// The machine's 1-minute load average before and after the CPU window.
    pub(crate) load_before: Option<f64>,
    pub(crate) load_after: Option<f64>,
    pub(crate) goal_bytes_per_conn: f64,
    pub(crate) goal_idle_cpu_pct: f64,
    pub(crate) goal_memory_met: bool,
    pub(crate) goal_cpu_met: bool,
    pub(crate) quick: bool,
}

impl W3Idle {
    pub(crate) fn print(&self) {
        let verdict = |met: bool| if met { "PASS" } else { "MISS" };
        println!(
            "\nW3I idle SSE: {} connections (one agent each) on a server child process \
             ({}), opened in {:.1} s",
            self.connections, self.server, self.open_seconds
        );
        println!(
            "  memory per connection: PSS {:>6.0} B ({} → {} KiB), RSS {:.0} B  \
             goal ≤ {:.0} B {}",
            self.pss_bytes_per_conn,
            self.pss_before_kib,
            self.pss_after_kib,
            self.rss_bytes_per_conn,
            self.goal_bytes_per_conn,
            verdict(self.goal_memory_met)
        );
        println!(
            "  idle CPU: {:.2}% of one core over {:.0} s with them open ({} heartbeats \
             received, every {:.0} s), {:.2}% with none over {:.0} s  goal < {:.0}% {}; \
             load average {} → {}",
            self.idle_cpu_pct,
            self.window_s,
            self.heartbeats_in_window,
            self.heartbeat_s,
            self.idle_cpu_pct_no_conns,
            self.base_window_s,
            self.goal_idle_cpu_pct,
            verdict(self.goal_cpu_met),
            crate::w3::load(self.load_before),
            crate::w3::load(self.load_after),
        );
    }
}

/// `bench --serve-child DATABASE_URL`: serves until stdin closes.
pub(crate) async fn serve_child(database_url: String) -> Result<()> {
    let server = BenchServer::open(database_url, None).await?;
    println!(
        "{}",
        serde_json::json!({ "ready": true, "url": server.url })
    );
    tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
    })
    .await?;
    server.stop().await
}

pub(crate) async fn run(s: &Settings) -> Result<W3Idle> {
    let connections = if s.quick { 1_000 } else { 10_000 };
    let window = if s.quick {
        Duration::from_secs(5)
    } else {
        HEARTBEAT
    };
    let base_window = Duration::from_secs(if s.quick { 3 } else { 10 });
    let nofile = raise_nofile_limit()?;
    if nofile < connections as u64 + 256 {
        bail!("RLIMIT_NOFILE is {nofile}: too low for {connections} connections");
    }
    progress(format_args!(
        "W3I: seeding {connections} agents, then a server child process and \
         {connections} idle SSE connections"
    ));
    let dir = temp_dir(&s.dir)?;
    let url = format!("sqlite://{}", dir.path().join(DB_FILE).display());
    let names: Vec<String> = (0..connections).map(|i| format!("idle-{i:05}")).collect();
    let agents = {
        let store = SqliteStore::open(&url, "off", Hooks::default().store()).await?;
        let seeded = seed(&store, &names, 0, 1).await;
        store.close().await;
        seeded?
    };

    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg(SERVE_CHILD)
        .arg(&url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the server child")?;
    let pid = child
        .id()
        .context("the server child has no pid")?
        .to_string();
    let stdout = child.stdout.take().context("child stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .context("the server child was not ready within 30 s")??
        .context("the server child exited before it was ready")?;
    let ready: serde_json::Value = serde_json::from_str(&ready)?;
    let server_url = ready["url"]
        .as_str()
        .context("no url in the child's ready line")?
        .to_owned();

    tokio::time::sleep(Duration::from_secs(1)).await;
    let base_cpu = cpu_pct(&pid, base_window).await?;
    let before = memory(&pid)?;
    progress(format_args!(
        "  server child {pid}: PSS {} KiB, {base_cpu:.2}% CPU idle with no connection",
        before.pss_kib
    ));

    let client = Client::new(&server_url, agents[0].token.as_str())?;
    let heartbeats = Arc::new(AtomicU64::new(0));
    let cancel = CancellationToken::new();
    let mut readers = JoinSet::new();
    let opened = Instant::now();
    let mut opening = futures::stream::iter(&agents)
        .map(|agent| {
            let client = client.with_token(agent.token.as_str());
            async move {
                let client = client?;
                let mut stream = client.subscribe(&agent.name).await?;
                match stream.next().await {
                    Some(Ok(first)) if first.inbox_updated().is_some() => {}
                    other => bail!("{}: no initial inbox_updated: {other:?}", agent.name),
                }
                anyhow::Ok(stream)
            }
        })
        .buffer_unordered(64);
    while let Some(stream) = opening.next().await {
        let mut stream = stream?;
        let (heartbeats, cancel) = (heartbeats.clone(), cancel.clone());
        readers.spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = cancel.cancelled() => return Ok(()),
                    event = stream.next() => event,
                };
                match event {
                    Some(Ok(event)) if event.is_heartbeat() => {
                        heartbeats.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(anyhow::Error::from(e)),
                    None => bail!("an idle stream ended"),
                }
            }
        });
    }
    drop(opening);
    let open_seconds = opened.elapsed().as_secs_f64();
    progress(format_args!(
        "  {connections} connections open in {open_seconds:.1} s; settling"
    ));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = memory(&pid)?;
    progress(format_args!(
        "  PSS {} KiB; measuring idle CPU over {:.0} s",
        after.pss_kib,
        window.as_secs_f64()
    ));
    let load_before = crate::report::load_average().map(|l| l[0]);
    let beats0 = heartbeats.load(Ordering::Relaxed);
    let cpu = cpu_pct(&pid, window).await?;
    let beats = heartbeats.load(Ordering::Relaxed) - beats0;
    let load_after = crate::report::load_average().map(|l| l[0]);

    cancel.cancel();
    while let Some(done) = readers.join_next().await {
        done??;
    }
    drop(child.stdin.take());
    match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
        Ok(status) => {
            let status = status?;
            if !status.success() {
                progress(format_args!("  the server child exited with {status}"));
            }
        }
        Err(_) => {
            progress(format_args!(
                "  the server child did not stop in 30 s: killed"
            ));
            child.kill().await?;
        }
    }
    drop(dir);

    let per_conn = |a: u64, b: u64| (b as f64 - a as f64) * 1024.0 / connections as f64;
    let pss_per_conn = per_conn(before.pss_kib, after.pss_kib);
    Ok(W3Idle {
        connections,
        open_seconds,
        server: format!("`bench {SERVE_CHILD}`: BenchServer's Config in its own process"),
        nofile_limit: nofile,
        pss_before_kib: before.pss_kib,
        pss_after_kib: after.pss_kib,
        rss_before_kib: before.rss_kib,
        rss_after_kib: after.rss_kib,
        pss_bytes_per_conn: pss_per_conn,
        rss_bytes_per_conn: per_conn(before.rss_kib, after.rss_kib),
        idle_cpu_pct_no_conns: base_cpu,
        base_window_s: base_window.as_secs_f64(),
        idle_cpu_pct: cpu,
        window_s: window.as_secs_f64(),
        heartbeats_in_window: beats,
        heartbeat_s: HEARTBEAT.as_secs_f64(),
        load_before,
        load_after,
        goal_bytes_per_conn: GOAL_BYTES_PER_CONN,
        goal_idle_cpu_pct: GOAL_IDLE_CPU_PCT,
        goal_memory_met: pss_per_conn <= GOAL_BYTES_PER_CONN,
        goal_cpu_met: cpu < GOAL_IDLE_CPU_PCT,
        quick: s.quick,
    })
}

/// Raises this process's RLIMIT_NOFILE soft limit to the hard limit (children
/// inherit it); returns the soft limit now in force.
fn raise_nofile_limit() -> Result<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised).context("raising RLIMIT_NOFILE")?;
    }
    Ok(getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX))
}

/// The CPU of process `pid` over the next `window`, in % of one core.
async fn cpu_pct(pid: &str, window: Duration) -> Result<f64> {
    let read = || proc_cpu_seconds(pid).context("reading the server child's CPU time");
    let (cpu0, t0) = (read()?, Instant::now());
    tokio::time::sleep(window).await;
    let (cpu1, secs) = (read()?, t0.elapsed().as_secs_f64());
    Ok((cpu1 - cpu0) / secs * 100.0)
}

struct Memory {
    pss_kib: u64,
    rss_kib: u64,
}

/// PSS and RSS of process `pid`, from `/proc/<pid>/smaps_rollup`.
fn memory(pid: &str) -> Result<Memory> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .with_context(|| format!("no {name} in {path}"))
    };
    Ok(Memory {
        pss_kib: field("Pss:")?,
        rss_kib: field("Rss:")?,
    })
}
