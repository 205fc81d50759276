//! Batched acks: one request, one transaction, a result per entry. A stale or
//! unknown entry fails alone; a repeated batch answers as the first did; bad
//! batches are refused whole. With a `claim`, the same transaction claims the next
//! batch.

use serde_json::json;
use std::collections::HashSet;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::proto::{
    AckEntry, ClaimToken, ClaimedEvent, ErrorCode, EventId, EventStatus, ReleaseRequest,
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

fn entries(claimed: &[ClaimedEvent]) -> Vec<AckEntry> {
    claimed
        .iter()
        .map(|c| AckEntry {
            event_id: c.event.event_id,
            claim_token: c.claim_token,
        })
        .collect()
}

/// An ack with a claim: the acks complete, the claim takes the next events in order
/// (never those just acked); a repeat with the claim's attempt id answers the same;
/// a stale entry fails alone; a bad claim refuses the whole request.
#[tokio::test]
async fn an_ack_carries_the_next_claim() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let op = server.operator();
    let sent = send_n(&op, "alice", 7).await;
    // With nothing to ack, it is a claim.
    let mut request = claim_req(3, 60);
    request.attempt_id = Some(uuid::Uuid::new_v4());
    let first = alice
        .ack_and_claim("alice", &[], &request)
        .await
        .expect("claim alone");
    assert!(first.results.is_empty());
    let first = first.claimed.expect("claimed").events;
    let seqs = |c: &[ClaimedEvent]| c.iter().map(|c| c.event.seq).collect::<Vec<_>>();
    assert_eq!(seqs(&first), [sent[0].seq, sent[1].seq, sent[2].seq]);

    let mut request = claim_req(3, 60);
    request.attempt_id = Some(uuid::Uuid::new_v4());
    let mut acks = entries(&first);
    acks.push(AckEntry {
        event_id: EventId::new(),
        claim_token: ClaimToken::new(),
    });
    let answer = alice
        .ack_and_claim("alice", &acks, &request)
        .await
        .expect("ack and claim");
    for r in &answer.results[..3] {
        assert_eq!(
            r.state.as_ref().map(|s| s.status),
            Some(EventStatus::Completed)
        );
    }
    let unknown = answer.results[3].problem.as_ref().expect("unknown event");
    assert_eq!(unknown.status, 404);
    let second = answer.claimed.expect("claimed").events;
    assert_eq!(seqs(&second), [sent[3].seq, sent[4].seq, sent[5].seq]);

    // Its answer was lost: the same request again answers the same.
    let again = alice
        .ack_and_claim("alice", &acks, &request)
        .await
        .expect("repeat");
    assert!(
        again.results[..3]
            .iter()
            .all(|r| r.state.as_ref().map(|s| s.status) == Some(EventStatus::Completed))
    );
    let again = again.claimed.expect("claimed").events;
    assert_eq!(
        again
            .iter()
            .map(|c| (c.event.event_id, c.claim_token))
            .collect::<Vec<_>>(),
        second
            .iter()
            .map(|c| (c.event.event_id, c.claim_token))
            .collect::<Vec<_>>(),
        "the same events, the same tokens"
    );

    // A bad claim refuses the whole request: nothing acked.
    let bad = alice
        .ack_and_claim("alice", &entries(&second), &claim_req(101, 60))
        .await;
    expect_api_error(bad, 422, ErrorCode::ValidationFailed, "a limit of 101");
    let page = alice
        .poll("alice", sent[3].seq - 1, None)
        .await
        .expect("poll");
    assert_eq!(page.events[0].status, EventStatus::Claimed);

    let last = alice
        .ack_and_claim("alice", &entries(&second), &claim_req(3, 60))
        .await
        .expect("ack and claim the rest");
    let last = last.claimed.expect("claimed").events;
    assert_eq!(seqs(&last), [sent[6].seq]);
    let done = alice
        .ack_and_claim("alice", &entries(&last), &claim_req(3, 60))
        .await
        .expect("ack the last");
    assert!(done.claimed.expect("claimed").events.is_empty());
    let totals = op.overview().await.expect("overview").totals;
    assert_eq!(
        (totals.completed, totals.pending, totals.claimed),
        (7, 0, 0)
    );
}

/// Consumers that each ack their last batch with their next claim, all at once:
/// every event is handed to exactly one of them and completed once, and no ack is
/// lost (the inbox ends with every event completed).
#[tokio::test]
async fn consumers_acking_with_their_next_claim_drain_the_inbox_once() {
    const EVENTS: u64 = 120;
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let op = server.operator();
    send_n(&op, "alice", EVENTS).await;
    let mut consumers = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let alice = alice.clone();
        consumers.spawn(async move {
            let mut mine = Vec::new();
            let mut held: Vec<ClaimedEvent> = Vec::new();
            loop {
                let mut request = claim_req(5, 60);
                request.attempt_id = Some(uuid::Uuid::new_v4());
                let answer = alice
                    .ack_and_claim("alice", &entries(&held), &request)
                    .await
                    .expect("ack and claim");
                assert!(
                    answer.results.iter().all(|r| r.state.is_some()),
                    "every ack holds: {:?}",
                    answer.results
                );
                held = answer.claimed.expect("claimed").events;
                if held.is_empty() {
                    return mine;
                }
                mine.extend(held.iter().map(|c| c.event.event_id));
            }
        });
    }
    let mut handed = Vec::new();
    while let Some(mine) = consumers.join_next().await {
        handed.extend(mine.expect("consumer"));
    }
    let unique: HashSet<_> = handed.iter().collect();
    assert_eq!(unique.len(), handed.len(), "an event went to two consumers");
    assert_eq!(handed.len() as u64, EVENTS);
    let totals = op.overview().await.expect("overview").totals;
    assert_eq!(totals.completed, EVENTS);
    assert_eq!((totals.pending, totals.claimed), (0, 0));
}
