//! Three `switchboard serve` processes on one PostgreSQL or MariaDB / MySQL
//! database behave as one server: every event acked exactly once, per-agent order,
//! wake-ups across instances, and a stale claim refused by every instance.
//!
//! Needs a database server: `cargo xtask test` runs it with
//! `SWITCHBOARD_TEST_POSTGRES`, then with `SWITCHBOARD_TEST_MYSQL` (`--include-ignored`);
//! without either the test is ignored, not passed.

mod common;

use common::{Serve, serve_command};
use futures::StreamExt;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{ClaimRequest, CreateAgent, ErrorCode, SendMessage};
use switchboard_tests::{TestDatabase, key};

const INSTANCES: usize = 3;
const AGENTS: usize = 50;
const PER_AGENT: usize = 20;

fn spawn(db: &str, dir: &Path) -> Serve {
    Serve::start(
        serve_command(db, dir)
            .args(["--worker-interval-ms", "100"])
            .stderr(Stdio::null()),
    )
}

/// A small deterministic generator: which instance each call goes to.
struct Pick(u64);

impl Pick {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Three instances on a fresh database, and an operator client for each.
struct Cluster {
    ops: Vec<Client>,
    instances: Vec<Serve>,
    _dir: tempfile::TempDir,
    // Last: dropped after the processes were killed.
    _db: TestDatabase,
}

async fn cluster() -> Cluster {
    let db = TestDatabase::create()
        .await
        .expect("SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL is set");
    let dir = tempfile::tempdir().expect("temp dir");
    // One after the other: the first migrates and writes the operator token, the
    // others find both.
    let instances: Vec<Serve> = (0..INSTANCES).map(|_| spawn(&db.url, dir.path())).collect();
    let token = std::fs::read_to_string(dir.path().join("operator-token")).expect("token");
    let ops = instances
        .iter()
        .map(|i| Client::new(&i.url, token.trim()).expect("client"))
        .collect();
    Cluster {
        ops,
        instances,
        _dir: dir,
        _db: db,
    }
}

/// I2 across instances: 12 senders on three instances write to one agent while a
/// reader follows its cursor through all three. Sequence numbers come from the
/// agent's row, taken under its lock, so no number becomes visible before a lower
/// one: the reader never steps over an event that commits later. (With a global
/// BIGSERIAL, seq 7 can commit before seq 6, a reader moves its cursor to 7, and
/// 6 is never read.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL or MariaDB: set SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL"]
async fn a_cursor_reader_misses_nothing_while_three_instances_send() {
    const SENDERS: usize = 12;
    const EACH: usize = 40;
    let c = cluster().await;
    let created = c.ops[0]
        .create_agent(&CreateAgent {
            name: "target".to_owned(),
        })
        .await
        .expect("create agent");
    let readers: Vec<Client> = c
        .instances
        .iter()
        .map(|i| Client::new(&i.url, created.token.as_str()).expect("client"))
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = tokio::spawn({
        let done = done.clone();
        async move {
            let (mut cursor, mut seen, mut turn) = (0u64, Vec::new(), 0usize);
            loop {
                let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                let page = readers[turn % INSTANCES]
                    .poll("target", cursor, Some(50))
                    .await
                    .expect("poll");
                turn += 1;
                for e in &page.events {
                    seen.push(e.seq);
                }
                cursor = page.next_cursor;
                if finished && page.events.is_empty() {
                    return seen;
                }
            }
        }
    });
    let senders = (0..SENDERS).map(|s| {
        let op = c.ops[s % INSTANCES].clone();
        async move {
            for i in 0..EACH {
                let message = SendMessage {
                    payload: serde_json::json!({ "sender": s, "i": i }),
                    ..Default::default()
                };
                op.send_message("target", &message, &key())
                    .await
                    .expect("send");
            }
        }
    });
    futures::future::join_all(senders).await;
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let seen = reader.await.expect("reader");
    assert_eq!(
        seen,
        (1..=(SENDERS * EACH) as u64).collect::<Vec<_>>(),
        "the reader saw every sequence number once, in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL or MariaDB: set SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL"]
async fn three_instances_on_one_database_behave_as_one() {
    let c = cluster().await;
    let (ops, instances) = (&c.ops, &c.instances);

    // 50 agents, each created through some instance, with a client on every one.
    let mut pick = Pick(0x9E37_79B9_7F4A_7C15);
    let mut agents: Vec<(String, Vec<Client>)> = Vec::new();
    for n in 0..AGENTS {
        let name = format!("agent-{n:02}");
        let created = ops[pick.next(INSTANCES)]
            .create_agent(&CreateAgent { name: name.clone() })
            .await
            .expect("create agent");
        let clients = instances
            .iter()
            .map(|i| Client::new(&i.url, created.token.as_str()).expect("client"))
            .collect();
        agents.push((name, clients));
    }

    // Every agent subscribes on instance n % 3; one send through the next instance
    // must wake it.
    let mut streams = Vec::new();
    for (n, (name, clients)) in agents.iter().enumerate() {
        let mut s = clients[n % INSTANCES]
            .subscribe(name)
            .await
            .expect("subscribe");
        let first = s.next().await.expect("opening event").expect("sse");
        assert_eq!(first.inbox_updated().map(|u| u.cursor_hint), Some(0));
        streams.push(s);
    }
    for (n, (name, _)) in agents.iter().enumerate() {
        let message = SendMessage {
            payload: serde_json::json!({ "n": 0 }),
            ..Default::default()
        };
        ops[(n + 1) % INSTANCES]
            .send_message(name, &message, &key())
            .await
            .expect("send");
    }
    for (n, s) in streams.iter_mut().enumerate() {
        let woken = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(ev) = s.next().await {
                if let Some(u) = ev.expect("sse").inbox_updated()
                    && u.cursor_hint >= 1
                {
                    return u.cursor_hint;
                }
            }
            0
        })
        .await;
        assert_eq!(
            woken,
            Ok(1),
            "agent-{n:02} on instance {} was woken by a send on instance {}",
            n % INSTANCES,
            (n + 1) % INSTANCES
        );
    }
    drop(streams);

    // Senders: the rest of each agent's messages, in order per agent, each through
    // a random instance; all agents at once.
    let sends = agents.iter().enumerate().map(|(n, (name, _))| {
        let ops = ops.clone();
        let name = name.clone();
        async move {
            let mut pick = Pick(n as u64 + 1);
            for i in 1..PER_AGENT {
                let message = SendMessage {
                    payload: serde_json::json!({ "n": i }),
                    ..Default::default()
                };
                ops[pick.next(INSTANCES)]
                    .send_message(&name, &message, &key())
                    .await
                    .expect("send");
            }
        }
    });
    futures::future::join_all(sends).await;

    // Claimers: two per agent, each claiming and acking through random instances.
    let acked: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let claimers = agents.iter().enumerate().flat_map(|(n, (name, clients))| {
        let acked = acked.clone();
        (0..2).map(move |c| {
            let clients = clients.clone();
            let name = name.clone();
            let acked = acked.clone();
            async move {
                let mut pick = Pick((n * 2 + c) as u64 + 7);
                let request = ClaimRequest {
                    limit: Some(3),
                    lease_seconds: Some(30),
                    attempt_id: None,
                };
                loop {
                    let got = clients[pick.next(INSTANCES)]
                        .claim(&name, &request)
                        .await
                        .expect("claim");
                    if got.events.is_empty() {
                        return;
                    }
                    for e in got.events {
                        clients[pick.next(INSTANCES)]
                            .ack(&name, e.event.event_id, e.claim_token)
                            .await
                            .expect("ack of a fresh claim");
                        *acked
                            .lock()
                            .unwrap()
                            .entry(e.event.event_id.to_string())
                            .or_default() += 1;
                    }
                }
            }
        })
    });
    futures::future::join_all(claimers).await;
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), AGENTS * PER_AGENT, "every event was acked");
    assert!(
        acked.values().all(|&n| n == 1),
        "no event was handed to two claimers"
    );

    // Per-agent order: read by cursor through any instance, the payloads are in
    // send order and the sequence has no gap.
    for (n, (name, clients)) in agents.iter().enumerate() {
        let page = clients[n % INSTANCES]
            .poll(name, 0, Some(100))
            .await
            .expect("poll");
        let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=PER_AGENT as u64).collect::<Vec<_>>(), "{name}");
        let ids: HashSet<String> = page.events.iter().map(|e| e.event_id.to_string()).collect();
        assert!(ids.iter().all(|id| acked.contains_key(id)));
    }
    for op in ops {
        let totals = op.overview().await.expect("overview").totals;
        assert_eq!(totals.completed, (AGENTS * PER_AGENT) as u64);
        assert_eq!(totals.pending + totals.claimed, 0);
    }

    // A stale claim: claimed on one instance under a 1 s lease, expired, claimed
    // again on another; the first token is refused by every instance.
    let (name, clients) = &agents[0];
    let message = SendMessage {
        payload: serde_json::json!({ "stale": true }),
        ..Default::default()
    };
    ops[0]
        .send_message(name, &message, &key())
        .await
        .expect("send");
    let short = ClaimRequest {
        limit: Some(1),
        lease_seconds: Some(1),
        attempt_id: None,
    };
    let first = clients[0].claim(name, &short).await.expect("claim").events;
    assert_eq!(first.len(), 1);
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let second = clients[1].claim(name, &short).await.expect("claim").events;
    assert_eq!(second.len(), 1, "the expired lease was claimable again");
    assert_eq!(second[0].event.event_id, first[0].event.event_id);
    for (i, client) in clients.iter().enumerate() {
        let err = client
            .ack(name, first[0].event.event_id, first[0].claim_token)
            .await
            .expect_err("a stale claim token is refused");
        assert_eq!(err.code(), Some(ErrorCode::StaleClaim), "instance {i}");
    }
    clients[2]
        .ack(name, second[0].event.event_id, second[0].claim_token)
        .await
        .expect("the current token acks on any instance");
}
