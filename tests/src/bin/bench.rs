//! `cargo xtask bench` (= `cargo run --release -p switchboard-tests --bin bench`):
//! server throughput, each number next to a baseline measured in the same run on the
//! same machine. A measurement, not a test: a missed goal is printed, never fatal.
//!
//! Terms:
//! - *W1*: enqueue over HTTP with a fresh Idempotency-Key per message, 16 clients to
//!   16 agents, with latency percentiles. Baselines: a minimal axum route that parses
//!   the same JSON body and answers 201; and (the goal's, issue 16) the raw one-row
//!   commit loop on the same disk with `synchronous = FULL`. The server runs with
//!   SQLite's group commit (the default) and without. See `bench/w1.rs`.
//! - *AUTH*: W1's sender with the rate limiter on (buckets far above the rate) against
//!   off, and with a JWT access token against its static token: the cost of each, as
//!   a ratio (goal ≥ 0.9: under 10%). See `bench/auth.rs`.
//! - *W2*: drain a pre-loaded inbox with claim(limit = batch), each batch's acks
//!   riding with the next claim (one request, one transaction) as the SDK's consumer
//!   does. Baseline: a raw sqlx loop running the store's SQL with no HTTP, its ack
//!   and next claim in one transaction too.
//! - *R1*: bulk replay of 10,000 quarantined events as a server job, with a prober's
//!   send latency during the job next to the idle server's. Baseline: the job's SQL
//!   in a raw sqlx loop, same batches.
//! - *W4*: name + memory leases: renew throughput (1,000 leases × 16 renewers) and
//!   one name × 16 contenders under a 200 ms TTL, checked for overlapping holders.
//!   Baseline: the same calls through the store (same SQL and driver, no HTTP).
//! - *W3*: wake-up latency: 1,000 agents each holding an SSE stream, sends at 200/s
//!   to random ones; commit → `inbox_updated` and commit → claim as p50/p99/max, and
//!   missed wake-ups (goals: p99 ≤ 3 ms, ≤ 10 ms, none missed). See `bench/w3.rs`.
//! - *W3I*: 10,000 idle SSE connections on a server child process: its PSS per
//!   connection and its idle CPU (goals: ≤ 8 KiB, < 2% of one core). See
//!   `bench/w3idle.rs`.
//! - *PG-W1*, *PG-W2*: W1, and W2 over 100 agents (20,000 events, 8 consumers), with
//!   the server on PostgreSQL. PG-W2 has two baselines on the same PostgreSQL server:
//!   the store's SQL in a raw sqlx loop, and pgmq; and a second table of commits
//!   (`pg_stat_database.xact_commit`) and CPU (this process + PostgreSQL backends)
//!   per message. The server also drains with acks and claims as separate requests
//!   ("acks apart", as before issue 16), for the difference. See `bench/pg.rs`.
//! - *MY-W1*, *MY-W2*: W1 and PG-W2's drain with the server on MariaDB / MySQL,
//!   against the store's MySQL SQL in a raw sqlx loop. See `bench/my.rs`.
//! - *WH*: webhook deliveries from 16 agents' callbacks to a local HTTPS receiver.
//!   Baseline: the same signed POSTs through the same client with no queue. See
//!   `bench/wh.rs`.
//! - *MCP*: `switchboard mcp` (issue 41): a tool's round trip (`tools/call
//!   claim_work` → HTTP → answer) and the inbox notification's latency (send →
//!   `notifications/resources/updated`, SSE only), each next to the same call or
//!   wake-up through the SDK. Needs the `switchboard` binary in
//!   `SWITCHBOARD_BENCH_CLI` (`cargo xtask bench` builds and sets it). See
//!   `bench/mcp.rs`.
//! - *PY-W1*: keyed sends from Python (issue 40): `switchboard.Agent.send` × N
//!   through the durable outbox, then `flush()`, in a Python process; baseline: the
//!   Rust SDK's outbox doing the same in a process of its own (goal ≥ 0.8). Needs a
//!   Python with the package in `SWITCHBOARD_BENCH_PYTHON` (`cargo xtask bench`
//!   installs the release wheel and sets it). See `bench/py.rs`.
//! - *ratio*: server msgs/s ÷ baseline msgs/s. *goal*: the ratio an issue asks for.
//!
//! Every server runs in this process with `Config::default()` (WAL, synchronous
//! FULL, workers every second) on its own SQLite file in a temp dir (W2: a copy of
//! one pre-loaded file); only the database path is set. The client runs in the same
//! process and shares the CPUs, as it does for the baselines.
//!
//! The PostgreSQL parts run on fresh databases (`sb_bench_…`, dropped at the end) of
//! the server whose admin (superuser) URL `--postgres URL` or
//! `SWITCHBOARD_BENCH_POSTGRES` gives; `cargo xtask bench` starts the local cluster
//! and sets it. Without one they are skipped; if they fail, the rest is still printed.
//!
//! The MariaDB parts run likewise on the server `--mysql URL` or
//! `SWITCHBOARD_BENCH_MYSQL` gives (`cargo xtask bench` starts the test MariaDB).
//!
//! *Peers* (`--peers`, only in a build with the `peers` feature, which `cargo xtask
//! bench --peers` makes and provisions): pg-boss, graphile-worker, apalis (PostgreSQL
//! and SQLite), NATS JetStream and etcd, measured after ours in the same run, each
//! figure as ours ÷ peer, in a table of their own and `peers.json`. See
//! `bench/peers.rs`.
//!
//! Options: `--quick` (smoke run), `--dir PATH` (where the temp databases go; its
//! filesystem sets the fsync cost), `--seconds S` (W1 measuring time), `--events N`
//! (W2 pre-load), `--consumers N` (W2; PG-W2 keeps the 20,000 events and 8
//! consumers, 2,000 events with `--quick`), `--rate R` (W3 sends/s, default 200),
//! `--postgres URL`, `--mysql URL`,
//! `--only W1|AUTH|W2|R1|W3|W3I|W4|WH|MCP|PY-W1|PG|PG-W1|PG-W2|MY|MY-W1|MY-W2|PEERS` (`PG`, `MY`:
//! both parts; `PEERS`: `--peers` with only the workloads they are compared with),
//! `--peers`. `BENCH_QUICK=1` is the same as `--quick`. A full run takes about 3 minutes
//! on 2 cores (W3I alone about 1.5: 10,000 connections and a 30 s idle window), plus
//! about 4.5 for the PostgreSQL parts.

// A crate root looks for modules next to itself; these live in `bench/`.
#[cfg(feature = "peers")]
#[path = "bench/apalis.rs"]
mod apalis;
#[path = "bench/auth.rs"]
mod auth;
#[path = "bench/drain.rs"]
mod drain;
#[cfg(feature = "peers")]
#[path = "bench/etcd.rs"]
mod etcd;
#[path = "bench/mcp.rs"]
mod mcp;
#[path = "bench/my.rs"]
mod my;
#[path = "bench/myraw.rs"]
mod myraw;
#[cfg(feature = "peers")]
#[path = "bench/nats.rs"]
mod nats;
#[cfg(feature = "peers")]
#[path = "bench/node.rs"]
mod node;
#[cfg(feature = "peers")]
#[path = "bench/peers.rs"]
mod peers;
#[path = "bench/pg.rs"]
mod pg;
#[path = "bench/pgdb.rs"]
mod pgdb;
#[path = "bench/pgmq.rs"]
mod pgmq;
#[path = "bench/pgraw.rs"]
mod pgraw;
#[path = "bench/py.rs"]
mod py;
#[path = "bench/r1.rs"]
mod r1;
#[path = "bench/raw.rs"]
mod raw;
#[path = "bench/report.rs"]
mod report;
#[path = "bench/server.rs"]
mod server;
#[path = "bench/w1.rs"]
mod w1;
#[path = "bench/w2.rs"]
mod w2;
#[path = "bench/w3.rs"]
mod w3;
#[path = "bench/w3idle.rs"]
mod w3idle;
#[path = "bench/w4.rs"]
mod w4;
#[path = "bench/wh.rs"]
mod wh;

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::time::Duration;

/// What one run measures, from the command line.
struct Settings {
    quick: bool,
    /// Parent of the per-measurement temp dirs (their filesystem decides fsync cost).
    dir: PathBuf,
    /// W1: client tasks, each sending over its own keep-alive connection.
    w1_tasks: usize,
    /// W1: load before measuring (connections open, caches warm); not counted.
    w1_warmup: Duration,
    /// W1: how long each side is measured.
    w1_measure: Duration,
    /// W2: events pre-loaded into one agent's inbox.
    w2_events: usize,
    /// W2: concurrent consumers (claim, then ack each claimed event).
    w2_consumers: usize,
    /// W3: sends per second (open loop).
    w3_rate: f64,
    /// `--only W1` or `--only W2`: run one workload.
    only: Option<String>,
    /// Admin URL of the PostgreSQL server for the PG parts.
    postgres: Option<String>,
    /// Admin URL of the MariaDB / MySQL server for the MY parts.
    mysql: Option<String>,
    /// `--peers`: measure the peers too (`bench/peers.rs`).
    peers: bool,
}

/// The `--only` values; `PG` runs `PG-W1` and `PG-W2`, `MY` both MY parts,
/// `PEERS` the peers and [`PEERS_OURS`].
const WORKLOADS: [&str; 17] = [
    "W1", "AUTH", "W2", "R1", "W3", "W3I", "W4", "WH", "MCP", "PY-W1", "PG", "PG-W1", "PG-W2",
    "MY", "MY-W1", "MY-W2", "PEERS",
];

/// Our workloads the peers are compared with.
const PEERS_OURS: [&str; 4] = ["W1", "W2", "W4", "PG-W2"];

impl Settings {
    fn parse() -> Result<Self> {
        let mut args = std::env::args().skip(1);
        let mut quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let (mut dir, mut seconds, mut events) = (None, None, None);
        let (mut consumers, mut only, mut rate, mut peers) = (None, None, None, false);
        let env = |var: &str| std::env::var(var).ok().filter(|u| !u.is_empty());
        let mut postgres = env("SWITCHBOARD_BENCH_POSTGRES");
        let mut mysql = env("SWITCHBOARD_BENCH_MYSQL");
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .with_context(|| format!("{name} needs a value; see --help"))
            };
            match arg.as_str() {
                "--quick" => quick = true,
                "--dir" => dir = Some(PathBuf::from(value("--dir")?)),
                "--seconds" => seconds = Some(value("--seconds")?.parse::<f64>()?),
                "--events" => events = Some(value("--events")?.parse::<usize>()?),
                "--consumers" => consumers = Some(value("--consumers")?.parse::<usize>()?),
                "--only" => only = Some(value("--only")?.to_ascii_uppercase()),
                "--rate" => rate = Some(value("--rate")?.parse::<f64>()?),
                "--postgres" => postgres = Some(value("--postgres")?),
                "--mysql" => mysql = Some(value("--mysql")?),
                "--peers" => peers = true,
                "-h" | "--help" => {
                    println!(
                        "usage: bench [--quick] [--dir PATH] [--seconds S] [--events N] \
                         [--consumers N] [--rate R] [--postgres URL] [--mysql URL] [--only W] \
                         [--peers]\n  \
                         --quick      small counts (smoke run, a few seconds)\n  \
                         --dir PATH   parent dir of the temp databases (default: $TMPDIR)\n  \
                         --seconds S  W1 measuring time per side (default 8, quick 1)\n  \
                         --events N   W2 events pre-loaded per drain (default 5000, quick 1000)\n  \
                         --consumers N  W2 concurrent consumers, both sides (default 4)\n  \
                         --rate R     W3 sends per second (default 200)\n  \
                         --postgres URL  admin URL of a PostgreSQL server for PG-W1 and \
                         PG-W2 (default: $SWITCHBOARD_BENCH_POSTGRES; none: skipped)\n  \
                         --mysql URL  admin URL of a MariaDB / MySQL server for MY-W1 and \
                         MY-W2 (default: $SWITCHBOARD_BENCH_MYSQL; none: skipped)\n  \
                         --only W     run only W1, AUTH, W2, R1, W3, W3I, W4, WH, MCP, PY-W1, PG-W1, PG-W2, \
                         PG (both), MY-W1, MY-W2, MY (both) or PEERS (the peers and what they \
                         are compared with)\n  \
                         --peers      also measure the peers (pg-boss, graphile-worker, apalis, \
                         NATS JetStream, etcd); needs `cargo xtask bench --peers`"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other:?}; see --help"),
            }
        }
        let seconds = seconds.unwrap_or(if quick { 1.0 } else { 8.0 });
        if !(seconds.is_finite() && seconds > 0.0) {
            bail!("--seconds must be a positive number of seconds");
        }
        let w3_rate = rate.unwrap_or(200.0);
        if !(w3_rate.is_finite() && w3_rate > 0.0) {
            bail!("--rate must be a positive number of sends per second");
        }
        Ok(Self {
            quick,
            w3_rate,
            dir: dir.unwrap_or_else(std::env::temp_dir),
            w1_tasks: 16,
            w1_warmup: Duration::from_secs_f64(if quick { 0.3 } else { 1.0 }),
            w1_measure: Duration::from_secs_f64(seconds),
            w2_events: events.unwrap_or(if quick { 1_000 } else { 5_000 }).max(1),
            w2_consumers: consumers.unwrap_or(4).max(1),
            peers: peers || only.as_deref() == Some("PEERS"),
            only,
            postgres,
            mysql,
        })
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    // W3I starts this binary again as its server child, PY-W1 as its Rust side.
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some(w3idle::SERVE_CHILD) => {
            let url = args.next().context("--serve-child needs a database URL")?;
            return w3idle::serve_child(url).await;
        }
        // PY-W1 starts it again as its Rust side.
        Some(py::OUTBOX_CHILD) => return py::outbox_child(args).await,
        _ => {}
    }
    let settings = Settings::parse()?;
    if cfg!(debug_assertions) {
        eprintln!(
            "warning: this is a debug build, so the numbers mean little; \
             run `cargo xtask bench` (release)"
        );
    }
    if settings.peers && !cfg!(feature = "peers") {
        bail!(
            "--peers needs the bench built with the `peers` feature and the peers' tools \
             installed: run `cargo xtask bench --peers`"
        );
    }
    let runs = |w: &str| {
        (settings.only.as_deref()).is_none_or(|only| {
            only == w
                || w.split_once('-').is_some_and(|(db, _)| db == only)
                || (only == "PEERS" && PEERS_OURS.contains(&w))
        })
    };
    if settings
        .only
        .as_deref()
        .is_some_and(|w| !WORKLOADS.contains(&w))
    {
        bail!("--only takes one of {}", WORKLOADS.join(", "));
    }
    let postgres_parts = runs("PG-W1") || runs("PG-W2");
    let only_pg = settings.only.as_deref().is_some_and(|w| w != "PEERS");
    if postgres_parts && only_pg && settings.postgres.is_none() {
        bail!("the PG parts need --postgres URL or SWITCHBOARD_BENCH_POSTGRES");
    }
    let mysql_parts = runs("MY-W1") || runs("MY-W2");
    if mysql_parts && settings.only.is_some() && settings.mysql.is_none() {
        bail!("the MY parts need --mysql URL or SWITCHBOARD_BENCH_MYSQL");
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "Switchboard bench: {} run, {cpus} CPU(s), databases under {}",
        if settings.quick { "quick" } else { "full" },
        settings.dir.display()
    );
    let dir = report::out_dir();
    let mut rows = Vec::new();
    if runs("W1") {
        let w1 = w1::run(&settings).await.context("W1")?;
        report::write_json(&dir.join("w1.json"), &w1)?;
        rows.extend(w1);
    }
    if runs("AUTH") {
        let auth = auth::run(&settings).await.context("AUTH")?;
        report::write_json(&dir.join("auth.json"), &auth)?;
        rows.extend(auth);
    }
    if runs("W2") {
        let w2 = w2::run(&settings).await.context("W2")?;
        report::write_json(&dir.join("w2.json"), &w2)?;
        rows.extend(w2);
    }
    if runs("W4") {
        let w4 = w4::run(&settings).await.context("W4")?;
        report::write_json(&dir.join("w4.json"), &w4)?;
        rows.extend(w4);
    }
    if runs("WH") {
        let wh = wh::run(&settings).await.context("WH")?;
        report::write_json(&dir.join("wh.json"), std::slice::from_ref(&wh))?;
        rows.push(wh);
    }
    if runs("MCP")
        && let Some(mcp) = mcp::run(&settings).await.context("MCP")?
    {
        report::write_json(&dir.join("mcp.json"), &mcp)?;
        rows.extend(mcp);
    }
    if runs("PY-W1")
        && let Some(py) = py::run(&settings).await.context("PY-W1")?
    {
        report::write_json(&dir.join("py-w1.json"), std::slice::from_ref(&py))?;
        rows.push(py);
    }
    let mut notes = Vec::new();
    let mut wakeups = None;
    if runs("W3") {
        let w3 = w3::run(&settings).await.context("W3")?;
        report::write_json(&dir.join("w3.json"), &w3)?;
        wakeups = Some(w3);
    }
    let mut idle = None;
    if runs("W3I") {
        let w3i = w3idle::run(&settings).await.context("W3I")?;
        report::write_json(&dir.join("w3idle.json"), &w3i)?;
        idle = Some(w3i);
    }
    if runs("R1") {
        let (r1, responsiveness) = r1::run(&settings).await.context("R1")?;
        report::write_json(&dir.join("r1.json"), std::slice::from_ref(&r1))?;
        let text = serde_json::to_string_pretty(&responsiveness)?;
        std::fs::write(dir.join("r1-responsiveness.json"), text + "\n")?;
        rows.push(r1);
        notes.push(responsiveness);
    }
    let (mut costs, mut failed) = (Vec::new(), None);
    match &settings.postgres {
        Some(url) if postgres_parts => {
            match pg::run(&settings, url, runs("PG-W1"), runs("PG-W2"), &dir).await {
                Ok((pg_rows, pg_costs)) => {
                    rows.extend(pg_rows);
                    costs = pg_costs;
                }
                Err(e) => {
                    eprintln!("PostgreSQL parts failed: {e:#}");
                    failed = Some(e.context("PostgreSQL parts"));
                }
            }
        }
        None if postgres_parts => {
            eprintln!("PostgreSQL parts skipped: no --postgres URL or SWITCHBOARD_BENCH_POSTGRES")
        }
        _ => {}
    }
    match &settings.mysql {
        Some(url) if mysql_parts => {
            match my::run(&settings, url, runs("MY-W1"), runs("MY-W2"), &dir).await {
                Ok(my_rows) => rows.extend(my_rows),
                Err(e) => {
                    eprintln!("MariaDB parts failed: {e:#}");
                    failed.get_or_insert(e.context("MariaDB parts"));
                }
            }
        }
        None if mysql_parts => {
            eprintln!("MariaDB parts skipped: no --mysql URL or SWITCHBOARD_BENCH_MYSQL")
        }
        _ => {}
    }
    #[cfg(feature = "peers")]
    let peer_rows = if settings.peers {
        match peers::run(&settings, &rows, &dir).await {
            Ok(peer_rows) => peer_rows,
            Err(e) => {
                eprintln!("Peers failed: {e:#}");
                failed.get_or_insert(e.context("peers"));
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    println!();
    if !rows.is_empty() {
        report::print_table(&rows);
    }
    pg::print_costs(&costs);
    for note in &notes {
        note.print();
    }
    if let Some(w3) = &wakeups {
        w3.print();
    }
    if let Some(w3i) = &idle {
        w3i.print();
    }
    #[cfg(feature = "peers")]
    peers::print_table(&peer_rows);
    println!("\nJSON results in {}", dir.display());
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
