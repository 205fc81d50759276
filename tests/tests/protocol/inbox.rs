//! The inbox round trip (send → poll → claim → ack), claim order, attempts and claim
//! tokens, poll pagination and the limits of poll and claim.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::sdk::proto::{
    ClaimRequest, ErrorCode, EventStatus, ReleaseRequest, SendMessage, Sender,
};
use switchboard_tests::{Options, TestServer};

use crate::common::*;

#[tokio::test]
async fn send_poll_claim_ack_round_trip() {
    let server = TestServer::start().await;
    let (alice_info, alice) = server.agent("alice").await;
    let (bob_info, bob) = server.agent("bob").await;

    let first = SendMessage {
        payload: json!({"task": "index", "files": ["a.rs", "b.rs"]}),
        correlation_id: Some("job-1".into()),
        ..Default::default()
    };
    let r1 = send_msg(&bob, "alice", &first).await;
    let r2 = send(&bob, "alice", json!({"task": "second"})).await;
    assert_eq!((r1.seq, r2.seq), (1, 2), "per-agent seq starts at 1");
    assert_eq!(
        r1.agent_id, alice_info.agent_id,
        "receipt names the recipient"
    );

    let page = alice.poll("alice", 0, None).await.expect("poll");
    assert_eq!((page.next_cursor, page.has_more), (2, false));
    let seqs: Vec<u64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2]);
    let e1 = &page.events[0];
    assert_eq!(e1.event_id, r1.event_id);
    assert_eq!(
        e1.payload.as_ref(),
        Some(&first.payload),
        "payload arrives intact"
    );
    assert_eq!(e1.correlation_id.as_deref(), Some("job-1"));
    assert_eq!(e1.status, EventStatus::Pending);
    assert_eq!(
        (e1.attempts, e1.max_attempts),
        (0, 5),
        "default max_attempts is 5"
    );
    assert_eq!(
        e1.sender,
        Sender::Agent {
            agent_id: bob_info.agent_id,
            name: "bob".into()
        }
    );

    let claimed = claim_one(&alice, "alice", 60).await;
    assert_eq!(claimed.event.event_id, r1.event_id, "oldest event first");
    assert_eq!(claimed.event.status, EventStatus::Claimed);
    assert_eq!(claimed.event.attempts, 1);
    assert_eq!(claimed.event.payload.as_ref(), Some(&first.payload));
    let page = alice.poll("alice", 0, Some(1)).await.expect("poll");
    assert_eq!(
        page.events[0].status,
        EventStatus::Claimed,
        "poll shows the claim"
    );

    let state = alice
        .ack("alice", r1.event_id, claimed.claim_token)
        .await
        .expect("ack");
    assert_eq!(state.status, EventStatus::Completed);
    assert_eq!(state.attempts, 1);
    assert_eq!(
        state.lease_expires_at, None,
        "a completed event holds no lease"
    );
    let again = alice
        .ack("alice", r1.event_id, claimed.claim_token)
        .await
        .expect("a retried ack of the same claim succeeds again");
    assert_eq!(again.status, EventStatus::Completed);

    let page = alice.poll("alice", 0, None).await.expect("poll");
    assert_eq!(page.events[0].status, EventStatus::Completed);
    assert_eq!(
        page.events[0].payload, None,
        "terminal events drop the payload"
    );
    assert_eq!(page.events[1].status, EventStatus::Pending);

    let detail = server.operator().event(r1.event_id).await.expect("event");
    let steps: Vec<(&str, Option<&str>)> = detail
        .history
        .iter()
        .map(|h| (h.action.as_str(), h.detail.as_deref()))
        .collect();
    assert_eq!(
        steps,
        [
            ("created", None),
            ("claimed", Some("attempt 1 of 5")),
            ("acked", None)
        ],
        "history records each transition once"
    );

    let snap = alice.snapshot("alice").await.expect("snapshot");
    assert_eq!((snap.head_cursor, snap.oldest_cursor), (2, 0));
    assert_eq!((snap.counts.completed, snap.counts.pending), (1, 1));
    assert_eq!(snap.resume_cursor, 1, "open work starts at seq 2");
}

#[tokio::test]
async fn claim_takes_priority_first_then_seq() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    // seq:      1  2   3  4  5   6
    let prios = [0, 5, -3, 5, 0, 10];
    for (i, p) in prios.into_iter().enumerate() {
        let m = SendMessage {
            payload: json!({ "i": i }),
            priority: Some(p),
            ..Default::default()
        };
        send_msg(&alice, "alice", &m).await;
    }
    let first: Vec<u64> = claim(&alice, "alice", 2, 60)
        .await
        .iter()
        .map(|c| c.event.seq)
        .collect();
    assert_eq!(first, [6, 2], "highest priority first; ties by seq");
    let rest: Vec<(i32, u64)> = claim(&alice, "alice", 100, 60)
        .await
        .iter()
        .map(|c| (c.event.priority, c.event.seq))
        .collect();
    assert_eq!(rest, [(5, 4), (0, 1), (0, 5), (-3, 3)]);
    assert!(
        claim(&alice, "alice", 100, 60).await.is_empty(),
        "everything is leased now"
    );
}

#[tokio::test]
async fn each_claim_counts_an_attempt_and_mints_a_new_token() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let sent = send(&alice, "alice", json!("work")).await;

    let c1 = claim_one(&alice, "alice", 10).await;
    assert_eq!(c1.event.attempts, 1);
    let released = alice
        .release(
            "alice",
            sent.event_id,
            &ReleaseRequest {
                claim_token: c1.claim_token,
                delay_seconds: None,
                error: None,
                terminal: false,
            },
        )
        .await
        .expect("release");
    assert_eq!(released.status, EventStatus::Pending);
    assert_eq!(released.attempts, 1, "a release does not count an attempt");

    let c2 = claim_one(&alice, "alice", 10).await;
    assert_eq!(c2.event.attempts, 2);
    server.advance(Duration::from_secs(11));
    // The lease ran out: the claim itself hands the event out again.
    let c3 = claim_one(&alice, "alice", 10).await;
    assert_eq!(c3.event.event_id, sent.event_id);
    assert_eq!(c3.event.attempts, 3);
    let tokens = [c1.claim_token, c2.claim_token, c3.claim_token];
    assert!(
        tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2],
        "every claim mints a new token: {tokens:?}"
    );
    for old in [c1.claim_token, c2.claim_token] {
        expect_api_error(
            alice.ack("alice", sent.event_id, old).await,
            409,
            ErrorCode::StaleClaim,
            "an older claim's token is stale",
        );
    }
    alice
        .ack("alice", sent.event_id, c3.claim_token)
        .await
        .expect("the current token acks");
    let detail = server.operator().event(sent.event_id).await.expect("event");
    let claims: Vec<&str> = detail
        .history
        .iter()
        .filter(|h| h.action == "claimed")
        .filter_map(|h| h.detail.as_deref())
        .collect();
    assert_eq!(
        claims,
        ["attempt 1 of 5", "attempt 2 of 5", "attempt 3 of 5"]
    );
}

#[tokio::test]
async fn poll_pages_in_seq_order() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 25).await;

    let mut cursor = 0;
    let mut seen = Vec::new();
    let mut pages = Vec::new();
    loop {
        let page = alice.poll("alice", cursor, Some(10)).await.expect("poll");
        assert!(
            page.events.len() <= 10,
            "a page holds at most `limit` events"
        );
        for e in &page.events {
            assert_eq!(
                e.payload,
                Some(json!({ "n": e.seq })),
                "payload of seq {}",
                e.seq
            );
            seen.push(e.seq);
        }
        pages.push((page.events.len(), page.next_cursor, page.has_more));
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(
        seen,
        (1..=25).collect::<Vec<_>>(),
        "every event once, in order"
    );
    assert_eq!(pages, [(10, 10, true), (10, 20, true), (5, 25, false)]);

    let exact = alice.poll("alice", 20, Some(5)).await.expect("poll");
    assert_eq!(exact.events.len(), 5);
    assert!(
        !exact.has_more,
        "a page that ends exactly at the head has no more"
    );
    let empty = alice.poll("alice", 25, Some(10)).await.expect("poll");
    assert!(empty.events.is_empty());
    assert_eq!(
        (empty.next_cursor, empty.has_more),
        (25, false),
        "an empty page keeps the cursor"
    );
    let default = alice.poll("alice", 0, None).await.expect("poll");
    assert_eq!(
        default.events.len(),
        25,
        "the default limit (100) covers all 25"
    );
}

#[tokio::test]
async fn poll_and_claim_limits_are_enforced() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    send_n(&alice, "alice", 3).await;

    for limit in [0, 1001] {
        let err = expect_api_error(
            alice.poll("alice", 0, Some(limit)).await,
            422,
            ErrorCode::ValidationFailed,
            &format!("poll limit {limit} is out of 1..=1000"),
        );
        let field = err.problem().and_then(|p| p.extensions.get("field"));
        assert_eq!(field, Some(&json!("limit")), "the problem names the field");
    }
    let page = alice
        .poll("alice", 0, Some(1000))
        .await
        .expect("limit 1000");
    assert_eq!(page.events.len(), 3);
    expect_api_error(
        alice.poll("alice", 4, None).await,
        400,
        ErrorCode::ValidationFailed,
        "a cursor ahead of the head is invalid",
    );

    let bad_claims = [
        (Some(0), None, "limit"),
        (Some(101), None, "limit"),
        (None, Some(0), "lease_seconds"),
        (None, Some(43_201), "lease_seconds"),
    ];
    for (limit, lease_seconds, field) in bad_claims {
        let req = ClaimRequest {
            limit,
            lease_seconds,
            attempt_id: None,
        };
        let err = expect_api_error(
            alice.claim("alice", &req).await,
            422,
            ErrorCode::ValidationFailed,
            &format!("claim {req:?} is out of range"),
        );
        let got = err.problem().and_then(|p| p.extensions.get("field"));
        assert_eq!(got, Some(&json!(field)));
    }
    assert_eq!(
        claim(&alice, "alice", 100, 43_200).await.len(),
        3,
        "the upper bounds themselves are accepted"
    );
    let default = ClaimRequest::default();
    send_n(&alice, "alice", 2).await;
    let got = alice.claim("alice", &default).await.expect("claim");
    assert_eq!(got.events.len(), 1, "the default claim limit is 1");
}

/// A claim with an attempt id is safe to retry (as SQS's `ReceiveRequestAttemptId`):
/// sent again, as after a lost answer, it returns the events it took with the same
/// tokens and claims nothing more, so nothing is left leased to nobody and no later
/// event is handed out first. A reused attempt id never revives an old token: each
/// claim's token counts the claim (I4).
#[tokio::test]
async fn a_retried_claim_returns_what_its_lost_answer_took() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_n(&bob, "alice", 3).await;
    let attempt = uuid::Uuid::new_v4();
    let with = |attempt: uuid::Uuid, limit: u32| ClaimRequest {
        limit: Some(limit),
        lease_seconds: Some(60),
        attempt_id: Some(attempt),
    };

    let first = alice
        .claim("alice", &with(attempt, 2))
        .await
        .expect("claim");
    let seqs = |c: &[switchboard_tests::sdk::proto::ClaimedEvent]| {
        c.iter().map(|c| c.event.seq).collect::<Vec<_>>()
    };
    assert_eq!(seqs(&first.events), [1, 2]);
    let again = alice
        .claim("alice", &with(attempt, 2))
        .await
        .expect("retry");
    assert_eq!(again, first, "the same events, tokens and leases");
    // Nothing more was claimed: another claim gets event 3.
    let other = alice
        .claim("alice", &with(uuid::Uuid::new_v4(), 2))
        .await
        .expect("claim");
    assert_eq!(seqs(&other.events), [3]);

    // Acked events are no longer the attempt's; the rest still are.
    let (e1, e2) = (&first.events[0], &first.events[1]);
    alice
        .ack("alice", e1.event.event_id, e1.claim_token)
        .await
        .expect("ack");
    let rest = alice
        .claim("alice", &with(attempt, 2))
        .await
        .expect("retry");
    assert_eq!(seqs(&rest.events), [2]);
    assert_eq!(rest.events[0].claim_token, e2.claim_token);

    // Released and claimed again under the same attempt id: a new token, and the
    // old one is stale.
    alice
        .release(
            "alice",
            e2.event.event_id,
            &ReleaseRequest {
                claim_token: e2.claim_token,
                delay_seconds: None,
                error: None,
                terminal: false,
            },
        )
        .await
        .expect("release");
    let reclaimed = alice
        .claim("alice", &with(attempt, 1))
        .await
        .expect("claim");
    assert_eq!(seqs(&reclaimed.events), [2]);
    assert_ne!(reclaimed.events[0].claim_token, e2.claim_token);
    expect_api_error(
        alice.ack("alice", e2.event.event_id, e2.claim_token).await,
        409,
        ErrorCode::StaleClaim,
        "the first claim's token is stale",
    );
    alice
        .ack("alice", e2.event.event_id, reclaimed.events[0].claim_token)
        .await
        .expect("the new token acks");
}
