//! Chaos, the crash loop (issue 17, item 1): SDK consumers (the real [`Consumer`],
//! with its local dedup) drain every agent's inbox while senders send numbered
//! messages with stable Idempotency-Keys, retrying each until it is answered, and
//! the server is killed with SIGKILL at random moments and started again on the same
//! address. On SQLite one `serve` owns the file; on PostgreSQL and MariaDB two
//! instances share the database and one at a time is killed, while the senders move
//! to the other.
//!
//! Some agents are drained by `switchboard agent run` processes instead (a shell
//! command as the handler, writing a file per run), which ride out the kills too.
//!
//! The oracle, at the end: every answered send was handled (0 lost), each agent's
//! events were first handled in sequence order (0 reordered), no retried key stored a
//! second event, and no event ran its handler twice (redeliveries after a lease
//! expiry are counted, and the SDK's dedup acks them without the handler). The
//! recovery time is the longest a send took from its first attempt to its answer
//! (the SDK retries a keyed send itself): a key left in flight by a killed instance
//! used to wait out its 60 s lock.
//!
//! CI size by default; `SWITCHBOARD_CHAOS=full` (`cargo xtask chaos`) runs 50 agents,
//! 10,000 events and 20 kills.

mod common;

use common::{Serve, agent_run, handler_runs, signal, sqlite_url};
use rand::Rng;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_sdk::consumer::{ConsumerConfig, Delivery, Outcome};
use switchboard_sdk::proto::{CreateAgent, SendMessage};
use switchboard_sdk::{Client, Consumer, Error};
use switchboard_tests::chaos::{ChaosRow, Scale};
use switchboard_tests::{Backend, TestDatabase};
use tokio_util::sync::CancellationToken;

/// One `serve` process that the test kills and starts again on the same address.
struct Instance {
    serve: Option<Serve>,
    /// `127.0.0.1:port`, kept across restarts so clients keep their URL.
    addr: String,
    url: String,
}

struct Cluster {
    database_url: String,
    dir: tempfile::TempDir,
    instances: Vec<Instance>,
}

impl Cluster {
    fn command(&self, listen: &str) -> std::process::Command {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"));
        command
            .args([
                "serve",
                "--listen",
                listen,
                "--database-url",
                &self.database_url,
            ])
            .arg("--operator-token-file")
            .arg(self.dir.path().join("operator-token"))
            .args(["--worker-interval-ms", "100"])
            .env("SWITCHBOARD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        command
    }

    fn start(database_url: String, dir: tempfile::TempDir, n: usize) -> Self {
        let mut cluster = Self {
            database_url,
            dir,
            instances: Vec::new(),
        };
        for _ in 0..n {
            let serve = Serve::start(&mut cluster.command("127.0.0.1:0"));
            let url = serve.url.clone();
            cluster.instances.push(Instance {
                addr: url.trim_start_matches("http://").to_owned(),
                url,
                serve: Some(serve),
            });
        }
        cluster
    }

    /// SIGKILL: no graceful anything.
    fn kill(&mut self, i: usize) {
        if let Some(mut serve) = self.instances[i].serve.take() {
            serve.child.kill().expect("kill -9");
            let _ = serve.child.wait();
        }
    }

    /// Starts instance `i` again on its address (the port may linger a moment).
    fn restart(&mut self, i: usize) {
        let addr = self.instances[i].addr.clone();
        for attempt in 0.. {
            let mut child = self
                .command(&addr)
                .spawn()
                .expect("spawn switchboard serve");
            let mut line = String::new();
            let ok = {
                use std::io::BufRead;
                let out = child.stdout.as_mut().expect("stdout is piped");
                std::io::BufReader::new(out).read_line(&mut line).is_ok() && !line.is_empty()
            };
            if ok {
                let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
                assert_eq!(ready["ready"], true, "{line}");
                self.instances[i].serve = Some(Serve {
                    child,
                    url: self.instances[i].url.clone(),
                });
                return;
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(attempt < 50, "instance {i} does not start again on {addr}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What a consumer's handler saw, in the order it saw it.
#[derive(Debug, Clone)]
struct Handled {
    agent: usize,
    seq: u64,
    event_id: String,
    sender: u64,
    n: u64,
}

/// What the `agent run` handlers wrote into `out`, in the order they ran.
fn handled_by_commands(out: &std::path::Path, names: &[String]) -> Vec<Handled> {
    handler_runs(out)
        .into_iter()
        .map(|r| Handled {
            agent: names.iter().position(|n| *n == r.agent).expect("agent"),
            seq: r.seq,
            event_id: r.event_id,
            sender: r.payload["s"].as_u64().unwrap_or(u64::MAX),
            n: r.payload["n"].as_u64().unwrap_or(u64::MAX),
        })
        .collect()
}

/// What the senders saw.
#[derive(Default)]
struct Sent {
    /// (sender, n) → (agent, seq) of the answer.
    answered: HashMap<(u64, u64), (usize, u64)>,
    /// The longest a key took from its first attempt to its answer.
    recovery_ms: u64,
    server_5xx: u64,
    in_progress: u64,
}

/// What the fault loop does to an instance.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL, then a restart on the same address.
    Kill,
    /// SIGSTOP for longer than an instance may be silent (10 s), then SIGCONT: the
    /// others take its keys and jobs over while it holds transactions open, and
    /// whatever it commits on waking must be fenced.
    Pause,
}

/// One loop at a time: two at once on 2 cores measure the machine, not the server.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run_crash_loop(backend: Backend, fault: Fault) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let scale = Scale::current();
    let agents: usize = scale.pick(8, 50);
    // The first few agents are drained by `agent run` processes.
    let commands: usize = scale.pick(2, 10);
    let senders: u64 = scale.pick(4, 8);
    let events: u64 = scale.pick(800, 10_000);
    let kills: usize = match fault {
        Fault::Kill => scale.pick(3, 20),
        Fault::Pause => scale.pick(2, 6),
    };
    let per_sender = events / senders;

    let dir = tempfile::tempdir().expect("temp dir");
    let (database_url, n_instances) = match TestDatabase::create().await {
        Some(db) => (db.url.clone(), 2),
        None => (sqlite_url(dir.path()), 1),
    };
    let mut cluster = Cluster::start(database_url, dir, n_instances);
    let urls: Vec<String> = cluster.instances.iter().map(|i| i.url.clone()).collect();
    let token = std::fs::read_to_string(cluster.dir.path().join("operator-token"))
        .expect("token file")
        .trim()
        .to_owned();
    // A paused instance answers nothing: a sender gives up on it after 3 s and
    // moves to the other.
    let ops: Vec<Client> = urls
        .iter()
        .map(|u| {
            Client::builder()
                .request_timeout(Duration::from_secs(3))
                .retry(switchboard_sdk::RetryPolicy::standard().max_attempts(2))
                .build(u, token.as_str())
                .expect("client")
        })
        .collect();

    // Agents, each drained by a real consumer through one of the instances.
    let names: Vec<String> = (0..agents).map(|a| format!("agent-{a}")).collect();
    let handled: Arc<Mutex<Vec<Handled>>> = Arc::default();
    let cancel = CancellationToken::new();
    let mut consumers = Vec::new();
    let mut statuses = Vec::new();
    let states = tempfile::tempdir().expect("state dir");
    let out = states.path().join("handled");
    std::fs::create_dir(&out).expect("mkdir");
    let mut processes = Vec::new();
    for (a, name) in names.iter().enumerate() {
        let created = ops[0]
            .create_agent(&CreateAgent { name: name.clone() })
            .await
            .expect("create agent");
        if a < commands {
            let state = states.path().join(format!("{a}.db"));
            // The SDK consumers' lease: a claim whose answer died with the server
            // comes back within seconds.
            processes.push(agent_run(
                &urls[a % urls.len()],
                created.token.as_str(),
                name,
                &state,
                &out,
                5,
                "0",
            ));
            continue;
        }
        let client = Client::new(&urls[a % urls.len()], created.token.as_str()).expect("client");
        let db = switchboard_sdk::local::LocalDb::open(states.path().join(format!("{a}.db")))
            .await
            .expect("local state");
        let mut config = ConsumerConfig::default();
        // A claim whose answer died with the server comes back within seconds.
        config.lease = Duration::from_secs(5);
        config.min_poll = Duration::from_millis(100);
        config.max_poll = Duration::from_millis(500);
        config.retry_base = Duration::from_millis(100);
        config.retry_cap = Duration::from_secs(1);
        let consumer = Consumer::new(client, name.as_str(), db, config);
        statuses.push(consumer.status());
        let handled = handled.clone();
        let handler = move |d: Delivery| {
            let p = d.event.payload.clone().unwrap_or_default();
            handled.lock().unwrap().push(Handled {
                agent: a,
                seq: d.event.seq,
                event_id: d.event.event_id.to_string(),
                sender: p["s"].as_u64().unwrap_or(u64::MAX),
                n: p["n"].as_u64().unwrap_or(u64::MAX),
            });
            std::future::ready(Outcome::Ack)
        };
        let cancel = cancel.clone();
        consumers.push(tokio::spawn(
            async move { consumer.run(handler, cancel).await },
        ));
    }

    // Senders: one message at a time, each retried with its key until answered,
    // through the next instance after a failure.
    let sent: Arc<Mutex<Sent>> = Arc::default();
    let progress = Arc::new(AtomicU64::new(0));
    let mut sender_tasks = Vec::new();
    for s in 0..senders {
        let (ops, sent, progress, names) =
            (ops.clone(), sent.clone(), progress.clone(), names.clone());
        sender_tasks.push(tokio::spawn(async move {
            let mut via = s as usize;
            for n in 0..per_sender {
                let agent = ((s * per_sender + n) % names.len() as u64) as usize;
                let key = uuid::Uuid::now_v7().to_string();
                let message = SendMessage {
                    payload: serde_json::json!({ "s": s, "n": n }),
                    ..Default::default()
                };
                let started = Instant::now();
                let deadline = started + Duration::from_secs(180);
                let receipt = loop {
                    let op = &ops[via % ops.len()];
                    match op.send_message(&names[agent], &message, &key).await {
                        Ok(r) => break r,
                        Err(e) => {
                            {
                                let mut sent = sent.lock().unwrap();
                                match &e {
                                    Error::Api { status, .. } if *status >= 500 => {
                                        sent.server_5xx += 1
                                    }
                                    Error::Api { status: 409, .. } => sent.in_progress += 1,
                                    _ => {}
                                }
                            }
                            assert!(
                                Instant::now() < deadline,
                                "a send was not answered within 180 s: {e}"
                            );
                            via += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                };
                {
                    let mut sent = sent.lock().unwrap();
                    // The SDK retries a keyed send itself: what the caller sees is
                    // how long the answer took, kills and takeovers included.
                    sent.recovery_ms = sent.recovery_ms.max(started.elapsed().as_millis() as u64);
                    sent.answered.insert((s, n), (agent, receipt.seq));
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }

    // The killer: at random moments, one instance at a time.
    let started = Instant::now();
    let mut rng = rand::rng();
    for _ in 0..kills {
        let pause = rng.random_range(scale.pick(300..1500, 500..4000));
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let victim = rng.random_range(0..cluster.instances.len());
        match fault {
            Fault::Kill => {
                let downtime = Duration::from_millis(rng.random_range(50..800));
                tokio::task::block_in_place(|| {
                    cluster.kill(victim);
                    std::thread::sleep(downtime);
                    cluster.restart(victim);
                });
            }
            Fault::Pause => {
                let pid = cluster.instances[victim]
                    .serve
                    .as_ref()
                    .expect("running")
                    .child
                    .id();
                signal(pid, "-STOP");
                tokio::time::sleep(Duration::from_millis(rng.random_range(11_000..13_000))).await;
                signal(pid, "-CONT");
            }
        }
    }
    for t in sender_tasks {
        t.await.expect("sender");
    }
    let sent = std::mem::take(&mut *sent.lock().unwrap());

    // Drain: every answered send handled (leases of lost claims expire in 5 s).
    let drain_deadline = Instant::now() + Duration::from_secs(scale.pick(120, 600));
    loop {
        let seen: HashSet<(u64, u64)> = handled
            .lock()
            .unwrap()
            .iter()
            .chain(&handled_by_commands(&out, &names))
            .map(|h| (h.sender, h.n))
            .collect();
        if sent.answered.keys().all(|k| seen.contains(k)) || Instant::now() > drain_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let the last acks land, then stop the consumers.
    tokio::time::sleep(Duration::from_millis(500)).await;
    cancel.cancel();
    for c in consumers {
        let _ = c.await;
    }
    let deduplicated: u64 = statuses.iter().map(|s| s.borrow().deduplicated).sum();
    // Every `agent run` rode out the kills and stops cleanly.
    let mut unclean = Vec::new();
    for (a, child) in processes.iter_mut().enumerate() {
        if let Some(status) = child.try_wait().expect("try_wait") {
            unclean.push(format!("{} had exited: {status}", names[a]));
            continue;
        }
        signal(child.id(), "-TERM");
        let status = child.wait().expect("wait");
        if !status.success() {
            unclean.push(format!("{} stopped with {status}", names[a]));
        }
    }

    // The oracle.
    let mut handled = handled.lock().unwrap().clone();
    handled.extend(handled_by_commands(&out, &names));
    let mut runs: HashMap<&str, u64> = HashMap::new();
    let mut events_of_key: BTreeMap<(u64, u64), HashSet<&str>> = BTreeMap::new();
    let mut last_seq: HashMap<usize, u64> = HashMap::new();
    let mut reordered = 0;
    for h in &handled {
        let count = runs.entry(&h.event_id).or_default();
        *count += 1;
        events_of_key
            .entry((h.sender, h.n))
            .or_default()
            .insert(&h.event_id);
        if *count == 1 {
            let last = last_seq.entry(h.agent).or_default();
            if h.seq < *last {
                reordered += 1;
                eprintln!(
                    "chaos: agent {} handled seq {} ({}) after seq {}",
                    names[h.agent], h.seq, h.event_id, *last
                );
            }
            *last = (*last).max(h.seq);
        }
    }
    let lost = sent
        .answered
        .keys()
        .filter(|k| !events_of_key.contains_key(k))
        .count() as u64;
    let stored_twice = events_of_key.values().filter(|ids| ids.len() > 1).count() as u64;
    let handled_twice = runs.values().filter(|&&c| c > 1).count() as u64;
    let mut acknowledged = 0;
    for name in &names {
        let snap = ops[0].snapshot(name).await.expect("snapshot");
        acknowledged += snap.counts.completed;
    }

    let (scenario, what) = match fault {
        Fault::Kill => ("crash-loop", "SIGKILLs"),
        Fault::Pause => ("pause-loop", "SIGSTOPs of 11-13 s"),
    };
    let mut row = ChaosRow::new(scenario, backend.name());
    row.sent = sent.answered.len() as u64;
    row.acknowledged = acknowledged;
    row.lost = lost;
    row.reordered = reordered;
    row.duplicated = deduplicated;
    row.recovery_ms = Some(sent.recovery_ms);
    row.server_5xx = sent.server_5xx;
    row.note = format!(
        "{kills} {what} over {} s, {n_instances} instance(s), {agents} agents ({commands} by `agent run`); {} sends answered 409 in flight; {stored_twice} keys stored twice; {handled_twice} events handled twice",
        started.elapsed().as_secs(),
        sent.in_progress
    );
    row.record();

    assert_eq!(sent.answered.len() as u64, per_sender * senders);
    assert!(unclean.is_empty(), "`agent run`: {unclean:?}");
    assert_eq!(lost, 0, "every answered send is handled");
    // Issue 17's finding, closed: reorders after kills on a shared database. Claims
    // of one agent are ordered (`InboxDriver::order_claims`), a returned lease is
    // available from its expiry, a claim waits for a pass returning its agent's
    // lease, and an undelayed event is claimable from its commit (each pinned by the
    // driver suite). Before those fixes every full-size run on PostgreSQL showed a
    // reorder; after them none of 7 on PostgreSQL and 5 on MariaDB did
    // (ARCHITECTURE.md, reliability suite), so any reorder fails here everywhere.
    assert_eq!(reordered, 0, "each agent's events are handled in order");
    assert_eq!(stored_twice, 0, "a retried key never stores a second event");
    assert_eq!(handled_twice, 0, "the SDK's dedup runs no handler twice");
    assert_eq!(
        acknowledged,
        sent.answered.len() as u64,
        "every event acked on the server"
    );
    if backend.shared() {
        // Killed: 10 s of silence, then the next retry. Paused: up to 13 s frozen,
        // the sender's timeouts on it, then the same 10 s.
        let bound = match fault {
            Fault::Kill => 30_000,
            Fault::Pause => 45_000,
        };
        assert!(
            sent.recovery_ms < bound,
            "a key of a dead instance is taken over within seconds, not after its 60 s lock ({} ms)",
            sent.recovery_ms
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_loop_on_sqlite() {
    if Backend::current() != Backend::Sqlite {
        return; // the database-server runs below
    }
    run_crash_loop(Backend::Sqlite, Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server: cargo xtask test runs it on PostgreSQL and MariaDB"]
async fn crash_loop_on_a_shared_database() {
    let backend = Backend::current();
    assert!(
        backend.shared(),
        "set SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL to run this test"
    );
    run_crash_loop(backend, Fault::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a database server: cargo xtask test runs it on PostgreSQL and MariaDB"]
async fn pause_loop_on_a_shared_database() {
    let backend = Backend::current();
    assert!(
        backend.shared(),
        "set SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL to run this test"
    );
    run_crash_loop(backend, Fault::Pause).await;
}
