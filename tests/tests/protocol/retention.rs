//! Retention and honest cursors (I6): terminal events older than the retention window
//! are removed as a prefix, and a cursor below the low-water mark answers 410 with the
//! oldest valid cursor instead of silently skipping.

use std::time::Duration;

use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{ErrorCode, EventStatus};
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
