//! Concurrency: exclusive claims under contention (I4) and gap-free cursors while
//! senders race (I2, I3).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{ClaimToken, EventId, EventStatus, SendReceipt};

use crate::common::*;

/// Sends `tasks × per_task` messages to `agent` from `tasks` concurrent tasks. Each
/// payload names its task and its index within the task.
async fn send_concurrently(
    client: &Client,
    agent: &str,
    tasks: u64,
    per_task: u64,
) -> Vec<Vec<SendReceipt>> {
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (client, agent) = (client.clone(), agent.to_owned());
            tokio::spawn(async move {
                let mut receipts = Vec::new();
                for i in 0..per_task {
                    receipts.push(send(&client, &agent, json!({ "task": t, "i": i })).await);
                }
                receipts
            })
        })
        .collect();
    let mut all = Vec::new();
    for h in handles {
        all.push(h.await.expect("sender task"));
    }
    all
}

/// What one claimer got: every (event, token, seq, attempts) it claimed, and its acks.
#[derive(Default)]
struct Claimed {
    claims: Vec<(EventId, ClaimToken, u64, u32)>,
    acked: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_get_each_event_exactly_once() {
    const EVENTS: u64 = 2000;
    const CLAIMERS: usize = 8;
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let started = Instant::now();
    let receipts = send_concurrently(&alice, "alice", 4, EVENTS / 4).await;
    let sent: HashSet<EventId> = receipts.iter().flatten().map(|r| r.event_id).collect();
    assert_eq!(sent.len() as u64, EVENTS);
    let sending = started.elapsed();

    // A lease far longer than the test: nothing may be handed out twice.
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|_| {
            let alice = alice.clone();
            tokio::spawn(async move {
                let mut mine = Claimed::default();
                loop {
                    let batch = claim(&alice, "alice", 4, 3600).await;
                    if batch.is_empty() {
                        // Everything was sent up front, so an empty claim means every
                        // event is leased or done.
                        break;
                    }
                    for c in batch {
                        let e = &c.event;
                        mine.claims
                            .push((e.event_id, c.claim_token, e.seq, e.attempts));
                        let state = alice
                            .ack("alice", e.event_id, c.claim_token)
                            .await
                            .unwrap_or_else(|err| panic!("ack of seq {}: {err}", e.seq));
                        assert_eq!(state.status, EventStatus::Completed);
                        mine.acked += 1;
                    }
                }
                mine
            })
        })
        .collect();
    let mut per_claimer = Vec::new();
    for h in claimers {
        per_claimer.push(h.await.expect("claimer task"));
    }

    let mut times_claimed: HashMap<EventId, usize> = HashMap::new();
    let mut tokens = HashSet::new();
    let mut seqs = Vec::new();
    for mine in &per_claimer {
        for (id, token, seq, attempts) in &mine.claims {
            *times_claimed.entry(*id).or_default() += 1;
            assert!(tokens.insert(*token), "claim token {token} minted twice");
            assert_eq!(
                *attempts, 1,
                "seq {seq} was claimed before (attempts {attempts})"
            );
            seqs.push(*seq);
        }
    }
    let doubles: Vec<_> = times_claimed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        doubles.is_empty(),
        "events handed to more than one claimer while leased: {doubles:?}"
    );
    let claimed_ids: HashSet<EventId> = times_claimed.keys().copied().collect();
    assert_eq!(claimed_ids, sent, "every sent event was claimed");
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=EVENTS).collect::<Vec<_>>());
    let acked: usize = per_claimer.iter().map(|m| m.acked).sum();
    assert_eq!(acked as u64, EVENTS, "every event acked exactly once");

    let snap = alice.snapshot("alice").await.expect("snapshot");
    assert_eq!(snap.counts.completed, EVENTS);
    assert_eq!((snap.counts.pending, snap.counts.claimed), (0, 0));
    assert_eq!(snap.head_cursor, EVENTS);
    let spread: Vec<usize> = per_claimer.iter().map(|m| m.claims.len()).collect();
    eprintln!(
        "sent {EVENTS} in {sending:?}; claimed+acked in {:?}; per claimer {spread:?}",
        started.elapsed() - sending
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cursor_reader_sees_every_event_once_without_gaps() {
    const TASKS: u64 = 4;
    const PER_TASK: u64 = 250;
    const TOTAL: usize = (TASKS * PER_TASK) as usize;
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;

    let senders = tokio::spawn({
        let bob = bob.clone();
        async move { send_concurrently(&bob, "alice", TASKS, PER_TASK).await }
    });

    // seen[k] is the event with seq k + 1. `cursors` holds every cursor reached.
    let mut seen: Vec<(EventId, u64, u64)> = Vec::new();
    let mut cursors = vec![0u64];
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < TOTAL {
        assert!(Instant::now() < deadline, "saw only {} events", seen.len());
        let cursor = *cursors.last().expect("a cursor");
        let page = alice.poll("alice", cursor, Some(64)).await.expect("poll");
        for e in &page.events {
            assert_eq!(
                e.seq,
                seen.len() as u64 + 1,
                "after cursor {cursor} the next seq must follow without a gap"
            );
            let p = e
                .payload
                .as_ref()
                .expect("pending events carry the payload");
            let (t, i) = (
                p["task"].as_u64().expect("task"),
                p["i"].as_u64().expect("i"),
            );
            seen.push((e.event_id, t, i));
        }
        assert_eq!(
            page.next_cursor,
            seen.len() as u64,
            "next_cursor is the last seq"
        );
        if page.events.is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        }
        cursors.push(page.next_cursor);

        // I2: from an earlier cursor, nothing new may appear at or below what was seen.
        let seen_up_to = seen.len() as u64;
        let earlier = cursors[cursors.len() / 2];
        let again = alice
            .poll("alice", earlier, Some(1000))
            .await
            .expect("re-poll");
        for e in again.events.iter().take_while(|e| e.seq <= seen_up_to) {
            assert_eq!(
                e.event_id,
                seen[e.seq as usize - 1].0,
                "re-poll after {earlier} shows a different event at seq {} <= {seen_up_to}",
                e.seq
            );
        }
        let behind = again.events.iter().filter(|e| e.seq <= seen_up_to).count() as u64;
        assert_eq!(
            behind,
            seen_up_to - earlier,
            "no event missing or added behind the cursor"
        );
    }
    let receipts = senders.await.expect("senders");

    assert_eq!(seen.len(), TOTAL);
    let ids: HashSet<EventId> = seen.iter().map(|s| s.0).collect();
    assert_eq!(ids.len(), TOTAL, "no event seen twice");
    for (t, task_receipts) in receipts.iter().enumerate() {
        for (i, r) in task_receipts.iter().enumerate() {
            let got = seen[r.seq as usize - 1];
            assert_eq!(
                got,
                (r.event_id, t as u64, i as u64),
                "receipt seq {} names the event the reader saw there",
                r.seq
            );
        }
        let in_order = task_receipts.windows(2).all(|w| w[0].seq < w[1].seq);
        assert!(in_order, "task {t}'s sequential sends got increasing seqs");
    }
    let tail = alice.poll("alice", TOTAL as u64, None).await.expect("poll");
    assert!(tail.events.is_empty(), "nothing beyond the last send");
}

/// A lone claimer gets every pending event it asks for while the background passes
/// (scavenger, expiry, retention) run every millisecond. `SKIP LOCKED` skips what
/// anyone holds locked, and InnoDB locks every row a plan reads: a pass whose scan
/// read pending rows on the way would make the claim come back short (MariaDB did,
/// until each pass named the index that holds only what it looks for).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_claim_is_not_cut_short_by_the_background_passes() {
    const ROUNDS: usize = 150;
    let server = TestServer::with(switchboard_tests::Options {
        worker_interval: Some(Duration::from_millis(1)),
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let op = server.operator();
    for round in 0..ROUNDS {
        for i in 0..3 {
            send(&op, "alice", json!({ "round": round, "i": i })).await;
        }
        let batch = claim(&alice, "alice", 3, 60).await;
        assert_eq!(batch.len(), 3, "round {round}: a claim of 3 pending events");
        for c in batch {
            alice
                .ack("alice", c.event.event_id, c.claim_token)
                .await
                .expect("ack");
        }
    }
}
