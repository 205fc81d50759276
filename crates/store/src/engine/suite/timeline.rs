//! An event's timeline, assembled from its row's steps and its history rows
//! (`engine/timeline.rs`), on every path that writes one: the inspector and the
//! archive must read exactly what a row per step said before.

use super::message_with;
use crate::clock::to_timestamp;
use crate::engine::inbox_transactions::InboxDriver;
use crate::*;
use switchboard_proto::{BulkAction, HistoryEntry};

/// `(action, actor, detail, at)`.
type Expected<'a> = (&'a str, &'a str, Option<&'a str>, i64);

fn entries(expected: &[Expected<'_>]) -> Vec<HistoryEntry> {
    expected
        .iter()
        .map(|&(action, actor, detail, at)| HistoryEntry {
            action: action.to_owned(),
            actor: actor.to_owned(),
            detail: detail.map(str::to_owned),
            at: to_timestamp(at),
        })
        .collect()
}

async fn claim_one<D>(d: &Engine<D>, agent: &AgentRecord, now: i64) -> ClaimedEvent
where
    Engine<D>: Store,
{
    let mut claimed = d.claim(agent, 1, 1_000, None, now).await.expect("claim");
    assert_eq!(claimed.events.len(), 1, "one event to claim at {now}");
    claimed.events.remove(0)
}

async fn bulk<D>(d: &Engine<D>, tenant: TenantId, action: BulkAction, id: EventId, now: i64)
where
    Engine<D>: Store,
{
    let scope = Scope {
        action,
        ids: Some(&[id][..]),
        filter: None,
    };
    let done = d.bulk(tenant, &scope, 1, &Actor::Operator, now).await;
    assert_eq!(done.expect("bulk").value.0, 1, "{action:?} at {now}");
}

pub(super) async fn check<D: InboxDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("timeline", 0).await.expect("tenant");
    let mut agents = Vec::new();
    for (name, n) in [("t-reader", 141), ("t-other", 142), ("t-writer", 143)] {
        agents.push(
            d.create_agent(tenant, name, &[n; 32], &[], None, 0)
                .await
                .expect("agent"),
        );
    }
    let [reader, other, writer] = <[AgentRecord; 3]>::try_from(agents).expect("three");
    let send = |to: AgentId, from: Actor, max_attempts: u32, now: i64| {
        let msg = message_with(0, max_attempts, 0, None);
        async move {
            d.send_direct(tenant, to, &from, &msg, None, now)
                .await
                .expect("send")
                .value
                .event_id
        }
    };
    let release = |error: Option<&str>| ReleaseArgs {
        delay_ms: 0,
        error: error.map(str::to_owned),
        terminal: false,
    };

    // A: released, lease expired into the quarantine, replayed, claimed again, acked.
    let a = send(reader.id, writer.actor(), 2, 100).await;
    // B: lease expired, claimed again, acked, then purged (its ack moves into a row).
    let b = send(other.id, Actor::Operator, 5, 110).await;
    let c = claim_one(d, &reader, 200).await;
    d.release(&reader, a, c.claim_token, &release(Some("busy")), 300)
        .await
        .expect("release");
    claim_one(d, &other, 210).await;
    claim_one(d, &reader, 400).await;
    d.reap(2_000).await.expect("reap");
    bulk(d, tenant, BulkAction::Replay, a, 2_100).await;
    let c = claim_one(d, &reader, 2_200).await;
    d.ack(&reader, a, c.claim_token, 2_300).await.expect("ack");
    let c = claim_one(d, &other, 2_050).await;
    d.ack(&other, b, c.claim_token, 2_060).await.expect("ack");
    bulk(d, tenant, BulkAction::Purge, b, 2_400).await;
    // D: an operator's release of a claim, then a claim that still runs.
    let e = send(reader.id, Actor::Operator, 5, 2_500).await;
    claim_one(d, &reader, 2_600).await;
    bulk(d, tenant, BulkAction::Release, e, 2_700).await;
    claim_one(d, &reader, 2_800).await;

    let (r, s) = ("agent:t-reader", "system:scavenger");
    let of_a = entries(&[
        ("created", "agent:t-writer", None, 100),
        ("claimed", r, Some("attempt 1 of 2"), 200),
        ("released", r, Some("busy"), 300),
        ("claimed", r, Some("attempt 2 of 2"), 400),
        (
            "quarantined",
            s,
            Some("lease expired on attempt 2; attempts exhausted"),
            2_000,
        ),
        ("replayed", "operator", None, 2_100),
        ("claimed", r, Some("attempt 1 of 2"), 2_200),
        ("acked", r, None, 2_300),
    ]);
    let o = "agent:t-other";
    let of_b = entries(&[
        ("created", "operator", None, 110),
        ("claimed", o, Some("attempt 1 of 5"), 210),
        ("lease_expired", s, Some("attempt 1"), 2_000),
        ("claimed", o, Some("attempt 2 of 5"), 2_050),
        ("acked", o, None, 2_060),
        ("purged", "operator", None, 2_400),
    ]);
    let of_e = entries(&[
        ("created", "operator", None, 2_500),
        ("claimed", r, Some("attempt 1 of 5"), 2_600),
        ("released", "operator", None, 2_700),
        ("claimed", r, Some("attempt 2 of 5"), 2_800),
    ]);
    for (id, want) in [(a, &of_a), (b, &of_b), (e, &of_e)] {
        let got = d
            .event_detail(tenant, id)
            .await
            .expect("event detail")
            .history;
        assert_eq!(&got, want, "the inspector's timeline of {id}");
    }

    // The archive reads the same, event by event in sequence order.
    let mut tx = d.begin_read().await.expect("read");
    let archived = d.history_between(&mut tx, reader.id, 0, 2).await.unwrap();
    d.commit(tx, &[]).await.expect("end the read");
    let want: Vec<_> = (of_a.iter().map(|h| (a, h.clone())))
        .chain(of_e.iter().map(|h| (e, h.clone())))
        .collect();
    assert_eq!(archived, want, "the archive's timelines");
}

/// Claims, acks and releases of an agent while the scavenger returns its short
/// leases and an operator releases its claims, all at once: whichever commits first,
/// every event's timeline stays well formed, with one `claimed` step per attempt (a
/// step moved twice or cleared unmoved would break the count).
pub(super) async fn races<D: InboxDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
    let tenant = d.ensure_tenant("timeline-race", 0).await.expect("tenant");
    let agent = d
        .create_agent(tenant, "t-racer", &[144; 32], &[], None, 0)
        .await
        .expect("agent");
    let clock = AtomicI64::new(1_000);
    let tick = || clock.fetch_add(1, Ordering::SeqCst);
    let mut events = Vec::new();
    for _ in 0..24 {
        let msg = message_with(0, 1_000, 0, None);
        let sent = d.send_direct(tenant, agent.id, &Actor::Operator, &msg, None, tick());
        events.push(sent.await.expect("send").value.event_id);
    }
    let done = AtomicBool::new(false);
    let worker = async {
        for round in 0..60u32 {
            let claimed = d.claim(&agent, 3, 3, None, tick()).await.expect("claim");
            for (i, c) in claimed.events.iter().enumerate() {
                let id = c.event.event_id;
                // Some acks, mostly releases: the events keep coming back.
                let outcome = if (round as usize + i).is_multiple_of(5) {
                    d.ack(&agent, id, c.claim_token, tick()).await.map(|_| ())
                } else {
                    let args = ReleaseArgs {
                        delay_ms: 0,
                        error: None,
                        terminal: false,
                    };
                    d.release(&agent, id, c.claim_token, &args, tick())
                        .await
                        .map(|_| ())
                };
                match outcome {
                    Ok(()) | Err(StoreError::StaleClaim(_)) => {}
                    Err(e) => panic!("ack or release: {e:?}"),
                }
            }
        }
        done.store(true, Ordering::SeqCst);
    };
    let scavenger = async {
        while !done.load(Ordering::SeqCst) {
            d.reap(tick()).await.expect("reap");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    };
    let filter = switchboard_proto::EventFilter {
        agent: Some(agent.name.clone()),
        ..Default::default()
    };
    let operator = async {
        while !done.load(Ordering::SeqCst) {
            let scope = Scope {
                action: BulkAction::Release,
                ids: None,
                filter: Some(&filter),
            };
            d.bulk(tenant, &scope, 1_000, &Actor::Operator, tick())
                .await
                .expect("bulk release");
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    };
    futures::join!(worker, scavenger, operator);

    for id in events {
        let detail = d.event_detail(tenant, id).await.expect("event detail");
        let steps: Vec<_> = detail.history.iter().map(|h| h.action.as_str()).collect();
        let mut claims = 0;
        let mut claimed = false;
        assert_eq!(steps.first(), Some(&"created"), "{steps:?}");
        for h in &detail.history[1..] {
            match h.action.as_str() {
                "claimed" => {
                    assert!(!claimed, "a claim of a claimed event: {steps:?}");
                    claims += 1;
                    let want = format!("attempt {claims} of 1000");
                    assert_eq!(h.detail.as_deref(), Some(want.as_str()), "{steps:?}");
                    claimed = true;
                }
                "released" | "lease_expired" | "acked" => {
                    assert!(claimed, "{} without a claim: {steps:?}", h.action);
                    claimed = false;
                }
                other => panic!("{other} in {steps:?}"),
            }
        }
        assert_eq!(
            claims, detail.event.event.attempts,
            "one claimed step per attempt: {steps:?}"
        );
    }
}

/// A database written before the timeline's columns (migration 16) keeps its
/// timelines through the upgrade: its `created` rows go (the row says the same), and
/// an event claimed at the upgrade is acked by its claimer.
#[tokio::test]
async fn an_upgraded_database_keeps_its_timelines() {
    use crate::sqlite::SqliteStore;
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let (done, held, token) = (EventId::new(), EventId::new(), ClaimToken::new());
    let statements = [
        format!("INSERT INTO tenants (id, name, created_at) VALUES ('{tenant}', 'old', 0)"),
        format!(
            "INSERT INTO agents (id, tenant_id, name, head_seq, created_at) \
             VALUES ('{agent}', '{tenant}', 'old-bot', 2, 0)"
        ),
        format!(
            "INSERT INTO events (id, tenant_id, agent_id, seq, status, attempts, max_attempts, \
             created_at, available_at, updated_at) \
             VALUES ('{done}', '{tenant}', '{agent}', 1, 'completed', 1, 5, 10, 10, 30)"
        ),
        format!(
            "INSERT INTO events (id, tenant_id, agent_id, seq, status, payload, attempts, \
             max_attempts, created_at, available_at, claim_token, lease_expires_at, updated_at) \
             VALUES ('{held}', '{tenant}', '{agent}', 2, 'claimed', '{{}}', 1, 5, 40, 40, \
             '{token}', 100000, 50)"
        ),
        format!(
            "INSERT INTO event_history (event_id, at, action, actor, detail) VALUES \
             ('{done}', 10, 'created', 'operator', NULL), \
             ('{done}', 20, 'claimed', 'agent:old-bot', 'attempt 1 of 5'), \
             ('{done}', 30, 'acked', 'agent:old-bot', NULL), \
             ('{held}', 40, 'created', 'operator', NULL), \
             ('{held}', 50, 'claimed', 'agent:old-bot', 'attempt 1 of 5')"
        ),
    ];
    let (_dir, url) = super::old_sqlite_database(16, &statements).await;

    let d = SqliteStore::open(&url, "normal", crate::hooks::StoreHooks::default())
        .await
        .expect("open and upgrade");
    let bot = d.agent(tenant, "old-bot").await.expect("agent");
    d.ack(&bot, held, token, 60).await.expect("ack");
    let (b, o) = ("agent:old-bot", "operator");
    let of_done = entries(&[
        ("created", o, None, 10),
        ("claimed", b, Some("attempt 1 of 5"), 20),
        ("acked", b, None, 30),
    ]);
    let of_held = entries(&[
        ("created", o, None, 40),
        ("claimed", b, Some("attempt 1 of 5"), 50),
        ("acked", b, None, 60),
    ]);
    for (id, want) in [(done, of_done), (held, of_held)] {
        let got = d.event_detail(tenant, id).await.expect("detail").history;
        assert_eq!(got, want, "{id} after the upgrade");
    }
    d.close().await;
}
