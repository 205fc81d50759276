//! The operator API: overview counts, the event list (filters, payload search,
//! pagination), the event inspector, bulk actions with their audit rows, and the
//! console's change stream.

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::key;
use switchboard_tests::sdk::proto::{
    AgentSummary, BulkAction, BulkRequest, ClaimRequest, ClaimedEvent, EventFilter, EventId,
    EventListQuery, EventStatus, ReleaseRequest, SendMessage, StatusCounts,
};
use switchboard_tests::sdk::{Client, SseEvent};

use crate::support::{inbox, next_event, send};

async fn claim(client: &Client, agent: &str, limit: u32) -> Vec<ClaimedEvent> {
    let request = ClaimRequest {
        limit: Some(limit),
        lease_seconds: Some(300),
        attempt_id: None,
    };
    client.claim(agent, &request).await.expect("claim").events
}

async fn quarantine(client: &Client, agent: &str, event: &ClaimedEvent) {
    let release = ReleaseRequest {
        claim_token: event.claim_token,
        delay_seconds: None,
        error: Some("cannot parse".into()),
        terminal: true,
    };
    let state = client
        .release(agent, event.event.event_id, &release)
        .await
        .expect("terminal release");
    assert_eq!(state.status, EventStatus::Quarantined);
}

#[tokio::test]
async fn overview_counts_each_agent_and_the_totals() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, a) = server.agent("a").await;
    let (_, b) = server.agent("b").await;
    for n in 0..3 {
        send(&op, "a", json!(n)).await;
    }
    for n in 0..2 {
        send(&op, "b", json!(n)).await;
    }
    let claimed = claim(&a, "a", 2).await;
    a.ack("a", claimed[0].event.event_id, claimed[0].claim_token)
        .await
        .unwrap();
    quarantine(&b, "b", &claim(&b, "b", 1).await[0]).await;

    let overview = op.overview().await.unwrap();
    let counts = |name: &str| {
        let agent = overview
            .agents
            .iter()
            .find(|s| s.name == name)
            .expect("listed");
        (agent.counts.clone(), agent.head_cursor)
    };
    let want_a = StatusCounts {
        pending: 1,
        claimed: 1,
        completed: 1,
        ..Default::default()
    };
    let want_b = StatusCounts {
        pending: 1,
        quarantined: 1,
        ..Default::default()
    };
    assert_eq!(counts("a"), (want_a, 3));
    assert_eq!(counts("b"), (want_b, 2));
    let totals = StatusCounts {
        pending: 2,
        claimed: 1,
        completed: 1,
        quarantined: 1,
        ..Default::default()
    };
    assert_eq!(overview.totals, totals);
    assert!(
        overview.oldest_pending_age_seconds.is_some(),
        "two events are pending"
    );
    let brief = |s: &AgentSummary| (s.name.clone(), s.counts.clone(), s.head_cursor);
    let listed: Vec<_> = op.agents().await.unwrap().iter().map(brief).collect();
    let shown: Vec<_> = overview.agents.iter().map(brief).collect();
    assert_eq!(listed, shown, "/ops/agents agrees with the overview");
}

async fn send_with(
    op: &Client,
    to: &str,
    payload: serde_json::Value,
    correlation: &str,
) -> EventId {
    let message = SendMessage {
        payload,
        correlation_id: Some(correlation.into()),
        ..Default::default()
    };
    op.send_message(to, &message, &key())
        .await
        .unwrap()
        .event_id
}

async fn ids(op: &Client, query: EventListQuery) -> Vec<EventId> {
    let page = op.events(&query).await.expect("list events");
    page.events.into_iter().map(|e| e.event.event_id).collect()
}

#[tokio::test]
async fn event_list_filters_search_and_pages() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (a_info, a) = server.agent("a").await;
    server.agent("b").await;
    let percent = send_with(&op, "a", json!({"text": "50%_off today"}), "c1").await;
    let decoy_pct = send_with(&op, "a", json!({"text": "500 off"}), "c1").await;
    let underscore = send_with(&op, "b", json!({"text": "snake_case"}), "c2").await;
    let decoy_us = send_with(&op, "b", json!({"text": "snakeXcase"}), "c2").await;
    let plain = send_with(&op, "a", json!({"text": "hello"}), "c3").await;
    claim(&a, "a", 1).await; // the oldest of a (`percent`) becomes claimed

    let q = |s: &str| EventListQuery {
        q: Some(s.into()),
        ..Default::default()
    };
    assert_eq!(
        ids(&op, q("50%_")).await,
        [percent],
        "% and _ are literal in q"
    );
    assert_eq!(
        ids(&op, q("e_c")).await,
        [underscore],
        "_ is not a wildcard"
    );
    assert_eq!(ids(&op, q("off")).await, [percent, decoy_pct]);
    assert_eq!(
        ids(&op, q("%")).await,
        [percent],
        "a lone % matches only a literal %"
    );

    let by_agent = EventListQuery {
        agent: Some("b".into()),
        ..Default::default()
    };
    assert_eq!(ids(&op, by_agent).await, [underscore, decoy_us]);
    let by_id = EventListQuery {
        agent: Some(a_info.agent_id.to_string()),
        ..Default::default()
    };
    assert_eq!(ids(&op, by_id).await, [percent, decoy_pct, plain]);
    let claimed = EventListQuery {
        status: Some(EventStatus::Claimed),
        ..Default::default()
    };
    assert_eq!(ids(&op, claimed).await, [percent]);
    let corr = EventListQuery {
        correlation_id: Some("c2".into()),
        ..Default::default()
    };
    assert_eq!(ids(&op, corr).await, [underscore, decoy_us]);
    let combined = EventListQuery {
        agent: Some("a".into()),
        status: Some(EventStatus::Pending),
        correlation_id: Some("c1".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(&op, combined).await,
        [decoy_pct],
        "filters narrow together"
    );

    let mut pages = Vec::new();
    let mut after = None;
    loop {
        let query = EventListQuery {
            after,
            limit: Some(2),
            ..Default::default()
        };
        let page = op.events(&query).await.unwrap();
        assert!(page.events.len() <= 2, "a page respects limit");
        pages.extend(page.events.iter().map(|e| e.event.event_id));
        match page.next_cursor {
            Some(next) => after = Some(next),
            None => break,
        }
        assert!(pages.len() <= 5, "pagination must end");
    }
    assert_eq!(
        pages,
        [percent, decoy_pct, underscore, decoy_us, plain],
        "each event once, in order"
    );
}

#[tokio::test]
async fn event_detail_has_the_whole_history() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, a) = server.agent("a").await;
    let receipt = send(&op, "a", json!({"job": 1})).await;
    let claimed = claim(&a, "a", 1).await.remove(0);
    a.ack("a", receipt.event_id, claimed.claim_token)
        .await
        .unwrap();

    let detail = op.event(receipt.event_id).await.unwrap();
    assert_eq!(detail.event.agent_name, "a");
    assert_eq!(detail.event.event.status, EventStatus::Completed);
    assert_eq!(
        detail.event.event.payload, None,
        "completed events drop the payload"
    );
    let steps: Vec<(&str, &str)> = detail
        .history
        .iter()
        .map(|h| (h.action.as_str(), h.actor.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("created", "operator"),
            ("claimed", "agent:a"),
            ("acked", "agent:a")
        ]
    );
    assert!(
        detail.history.windows(2).all(|w| w[0].at <= w[1].at),
        "history is in time order"
    );
}

#[tokio::test]
async fn bulk_actions_count_only_events_they_apply_to() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, a) = server.agent("a").await;
    let held = send(&op, "a", json!("held")).await.event_id;
    let bad = send(&op, "a", json!("bad")).await.event_id;
    let done = send(&op, "a", json!("done")).await.event_id;
    let pending = send(&op, "a", json!("pending")).await.event_id;
    // Claims go in seq order: held, bad, done; `pending` stays pending.
    let [held_claim, bad_claim, done_claim] = &claim(&a, "a", 3).await[..] else {
        panic!("three events are claimable");
    };
    a.ack("a", done, done_claim.claim_token).await.unwrap();
    quarantine(&a, "a", bad_claim).await;
    let all = BulkRequest {
        ids: Some(vec![pending, held, bad, done]),
        filter: None,
    };

    let replay = op.bulk(BulkAction::Replay, &all).await.unwrap();
    assert_eq!(replay.affected, 1, "only the quarantined event is replayed");
    let replayed = op.event(bad).await.unwrap().event.event;
    assert_eq!(
        (replayed.status, replayed.attempts),
        (EventStatus::Pending, 0)
    );

    let release = op.bulk(BulkAction::Release, &all).await.unwrap();
    assert_eq!(release.affected, 1, "only the claimed event is released");
    let stale = a.ack("a", held, held_claim.claim_token).await.unwrap_err();
    assert_eq!(
        stale.code().map(|c| c.as_str()),
        Some("stale_claim"),
        "{stale}"
    );
    assert_eq!(stale.status(), Some(409));

    let purge = op.bulk(BulkAction::Purge, &all).await.unwrap();
    assert_eq!(
        purge.affected, 4,
        "purge applies to every non-purged status"
    );
    for event in inbox(&op, "a").await {
        assert_eq!((event.status, event.payload), (EventStatus::Purged, None));
    }
    let again = op.bulk(BulkAction::Purge, &all).await.unwrap();
    assert_eq!(again.affected, 0, "purged events are not purged twice");

    // The bulk actions' rows (the agents' creation has its own).
    let audit = op.audit(Some(10)).await.unwrap().entries;
    let rows: Vec<(&str, u64, i64)> = audit
        .iter()
        .filter(|e| e.target.is_none())
        .map(|e| (e.action.as_str(), e.count, e.id))
        .collect();
    assert_eq!(
        rows,
        [
            ("purge", 0, again.audit_id),
            ("purge", 4, purge.audit_id),
            ("release", 1, release.audit_id),
            ("replay", 1, replay.audit_id),
        ],
        "one row per call, newest first"
    );
    for entry in audit.iter().filter(|e| e.target.is_none()) {
        assert_eq!(entry.actor, "operator");
        assert_eq!(entry.ids.as_deref(), Some(&[pending, held, bad, done][..]));
        assert_eq!(entry.filter, None);
    }
}

#[tokio::test]
async fn bulk_by_filter_touches_only_matches_and_is_audited() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, a) = server.agent("a").await;
    let (_, b) = server.agent("b").await;
    for (agent, client) in [("a", &a), ("b", &b)] {
        send(&op, agent, json!({"secret": "s3cr3t"})).await;
        send(&op, agent, json!({"ok": true})).await;
        quarantine(client, agent, &claim(client, agent, 1).await[0]).await;
    }
    let only_a = EventFilter {
        agent: Some("a".into()),
        status: Some(EventStatus::Quarantined),
        ..Default::default()
    };
    let replay = op
        .bulk(
            BulkAction::Replay,
            &BulkRequest {
                ids: None,
                filter: Some(only_a.clone()),
            },
        )
        .await
        .unwrap();
    assert_eq!(replay.affected, 1);
    let b_events = inbox(&op, "b").await;
    assert_eq!(
        b_events[0].status,
        EventStatus::Quarantined,
        "b is not in the filter"
    );

    let secret = EventFilter {
        q: Some("s3cr3t".into()),
        ..Default::default()
    };
    let purge = op
        .bulk(
            BulkAction::Purge,
            &BulkRequest {
                ids: None,
                filter: Some(secret.clone()),
            },
        )
        .await
        .unwrap();
    assert_eq!(purge.affected, 2, "one match per agent");
    for agent in ["a", "b"] {
        let events = inbox(&op, agent).await;
        assert_eq!(events[0].status, EventStatus::Purged);
        assert_eq!(events[0].payload, None, "purge drops the payload");
        assert_eq!(
            events[1].payload,
            Some(json!({"ok": true})),
            "non-matching untouched"
        );
    }
    // The bulk actions' rows (the agents' creation has its own).
    let audit: Vec<_> = op
        .audit(None)
        .await
        .unwrap()
        .entries
        .into_iter()
        .filter(|e| e.target.is_none())
        .collect();
    assert_eq!(audit.len(), 2);
    assert_eq!((audit[0].action.as_str(), audit[0].count), ("purge", 2));
    assert_eq!(audit[0].filter, Some(secret));
    assert_eq!(audit[0].ids, None);
    assert_eq!(
        (audit[1].action.as_str(), audit[1].filter.clone()),
        ("replay", Some(only_a))
    );
}

#[tokio::test]
async fn the_ops_stream_reports_changes() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (a_info, _) = server.agent("a").await;
    let mut stream = op.ops_stream().await.expect("ops stream opens");
    next_event(&mut stream, SseEvent::HEARTBEAT).await;
    send(&op, "a", json!(1)).await;
    let change = next_event(&mut stream, SseEvent::CHANGED).await;
    assert_eq!(change["agent_id"], a_info.agent_id.to_string());
    assert_eq!(change["cursor_hint"], 1);
    send(&op, "a", json!(2)).await;
    assert_eq!(
        next_event(&mut stream, SseEvent::CHANGED).await["cursor_hint"],
        2
    );
}
