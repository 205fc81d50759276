//! Visibility leases on a manual clock: fencing of stale holders (I4), extend,
//! delayed release, quarantine after the last attempt (I5) and operator replay,
//! terminal release, and expiry of unclaimed events.

use std::time::Duration;

use serde_json::json;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::{
    BulkAction, BulkRequest, ClaimToken, ErrorCode, EventId, EventStatus, ExtendRequest,
    InboxEvent, ReleaseRequest, SendMessage,
};
use switchboard_tests::{Options, TestServer};

use crate::common::*;

async fn manual() -> TestServer {
    TestServer::with(Options {
        manual_clock: true,
        ..Default::default()
    })
    .await
}

fn release_req(token: ClaimToken) -> ReleaseRequest {
    ReleaseRequest {
        claim_token: token,
        delay_seconds: None,
        error: None,
        terminal: false,
    }
}

/// The event with `id`, as poll shows it.
async fn polled(client: &Client, agent: &str, id: EventId) -> InboxEvent {
    let page = client.poll(agent, 0, Some(1000)).await.expect("poll");
    page.events
        .into_iter()
        .find(|e| e.event_id == id)
        .expect("the event is in the inbox")
}

#[tokio::test]
async fn stale_holder_is_fenced_after_reclaim() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let id = send(&alice, "alice", json!("job")).await.event_id;

    let first = claim_one(&alice, "alice", 30).await;
    server.advance(Duration::from_secs(31));
    let second = claim_one(&alice, "alice", 30).await;
    assert_eq!(
        second.event.event_id, id,
        "the expired lease is re-claimable at once"
    );
    assert_eq!(second.event.attempts, 2);

    let before = metric(&server.operator(), "stale_claim_rejections_total").await;
    let old = first.claim_token;
    expect_api_error(
        alice.ack("alice", id, old).await,
        409,
        ErrorCode::StaleClaim,
        "the first holder's ack comes after someone else claimed it",
    );
    let extend = ExtendRequest {
        claim_token: old,
        lease_seconds: Some(60),
    };
    expect_api_error(
        alice.extend("alice", id, &extend).await,
        409,
        ErrorCode::StaleClaim,
        "a stale holder cannot extend",
    );
    expect_api_error(
        alice.release("alice", id, &release_req(old)).await,
        409,
        ErrorCode::StaleClaim,
        "a stale holder cannot release",
    );
    let after = metric(&server.operator(), "stale_claim_rejections_total").await;
    assert_eq!(after - before, 3.0, "each fencing rejection is counted");

    let state = alice
        .ack("alice", id, second.claim_token)
        .await
        .expect("the current holder acks");
    assert_eq!(state.status, EventStatus::Completed);
    expect_api_error(
        alice.ack("alice", id, old).await,
        409,
        ErrorCode::StaleClaim,
        "a completed event does not accept another claim's token",
    );
}

#[tokio::test]
async fn leases_returned_by_a_claim_are_counted_as_expirations() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let retry = send(&alice, "alice", json!("retry me")).await.event_id;
    let one_shot = SendMessage {
        payload: json!("one shot"),
        max_attempts: Some(1),
        ..Default::default()
    };
    let one_shot = send_msg(&alice, "alice", &one_shot).await.event_id;
    assert_eq!(claim(&alice, "alice", 2, 10).await.len(), 2);

    server.advance(Duration::from_secs(11));
    // No scavenger pass: the claim itself returns both expired leases first.
    let again = claim(&alice, "alice", 2, 10).await;
    let ids: Vec<EventId> = again.iter().map(|c| c.event.event_id).collect();
    assert_eq!(
        ids,
        [retry],
        "the one-shot event went to the quarantine instead"
    );
    let event = polled(&alice, "alice", one_shot).await;
    assert_eq!(event.status, EventStatus::Quarantined);
    assert_eq!(
        metric(&server.operator(), "lease_expirations_total").await,
        2.0,
        "both leases ran out, whoever noticed"
    );
    assert_eq!(
        metric(&server.operator(), "events_quarantined_total").await,
        1.0
    );
}

#[tokio::test]
async fn ack_after_lease_expiry_is_refused() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let id = send(&alice, "alice", json!("job")).await.event_id;
    let held = claim_one(&alice, "alice", 10).await;
    server.advance(Duration::from_secs(10));
    expect_api_error(
        alice.ack("alice", id, held.claim_token).await,
        409,
        ErrorCode::StaleClaim,
        "the lease ended at exactly now; nobody re-claimed, but it is no longer held",
    );
    assert_eq!(
        metric(&server.operator(), "stale_claim_rejections_total").await,
        1.0
    );
    let again = claim_one(&alice, "alice", 10).await;
    assert_eq!((again.event.event_id, again.event.attempts), (id, 2));
}

#[tokio::test]
async fn extend_keeps_the_lease_past_its_original_expiry() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let id = send(&alice, "alice", json!("long job")).await.event_id;
    let held = claim_one(&alice, "alice", 10).await;

    server.advance(Duration::from_secs(8));
    let extend = ExtendRequest {
        claim_token: held.claim_token,
        lease_seconds: Some(10),
    };
    let state = alice.extend("alice", id, &extend).await.expect("extend");
    assert_eq!(state.status, EventStatus::Claimed);
    let new_until = state.lease_expires_at.expect("a lease");
    assert_eq!(
        new_until - held.lease_expires_at,
        Duration::from_secs(8),
        "the new lease runs 10 s from now (8 s later than the old one)"
    );

    server.advance(Duration::from_secs(8)); // 16 s: past the original 10 s lease
    let report = server.tick().await;
    assert_eq!(
        report.reap.lease_expirations, 0,
        "the extended lease is alive"
    );
    assert!(
        claim(&alice, "alice", 1, 10).await.is_empty(),
        "still invisible to other claimers"
    );
    let done = alice
        .ack("alice", id, held.claim_token)
        .await
        .expect("the holder acks within the extended lease");
    assert_eq!((done.status, done.attempts), (EventStatus::Completed, 1));
}

#[tokio::test]
async fn release_with_delay_hides_the_event_until_the_clock_passes_it() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let id = send(&alice, "alice", json!("flaky")).await.event_id;
    let held = claim_one(&alice, "alice", 60).await;

    let req = ReleaseRequest {
        delay_seconds: Some(30),
        error: Some("upstream timed out".into()),
        ..release_req(held.claim_token)
    };
    let state = alice.release("alice", id, &req).await.expect("release");
    assert_eq!(state.status, EventStatus::Pending);
    assert_eq!(state.lease_expires_at, None);
    let event = polled(&alice, "alice", id).await;
    assert_eq!(event.last_error.as_deref(), Some("upstream timed out"));
    assert_eq!(event.available_at, state.available_at);

    // Nothing to claim yet, and the answer says when there will be: no wake-up
    // marks that moment.
    let empty = alice
        .claim("alice", &claim_req(1, 60))
        .await
        .expect("claim");
    assert!(empty.events.is_empty(), "delayed");
    assert_eq!(empty.next_available_at, Some(state.available_at));
    server.advance(Duration::from_secs(29));
    assert!(
        claim(&alice, "alice", 1, 60).await.is_empty(),
        "1 s of delay left"
    );
    server.advance(Duration::from_secs(1));
    let again = alice
        .claim("alice", &claim_req(1, 60))
        .await
        .expect("claim");
    assert_eq!(
        again.next_available_at, None,
        "a full answer says nothing more"
    );
    let again = again.events.into_iter().next().expect("the event is back");
    assert_eq!((again.event.event_id, again.event.attempts), (id, 2));
    assert_eq!(
        again.event.last_error.as_deref(),
        Some("upstream timed out"),
        "the next claimer sees why the last attempt failed"
    );
}

#[tokio::test]
async fn exhausted_attempts_quarantine_until_an_operator_replays() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let m = SendMessage {
        payload: json!("poison"),
        max_attempts: Some(2),
        ..Default::default()
    };
    let id = send_msg(&alice, "alice", &m).await.event_id;

    assert_eq!(claim_one(&alice, "alice", 10).await.event.attempts, 1);
    server.advance(Duration::from_secs(11));
    let report = server.tick().await;
    assert_eq!(
        (report.reap.lease_expirations, report.reap.quarantined),
        (1, 0)
    );
    assert_eq!(
        metric(&server.operator(), "lease_expirations_total").await,
        1.0
    );
    assert_eq!(
        metric(&server.operator(), "lease_returns_total").await,
        1.0,
        "back to pending"
    );
    assert_eq!(
        polled(&alice, "alice", id).await.status,
        EventStatus::Pending
    );

    assert_eq!(claim_one(&alice, "alice", 10).await.event.attempts, 2);
    server.advance(Duration::from_secs(11));
    let report = server.tick().await;
    assert_eq!(
        (report.reap.lease_expirations, report.reap.quarantined),
        (1, 1),
        "the second expiry used up max_attempts = 2"
    );
    assert_eq!(
        metric(&server.operator(), "lease_expirations_total").await,
        2.0
    );
    assert_eq!(
        metric(&server.operator(), "lease_returns_total").await,
        1.0,
        "the seed's lease expirations: the one to the quarantine is not one"
    );
    assert_eq!(
        metric(&server.operator(), "events_quarantined_total").await,
        1.0
    );
    let event = polled(&alice, "alice", id).await;
    assert_eq!(event.status, EventStatus::Quarantined);
    let why = event.last_error.unwrap_or_default();
    assert!(
        why.contains("lease expired on attempt 2 of 2"),
        "last_error: {why}"
    );

    assert!(
        claim(&alice, "alice", 10, 10).await.is_empty(),
        "never redelivered"
    );
    server.advance(Duration::from_secs(7 * 24 * 3600));
    server.tick().await;
    assert!(
        claim(&alice, "alice", 10, 10).await.is_empty(),
        "still quarantined a week later"
    );
    assert_eq!(alice.snapshot("alice").await.unwrap().counts.quarantined, 1);

    let result = server
        .operator()
        .bulk(
            BulkAction::Replay,
            &BulkRequest {
                ids: Some(vec![id]),
                filter: None,
            },
        )
        .await
        .expect("replay");
    assert_eq!(result.affected, 1);
    let event = polled(&alice, "alice", id).await;
    assert_eq!((event.status, event.attempts), (EventStatus::Pending, 0));
    let back = claim_one(&alice, "alice", 10).await;
    assert_eq!((back.event.event_id, back.event.attempts), (id, 1));
    assert_eq!(back.event.status, EventStatus::Claimed);
}

#[tokio::test]
async fn release_quarantines_terminal_failures_and_the_last_attempt() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let terminal = send(&alice, "alice", json!("malformed")).await.event_id;
    let last_try = SendMessage {
        payload: json!("one shot"),
        max_attempts: Some(1),
        ..Default::default()
    };
    let last_try = send_msg(&alice, "alice", &last_try).await.event_id;

    let held = claim_one(&alice, "alice", 60).await;
    assert_eq!(held.event.event_id, terminal);
    let req = ReleaseRequest {
        error: Some("bad input".into()),
        terminal: true,
        ..release_req(held.claim_token)
    };
    let state = alice
        .release("alice", terminal, &req)
        .await
        .expect("release");
    assert_eq!(
        (state.status, state.attempts),
        (EventStatus::Quarantined, 1),
        "terminal quarantines with attempts to spare"
    );
    let detail = server.operator().event(terminal).await.expect("event");
    let last = detail.history.last().expect("history");
    assert_eq!(
        (last.action.as_str(), last.detail.as_deref()),
        ("quarantined", Some("terminal failure: bad input"))
    );
    assert_eq!(detail.event.event.last_error.as_deref(), Some("bad input"));

    let held = claim_one(&alice, "alice", 60).await;
    assert_eq!(held.event.event_id, last_try);
    let state = alice
        .release("alice", last_try, &release_req(held.claim_token))
        .await
        .expect("release");
    assert_eq!(
        state.status,
        EventStatus::Quarantined,
        "attempts are used up"
    );

    assert!(claim(&alice, "alice", 10, 60).await.is_empty());
    assert_eq!(alice.snapshot("alice").await.unwrap().counts.quarantined, 2);
    assert_eq!(
        metric(&server.operator(), "events_quarantined_total").await,
        2.0
    );
}

#[tokio::test]
async fn unclaimed_event_past_expires_at_expires() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    let now = alice.snapshot("alice").await.expect("snapshot").server_time;
    let short = SendMessage {
        payload: json!("only useful for a minute"),
        expires_at: Some(now + Duration::from_secs(60)),
        ..Default::default()
    };
    let short = send_msg(&alice, "alice", &short).await.event_id;
    let durable = send(&alice, "alice", json!("keeps")).await.event_id;

    server.advance(Duration::from_secs(61));
    let got = claim(&alice, "alice", 10, 60).await;
    let ids: Vec<EventId> = got.iter().map(|c| c.event.event_id).collect();
    assert_eq!(
        ids,
        [durable],
        "an expired event is not claimable, even before a tick"
    );

    let report = server.tick().await;
    assert_eq!(report.reap.expired, 1);
    let event = polled(&alice, "alice", short).await;
    assert_eq!(event.status, EventStatus::Expired);
    assert_eq!(event.payload, None, "expired events drop the payload");
    assert!(claim(&alice, "alice", 10, 60).await.is_empty());
    let counts = alice.snapshot("alice").await.unwrap().counts;
    assert_eq!((counts.expired, counts.claimed), (1, 1));
}

#[tokio::test]
async fn a_message_sent_for_later_is_invisible_until_its_time() {
    let server = manual().await;
    let (_, alice) = server.agent("alice").await;
    // From the server's clock: the system clock has moved on since the manual one
    // started (by seconds on a loaded machine), and the test would be early.
    let later = server.now() + Duration::from_secs(60);
    let later = later.replace_nanosecond(0).unwrap();
    let id = send_msg(
        &alice,
        "alice",
        &SendMessage {
            available_at: Some(later),
            ..msg(json!("tomorrow's job"))
        },
    )
    .await
    .event_id;
    // A message for now, sent after it, is claimed first: the later one waits.
    let now_id = send(&alice, "alice", json!("today's job")).await.event_id;
    let first = alice
        .claim("alice", &claim_req(10, 60))
        .await
        .expect("claim");
    let ids: Vec<_> = first.events.iter().map(|c| c.event.event_id).collect();
    assert_eq!(ids, [now_id], "only what is due");
    assert_eq!(first.next_available_at, Some(later));
    alice
        .ack("alice", now_id, first.events[0].claim_token)
        .await
        .expect("ack today's job");
    assert_eq!(polled(&alice, "alice", id).await.available_at, later);

    server.advance(Duration::from_secs(58));
    server.tick().await;
    assert!(
        claim(&alice, "alice", 10, 60).await.is_empty(),
        "two seconds early"
    );
    server.advance(Duration::from_secs(3));
    let due = claim(&alice, "alice", 10, 60).await;
    assert_eq!(due.len(), 1, "due now");
    assert_eq!((due[0].event.event_id, due[0].event.attempts), (id, 1));
}
