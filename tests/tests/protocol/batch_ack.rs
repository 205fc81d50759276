//! Batched acks: one request, one transaction, a result per entry. A stale or
//! unknown entry fails alone; a repeated batch answers as the first did; bad
//! batches are refused whole.

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::proto::{
    AckEntry, ClaimToken, ErrorCode, EventId, EventStatus, ReleaseRequest,
};

use crate::common::*;

#[tokio::test]
async fn a_batch_acks_each_entry_and_fails_only_the_stale_ones() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let op = server.operator();
    send_n(&op, "alice", 5).await;
    let claimed = claim(&alice, "alice", 5, 60).await;
    assert_eq!(claimed.len(), 5);
    // The fifth is released: its token is spent.
    let spent = &claimed[4];
    alice
        .release(
            "alice",
            spent.event.event_id,
            &ReleaseRequest {
                claim_token: spent.claim_token,
                delay_seconds: Some(3600),
                error: None,
                terminal: false,
            },
        )
        .await
        .expect("release");
    let delivered_before = metric(&op, "events_acked_total").await;
    let stale_before = metric(&op, "stale_claim_rejections_total").await;

    let unknown = EventId::new();
    let mut entries: Vec<AckEntry> = claimed
        .iter()
        .map(|c| AckEntry {
            event_id: c.event.event_id,
            claim_token: c.claim_token,
        })
        .collect();
    entries.push(AckEntry {
        event_id: unknown,
        claim_token: ClaimToken::new(),
    });
    let result = alice.ack_batch("alice", &entries).await.expect("batch");
    assert_eq!(result.results.len(), 6, "one result per entry");
    for (r, e) in result.results.iter().zip(&entries) {
        assert_eq!(r.event_id, e.event_id, "in the request's order");
    }
    for r in &result.results[..4] {
        let state = r.state.as_ref().expect("acked");
        assert_eq!(state.status, EventStatus::Completed);
        assert!(r.problem.is_none());
    }
    let stale = result.results[4]
        .problem
        .as_ref()
        .expect("the spent token fails");
    assert_eq!(stale.status, 409);
    assert_eq!(stale.code.as_deref(), Some(ErrorCode::StaleClaim.as_str()));
    let missing = result.results[5].problem.as_ref().expect("unknown event");
    assert_eq!(missing.status, 404);
    assert_eq!(
        metric(&op, "events_acked_total").await,
        delivered_before + 4.0
    );
    assert_eq!(
        metric(&op, "stale_claim_rejections_total").await,
        stale_before + 1.0
    );

    // The same batch again (its answer was lost): the same answers, nothing counted twice.
    let again = alice
        .ack_batch("alice", &entries[..4])
        .await
        .expect("repeat");
    assert!(
        again
            .results
            .iter()
            .all(|r| r.state.as_ref().map(|s| s.status) == Some(EventStatus::Completed))
    );
    assert_eq!(
        metric(&op, "events_acked_total").await,
        delivered_before + 4.0
    );
    let overview = op.overview().await.expect("overview").totals;
    assert_eq!((overview.completed, overview.pending), (4, 1));
}

#[tokio::test]
async fn bad_batches_are_refused_whole() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    send(&server.operator(), "alice", json!({ "n": 1 })).await;
    let c = claim_one(&alice, "alice", 60).await;
    let entry = AckEntry {
        event_id: c.event.event_id,
        claim_token: c.claim_token,
    };
    let empty = alice.ack_batch("alice", &[]).await;
    expect_api_error(empty, 422, ErrorCode::ValidationFailed, "an empty batch");
    let twice = alice.ack_batch("alice", &[entry, entry]).await;
    let err = expect_api_error(twice, 422, ErrorCode::ValidationFailed, "an event twice");
    assert!(err.to_string().contains("twice"), "{err}");
    let many: Vec<AckEntry> = (0..101)
        .map(|_| AckEntry {
            event_id: EventId::new(),
            claim_token: ClaimToken::new(),
        })
        .collect();
    let too_many = alice.ack_batch("alice", &many).await;
    expect_api_error(too_many, 422, ErrorCode::ValidationFailed, "101 entries");
    // Nothing was acked by the refused batches.
    let page = alice.poll("alice", 0, None).await.expect("poll");
    assert_eq!(page.events[0].status, EventStatus::Claimed);
    // Another agent's inbox: 404, as for a single ack.
    let (_, bob) = server.agent("bob").await;
    let foreign = bob.ack_batch("alice", &[entry]).await;
    expect_api_error(foreign, 404, ErrorCode::NotFound, "another agent's inbox");
}
