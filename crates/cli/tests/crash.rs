//! Crash safety of the headless server: `kill -9` while senders and claimers run,
//! then a restart on the same SQLite file. Nothing committed is lost, every event is
//! eventually acked, and order per agent holds (I1–I3 across a crash).

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use switchboard_sdk::Client;
use switchboard_sdk::proto::{ClaimRequest, CreateAgent, EventStatus, SendMessage};

const AGENTS: [&str; 3] = ["alpha", "beta", "gamma"];
const SENDERS: usize = 3;

fn start(dir: &Path) -> Serve {
    Serve::start(
        serve_command(&sqlite_url(dir), dir)
            .args(["--worker-interval-ms", "100"])
            .env("SWITCHBOARD_LOG", "warn")
            .stderr(Stdio::inherit()),
    )
}

/// One intended message: which sender, its number, its key, and the receipt if the
/// server answered before the crash.
#[derive(Clone, Debug)]
struct Intent {
    agent: &'static str,
    sender: usize,
    n: u64,
    key: String,
}

fn message(i: &Intent) -> SendMessage {
    SendMessage {
        payload: serde_json::json!({ "sender": i.sender, "n": i.n }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_under_load_loses_nothing_committed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut first = start(dir.path());
    let token = std::fs::read_to_string(dir.path().join("operator-token")).expect("token file");
    let op = Client::new(&first.url, token.trim()).expect("client");
    for name in AGENTS {
        op.create_agent(&CreateAgent {
            name: name.to_owned(),
        })
        .await
        .expect("create agent");
    }

    // Senders: each sends numbered messages to every agent in turn, one at a time,
    // and records what the server acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for s in 0..SENDERS {
        let (op, stop) = (op.clone(), stop.clone());
        senders.push(tokio::spawn(async move {
            let mut sent: Vec<(Intent, Option<u64>)> = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let agent = AGENTS[(n as usize) % AGENTS.len()];
                let intent = Intent {
                    agent,
                    sender: s,
                    n,
                    key: uuid::Uuid::now_v7().to_string(),
                };
                let res = op.send_message(agent, &message(&intent), &intent.key).await;
                let ok = res.as_ref().ok().map(|r| r.seq);
                let failed = res.is_err();
                sent.push((intent, ok));
                n += 1;
                if failed {
                    break; // the server is gone; the rest waits for the restart
                }
            }
            sent
        }));
    }
    // Claimers: claim with a short lease and ack about half, leaving leases open.
    let mut claimers = Vec::new();
    for (i, agent) in AGENTS.iter().enumerate() {
        let (op, stop) = (op.clone(), stop.clone());
        claimers.push(tokio::spawn(async move {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok(batch) = op
                    .claim(
                        *agent,
                        &ClaimRequest {
                            limit: Some(4),
                            lease_seconds: Some(1),
                            attempt_id: None,
                        },
                    )
                    .await
                else {
                    break;
                };
                for c in batch.events {
                    k += 1;
                    if (k + i as u64).is_multiple_of(2)
                        && op
                            .ack(*agent, c.event.event_id, c.claim_token)
                            .await
                            .is_err()
                    {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }

    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.child.kill().expect("kill -9"); // SIGKILL: no graceful anything
    let _ = first.child.wait();
    stop.store(true, Ordering::Relaxed);
    let mut intents = Vec::new();
    for s in senders {
        intents.extend(s.await.expect("sender task"));
    }
    for c in claimers {
        let _ = c.await;
    }
    let acknowledged = intents.iter().filter(|(_, r)| r.is_some()).count();
    assert!(
        acknowledged > 30,
        "the load ran before the crash ({acknowledged} sends acknowledged)"
    );

    // Restart on the same file; the operator token file is reused.
    let second = start(dir.path());
    let op = Client::new(&second.url, token.trim()).expect("client");
    // Retry every send whose answer was lost, with its original key: it either
    // replays (it had committed) or commits now, never twice.
    for (intent, receipt) in &mut intents {
        if receipt.is_none() {
            let r = op
                .send_message(intent.agent, &message(intent), &intent.key)
                .await
                .expect("retry after restart");
            *receipt = Some(r.seq);
        }
    }
    // A retry of an already acknowledged send replays the same receipt.
    let (probe, probe_seq) = intents
        .iter()
        .find(|(_, r)| r.is_some())
        .cloned()
        .expect("one send");
    let again = op
        .send_message(probe.agent, &message(&probe), &probe.key)
        .await
        .expect("replay");
    assert_eq!(
        Some(again.seq),
        probe_seq,
        "a committed send replays its receipt after the crash"
    );

    // Drain everything (open leases from before the crash expire after 1 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    for agent in AGENTS {
        loop {
            let snap = op.snapshot(agent).await.expect("snapshot");
            if snap.counts.pending + snap.counts.claimed == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "drain stalled: {snap:?}");
            let batch = op
                .claim(
                    agent,
                    &ClaimRequest {
                        limit: Some(50),
                        lease_seconds: Some(30),
                        attempt_id: None,
                    },
                )
                .await
                .expect("claim");
            if batch.events.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            for c in batch.events {
                op.ack(agent, c.event.event_id, c.claim_token)
                    .await
                    .expect("ack");
            }
        }
    }

    // Every intended message is in its agent's inbox exactly once, at the seq of its
    // receipt, completed; seqs have no gaps; each sender's messages are in order.
    let mut by_seq: HashMap<(&str, u64), (usize, u64)> = HashMap::new();
    for (i, r) in &intents {
        let seq = r.expect("every intent has a receipt by now");
        assert!(
            by_seq.insert((i.agent, seq), (i.sender, i.n)).is_none(),
            "two messages at {} seq {seq}",
            i.agent
        );
    }
    for agent in AGENTS {
        let mut cursor = 0;
        let mut last_n: BTreeMap<u64, u64> = BTreeMap::new();
        let mut count = 0;
        loop {
            let page = op.poll(agent, cursor, Some(1000)).await.expect("poll");
            for e in &page.events {
                assert_eq!(e.seq, cursor + 1, "no gap in {agent}'s inbox");
                cursor = e.seq;
                count += 1;
                assert_eq!(
                    e.status,
                    EventStatus::Completed,
                    "{agent} seq {} was acked",
                    e.seq
                );
                let (sender, n) = by_seq
                    .get(&(agent, e.seq))
                    .copied()
                    .unwrap_or_else(|| panic!("{agent} seq {} has no sender", e.seq));
                if let Some(prev) = last_n.insert(sender as u64, n) {
                    assert!(
                        n > prev,
                        "sender {sender}'s messages to {agent} stay in order"
                    );
                }
            }
            if !page.has_more {
                break;
            }
        }
        let expected = intents.iter().filter(|(i, _)| i.agent == agent).count();
        assert_eq!(
            count, expected,
            "{agent}: every intended message is there exactly once"
        );
    }
    let mut second = second;
    let _ = second.child.kill();
    let _ = second.child.wait();
}
