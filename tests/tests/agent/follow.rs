use std::time::Duration;

use switchboard_tests::sdk::Follower;
use switchboard_tests::sdk::consumer::FollowerConfig;
use switchboard_tests::sdk::proto::{ClaimRequest, InboxEvent, Snapshot};
use switchboard_tests::{Options, TestServer};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_db, send_numbered};

fn ns(events: &[InboxEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.payload.as_ref().unwrap()["n"].as_u64().unwrap())
        .collect()
}

fn small_pages() -> FollowerConfig {
    let mut config = FollowerConfig::default();
    config.page = 7;
    config.sse = false;
    config.min_poll = Duration::from_millis(20);
    config.max_poll = Duration::from_millis(100);
    config
}

#[tokio::test]
async fn the_cursor_survives_a_restart() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 20).await;
    let (db, dir) = local_db().await;

    let mut read = Vec::new();
    let first = Follower::new(
        alice.clone(),
        "alice",
        db.clone(),
        "tail:alice",
        small_pages(),
    );
    let n = first
        .catch_up(
            &mut |e: &InboxEvent| read.push(e.clone()),
            &mut |_: &Snapshot| {},
        )
        .await
        .unwrap();
    assert_eq!(n, 20);
    assert_eq!(ns(&read), (0..20).collect::<Vec<_>>());
    assert_eq!(
        first.cursor().await.unwrap(),
        20,
        "saved after the last page"
    );
    db.close().await;
    drop(first);

    send_numbered(&bob, "alice", 20, 5).await;
    // A new process: the file opened again.
    let db = switchboard_tests::sdk::LocalDb::open(dir.path().join("agent.db"))
        .await
        .unwrap();
    let second = Follower::new(alice, "alice", db, "tail:alice", small_pages());
    let mut read = Vec::new();
    second
        .catch_up(
            &mut |e: &InboxEvent| read.push(e.clone()),
            &mut |_: &Snapshot| {},
        )
        .await
        .unwrap();
    assert_eq!(
        ns(&read),
        (20..25).collect::<Vec<_>>(),
        "only what is new, in order"
    );
}

#[tokio::test]
async fn a_cursor_below_retention_triggers_a_resync_from_the_snapshot() {
    let server = TestServer::with(Options {
        manual_clock: true,
        retention: Some(Duration::from_secs(60)),
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 5).await;
    // Handled and acked elsewhere, then removed by retention.
    let claimed = alice
        .claim(
            "alice",
            &ClaimRequest {
                limit: Some(5),
                lease_seconds: None,
                attempt_id: None,
            },
        )
        .await
        .unwrap();
    for c in claimed.events {
        alice
            .ack("alice", c.event.event_id, c.claim_token)
            .await
            .unwrap();
    }
    server.advance(Duration::from_secs(120));
    server.tick().await;
    send_numbered(&bob, "alice", 5, 2).await;

    let (db, _dir) = local_db().await;
    let follower = Follower::new(alice, "alice", db, "tail:alice", small_pages());
    assert_eq!(follower.cursor().await.unwrap(), 0);
    let (mut read, mut resyncs) = (Vec::new(), Vec::new());
    follower
        .catch_up(
            &mut |e: &InboxEvent| read.push(e.clone()),
            &mut |s: &Snapshot| resyncs.push(s.clone()),
        )
        .await
        .unwrap();
    assert_eq!(resyncs.len(), 1, "the resync hook ran once");
    assert_eq!(resyncs[0].resume_cursor, 5);
    assert_eq!(ns(&read), [5, 6], "then read on from the snapshot");
    assert_eq!(follower.cursor().await.unwrap(), 7);
}

#[tokio::test]
async fn run_follows_new_events_as_they_arrive() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let (db, _dir) = local_db().await;
    let mut config = FollowerConfig::default();
    config.min_poll = Duration::from_secs(60);
    config.max_poll = Duration::from_secs(60);
    let follower = Follower::new(alice, "alice", db, "tail:alice", config);
    let read = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (read, cancel) = (read.clone(), cancel.clone());
        async move {
            follower
                .run(
                    move |e: &InboxEvent| read.lock().unwrap().push(e.clone()),
                    |_: &Snapshot| {},
                    cancel,
                )
                .await
        }
    });
    // Whatever was sent before the subscription is read by the first catch-up;
    // later sends arrive by wake-up.
    for i in 0..3 {
        send_numbered(&bob, "alice", i, 1).await;
        eventually(Duration::from_secs(5), "event followed", || async {
            read.lock().unwrap().len() as u64 == i + 1
        })
        .await;
    }
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(ns(&read.lock().unwrap()), [0, 1, 2]);
}
