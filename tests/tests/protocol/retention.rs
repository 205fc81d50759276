//! Retention and honest cursors (I6): terminal events older than the retention window
//! are removed as a prefix, and a cursor below the low-water mark answers 410 with the
//! oldest valid cursor instead of silently skipping.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use switchboard_server::archive::{ArchiveDir, ArchivedEvent};
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{ErrorCode, EventStatus, RetentionHealth};
use switchboard_tests::{Options, TestServer};

use crate::common::*;

const RETENTION: Duration = Duration::from_secs(60);

async fn server() -> TestServer {
    TestServer::with(Options {
        manual_clock: true,
        retention: Some(RETENTION),
        ..Default::default()
    })
    .await
}

/// Asserts that polling after `cursor` answers 410 cursor_gone naming `oldest`.
async fn assert_gone(client: &Client, cursor: u64, oldest: u64) {
    let err = expect_api_error(
        client.poll("alice", cursor, None).await,
        410,
        ErrorCode::CursorGone,
        &format!("cursor {cursor} is below the low-water mark {oldest}"),
    );
    assert_eq!(
        err.oldest_cursor(),
        Some(oldest),
        "410 names the oldest valid cursor"
    );
}

/// Claims the next `n` events (in seq order) and acks those whose seq is in `ack`;
/// releases the others back to pending.
async fn claim_and_ack(client: &Client, n: u32, ack: &[u64]) {
    for c in claim(client, "alice", n, 600).await {
        let id = c.event.event_id;
        if ack.contains(&c.event.seq) {
            client.ack("alice", id, c.claim_token).await.expect("ack");
        } else {
            let req = switchboard_tests::sdk::proto::ReleaseRequest {
                claim_token: c.claim_token,
                delay_seconds: None,
                error: None,
                terminal: false,
            };
            client.release("alice", id, &req).await.expect("release");
        }
    }
}

#[tokio::test]
async fn cursor_below_the_low_water_mark_is_gone() {
    let server = server().await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 10).await;
    claim_and_ack(&alice, 6, &[1, 2, 3, 4, 5, 6]).await;

    server.advance(RETENTION / 2);
    let report = server.tick().await;
    assert_eq!(
        report.retention.events_removed, 0,
        "younger than the window"
    );
    assert_eq!(
        alice
            .poll("alice", 0, None)
            .await
            .expect("poll")
            .events
            .len(),
        10
    );

    server.advance(RETENTION / 2 + Duration::from_secs(1));
    let report = server.tick().await;
    assert_eq!(report.retention.events_removed, 6);

    assert_gone(&alice, 0, 6).await;
    assert_gone(&alice, 5, 6).await;
    let page = alice
        .poll("alice", 6, None)
        .await
        .expect("poll at the mark");
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        [7, 8, 9, 10],
        "nothing at or after the mark was removed"
    );
    assert!(page.events.iter().all(|e| e.status == EventStatus::Pending));

    let snap = alice.snapshot("alice").await.expect("snapshot");
    assert_eq!(
        (snap.head_cursor, snap.oldest_cursor, snap.resume_cursor),
        (10, 6, 6)
    );
    assert_eq!(snap.counts.completed, 0, "the acked events are gone");
    assert_eq!(snap.counts.pending, 4);
}

#[tokio::test]
async fn an_open_event_holds_retention_behind_it() {
    let server = server().await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 5).await;
    // 1, 2 and 4 done; 3 back to pending; 5 never claimed.
    claim_and_ack(&alice, 4, &[1, 2, 4]).await;

    server.advance(RETENTION + Duration::from_secs(1));
    let report = server.tick().await;
    assert_eq!(
        report.retention.events_removed, 2,
        "only the prefix before the pending seq 3 goes"
    );
    assert_gone(&alice, 1, 2).await;
    let page = alice
        .poll("alice", 2, None)
        .await
        .expect("poll at the mark");
    let rows: Vec<(u64, EventStatus)> = page.events.iter().map(|e| (e.seq, e.status)).collect();
    assert_eq!(
        rows,
        [
            (3, EventStatus::Pending),
            (4, EventStatus::Completed),
            (5, EventStatus::Pending)
        ],
        "the completed seq 4 stays behind the open seq 3"
    );
    let snap = alice.snapshot("alice").await.expect("snapshot");
    assert_eq!((snap.oldest_cursor, snap.resume_cursor), (2, 2));

    // Finish the rest; once they are old enough the whole inbox goes.
    claim_and_ack(&alice, 2, &[3, 5]).await;
    server.advance(RETENTION / 2);
    assert_eq!(
        server.tick().await.retention.events_removed,
        0,
        "3 and 5 are young"
    );
    server.advance(RETENTION / 2 + Duration::from_secs(1));
    assert_eq!(server.tick().await.retention.events_removed, 3);
    assert_gone(&alice, 4, 5).await;
    let page = alice
        .poll("alice", 5, None)
        .await
        .expect("poll at the head");
    assert!(page.events.is_empty());
    assert_eq!(page.next_cursor, 5);
    let snap = alice.snapshot("alice").await.expect("snapshot");
    assert_eq!(
        (snap.head_cursor, snap.oldest_cursor, snap.resume_cursor),
        (5, 5, 5)
    );
}

/// Waits until some session of the server's PostgreSQL database waits on a row lock
/// (the retention pass queued behind the held send). On SQLite the pass queues for
/// the single writer instead, which no query shows: a short pause stands in.
async fn until_a_statement_waits_on_a_lock(server: &TestServer) {
    if switchboard_tests::backend() != "postgres" {
        tokio::time::sleep(Duration::from_millis(300)).await;
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let rows = server
            .stored_rows(
                "SELECT count(*)::text FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .await;
        if rows[0][0].as_deref() != Some("0") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the retention pass never waited for the held send's row lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// I3 + I6 against a send in flight. Retention looks at an inbox whose events are all
/// old and terminal, while a send to it has written event 2 and waits to commit
/// (holding the agent's row). The pass must wait for that send and then keep event 2:
/// removing the prefix `..= 2` would lose a message whose sender got 201.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_waiting_for_a_send_keeps_its_event() {
    let gate = Arc::new(Gate::default());
    let server = TestServer::with(Options {
        manual_clock: true,
        retention: Some(RETENTION),
        hooks: gate_hooks(&gate),
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 1).await;
    claim_and_ack(&alice, 1, &[1]).await;
    server.advance(RETENTION + Duration::from_secs(1));

    gate.armed.store(true, Ordering::SeqCst);
    let sender = alice.clone();
    let sending = tokio::spawn(async move { send(&sender, "alice", json!("held")).await });
    tokio::time::timeout(Duration::from_secs(10), gate.entered.notified())
        .await
        .expect("the send reaches its commit point");

    let server = Arc::new(server);
    let pass = {
        let server = server.clone();
        tokio::spawn(async move { server.tick().await })
    };
    until_a_statement_waits_on_a_lock(&server).await;
    gate.open.notify_one();
    let receipt = tokio::time::timeout(Duration::from_secs(10), sending)
        .await
        .expect("the send commits once released")
        .expect("send task");
    assert_eq!(receipt.seq, 2);
    let report = tokio::time::timeout(Duration::from_secs(10), pass)
        .await
        .expect("the retention pass ends")
        .expect("pass task");
    assert!(
        report.retention.events_removed <= 1,
        "only the acked event 1 may go, not the new one: {:?}",
        report.retention
    );

    let page = alice
        .poll("alice", 1, None)
        .await
        .expect("a cursor at the acked event is still valid");
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [2], "the committed event 2 is in the inbox");
    let claimed = claim(&alice, "alice", 10, 60).await;
    assert_eq!(
        claimed.iter().map(|c| c.event.seq).collect::<Vec<_>>(),
        [2],
        "and claimable"
    );
}

/// The same race, at volume and on the real clock: retention 0 and background passes
/// every 5 ms, while 24 agents each loop send → claim → ack. Every send that got 201
/// must be claimed by its agent; a pass that removed a pending event shows up as a
/// message that never arrives (or a 410 on the agent's cursor).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_every_few_ms_loses_no_acknowledged_send() {
    const AGENTS: usize = 24;
    const ROUNDS: u64 = 50;
    let server = TestServer::with(Options {
        retention: Some(Duration::ZERO),
        worker_interval: Some(Duration::from_millis(5)),
        ..Default::default()
    })
    .await;
    let mut agents = Vec::new();
    for i in 0..AGENTS {
        let name = format!("agent-{i}");
        let (_, client) = server.agent(&name).await;
        agents.push((name, client));
    }
    let loops = agents.into_iter().map(|(name, client)| {
        tokio::spawn(async move {
            let mut lost = Vec::new();
            for round in 1..=ROUNDS {
                let receipt = send(&client, &name, json!({ "round": round })).await;
                let deadline = std::time::Instant::now() + Duration::from_secs(3);
                let mut got = false;
                while !got && std::time::Instant::now() < deadline {
                    for c in claim(&client, &name, 10, 60).await {
                        got |= c.event.event_id == receipt.event_id;
                        client
                            .ack(&name, c.event.event_id, c.claim_token)
                            .await
                            .expect("ack of a claimed event (a 404: retention removed it)");
                    }
                    if !got {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                if !got {
                    lost.push(receipt.seq);
                }
            }
            (name, lost)
        })
    });
    let mut lost = Vec::new();
    for handle in loops {
        let (name, seqs) = handle.await.expect("agent loop");
        if !seqs.is_empty() {
            lost.push((name, seqs));
        }
    }
    let total: usize = lost.iter().map(|(_, s)| s.len()).sum();
    assert!(
        lost.is_empty(),
        "{total} of {} acknowledged sends never reached their agent: {lost:?}",
        AGENTS as u64 * ROUNDS
    );
}

/// An archived server (`--archive-dir`) on the manual clock, and its directory.
async fn archived_server() -> (TestServer, tempfile::TempDir) {
    let archive = tempfile::tempdir().expect("archive dir");
    let server = TestServer::with(Options {
        manual_clock: true,
        retention: Some(RETENTION),
        archive_dir: Some(archive.path().to_owned()),
        ..Default::default()
    })
    .await;
    (server, archive)
}

/// The overview's retention health (the operator's tenant is the deployment's).
async fn retention_health(op: &Client) -> RetentionHealth {
    op.overview()
        .await
        .expect("overview")
        .retention
        .expect("retention")
}

/// Everything in the archive, one copy of each event.
fn archived(dir: &std::path::Path) -> Vec<ArchivedEvent> {
    let archive = ArchiveDir::existing(dir).expect("archive");
    archive
        .read_range(&archive.segments(None, None, None).expect("list"))
        .expect("read")
}

#[tokio::test]
async fn retention_archives_what_it_removes_before_it_removes_it() {
    let (server, dir) = archived_server().await;
    let (_, alice) = server.agent("alice").await;
    let sent = send_n(&alice, "alice", 5).await;
    claim_and_ack(&alice, 3, &[1, 2, 3]).await;

    server.advance(RETENTION + Duration::from_secs(1));
    let report = server.tick().await;
    assert_eq!(
        (report.retention.events_removed, report.retention.archived),
        (3, 3)
    );
    assert_eq!(report.retention.held_back, None);
    assert_gone(&alice, 0, 3).await;

    let archived = archived(dir.path());
    assert_eq!(
        archived
            .iter()
            .map(|e| (
                e.agent.as_str(),
                e.event.seq,
                e.event.event_id,
                e.event.status
            ))
            .collect::<Vec<_>>(),
        (0..3)
            .map(|i| (
                "alice",
                i as u64 + 1,
                sent[i].event_id,
                EventStatus::Completed
            ))
            .collect::<Vec<_>>()
    );
    for e in &archived {
        let actions: Vec<_> = e.history.iter().map(|h| h.action.as_str()).collect();
        assert_eq!(actions, ["created", "claimed", "acked"], "{}", e.event.seq);
    }

    let op = server.operator();
    assert_eq!(metric(&op, "events_archived_total").await, 3.0);
    assert_eq!(metric(&op, "retention_held_back").await, 0.0);
    let retention = retention_health(&op).await;
    assert!(retention.archiving);
    assert_eq!(retention.archived_total, 3);
    assert_eq!(retention.held_back, None);
}

#[tokio::test]
async fn an_archive_that_cannot_be_written_holds_retention_back() {
    let (server, dir) = archived_server().await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 4).await;
    claim_and_ack(&alice, 4, &[1, 2, 3, 4]).await;
    // A file where the archive's directory was: every write fails, as on a full or
    // read-only disk (the tests run as root, whom permissions do not stop).
    let op = server.operator();
    let blocker = dir.path().to_owned();
    std::fs::remove_dir(&blocker).expect("empty archive");
    std::fs::write(&blocker, b"").expect("blocker");

    server.advance(RETENTION + Duration::from_secs(1));
    let report = server.tick().await;
    assert_eq!(
        report.retention.events_removed, 0,
        "nothing removed unarchived"
    );
    assert!(report.retention.held_back.is_some());
    let page = alice.poll("alice", 0, None).await.expect("nothing is gone");
    assert_eq!(page.events.len(), 4);
    assert_eq!(metric(&op, "retention_held_back").await, 1.0);
    let held = retention_health(&op).await.held_back.expect("held back");
    assert!(
        held.reason.contains(&blocker.display().to_string())
            && held.reason.contains("retention removes nothing"),
        "{}",
        held.reason
    );
    // Still held on the next pass.
    assert_eq!(server.tick().await.retention.events_removed, 0);

    // The operator fixes the archive: the next pass archives and removes.
    std::fs::remove_file(&blocker).expect("unblock");
    std::fs::create_dir(&blocker).expect("archive dir");
    let report = server.tick().await;
    assert_eq!(
        (report.retention.events_removed, report.retention.archived),
        (4, 4)
    );
    assert_gone(&alice, 0, 4).await;
    assert_eq!(archived(dir.path()).len(), 4);
    assert_eq!(metric(&op, "retention_held_back").await, 0.0);
    assert_eq!(retention_health(&op).await.held_back, None);
}
