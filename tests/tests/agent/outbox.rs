use std::collections::BTreeMap;
use std::time::Duration;

use switchboard_tests::sdk::outbox::OutboxConfig;
use switchboard_tests::sdk::privacy::{FieldKind, Gate, Schema};
use switchboard_tests::sdk::proto::{CreateRoom, SendMessage};
use switchboard_tests::sdk::{Client, Outbox, Target};
use switchboard_tests::{Options, TestServer};
use tokio_util::sync::CancellationToken;

use crate::support::{LossyProxy, local_db};

const ROOMS: u64 = 5;
const MESSAGES: u64 = 1000;

#[tokio::test]
async fn a_30_s_outage_while_sending_1000_messages_to_5_rooms_loses_nothing() {
    let mut server = TestServer::start().await;
    let operator = server.operator();
    let (_, sender) = server.agent("sender").await;
    let (_, reader) = server.agent("reader").await;
    for room in 0..ROOMS {
        let name = format!("room-{room}");
        operator
            .create_room(&CreateRoom { name: name.clone() })
            .await
            .unwrap();
        operator.add_member(&name, "reader").await.unwrap();
        operator.add_member(&name, "sender").await.unwrap();
    }
    let gate = Gate::new().schema(
        Schema::new("note")
            .field("room", FieldKind::Integer)
            .field("i", FieldKind::Integer),
    );
    let mut config = OutboxConfig::default();
    config.base_delay = Duration::from_millis(200);
    config.max_delay = Duration::from_secs(1);
    let (db, _dir) = local_db().await;
    let outbox = Outbox::open(db, &sender, gate, config).await.unwrap();
    let cancel = CancellationToken::new();
    let delivering = tokio::spawn({
        let (outbox, cancel) = (outbox.clone(), cancel.clone());
        async move { outbox.run(cancel).await }
    });

    // The agent sends steadily for ~36 s; the server is down for 30 s of that.
    let sending = tokio::spawn({
        let outbox = outbox.clone();
        async move {
            for i in 0..MESSAGES / ROOMS {
                for room in 0..ROOMS {
                    let message = SendMessage {
                        payload: serde_json::json!({ "room": room, "i": i }),
                        ..SendMessage::default()
                    };
                    outbox
                        .enqueue(Target::Room(format!("room-{room}")), "note", message)
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(180)).await;
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let watching = tokio::spawn({
        let outbox = outbox.clone();
        async move {
            let mut most_waiting = 0;
            for _ in 0..300 {
                most_waiting = most_waiting.max(outbox.counts().await.unwrap().retryable);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            most_waiting
        }
    });
    server.outage(Duration::from_secs(30)).await;
    assert!(
        watching.await.unwrap() > 0,
        "the outage made sends fail and wait"
    );
    sending.await.unwrap();
    let all_sent = tokio::time::timeout(Duration::from_secs(120), async {
        while outbox.counts().await.unwrap().sent < MESSAGES {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    if all_sent.is_err() {
        let stuck: Vec<_> = outbox
            .entries(None, 5000)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.state != switchboard_tests::sdk::outbox::EntryState::Sent)
            .take(5)
            .collect();
        panic!(
            "not all sent: {:?}; e.g. {stuck:#?}",
            outbox.counts().await.unwrap()
        );
    }
    cancel.cancel();
    delivering.await.unwrap().unwrap();
    let counts = outbox.counts().await.unwrap();
    assert_eq!((counts.poison, counts.open()), (0, 0), "{counts:?}");

    // The reader's inbox: every message once, in order per room.
    let mut per_room: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut cursor = 0;
    loop {
        let page = reader.poll("reader", cursor, Some(500)).await.unwrap();
        for event in &page.events {
            let payload = event.payload.as_ref().unwrap();
            per_room
                .entry(payload["room"].as_u64().unwrap())
                .or_default()
                .push(payload["i"].as_u64().unwrap());
        }
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(per_room.len() as u64, ROOMS);
    for (room, is) in per_room {
        assert_eq!(
            is,
            (0..MESSAGES / ROOMS).collect::<Vec<_>>(),
            "room {room}: exactly once, in order"
        );
    }
}

/// I8 meets I10: a send whose answer was lost, then an outage longer than the
/// server keeps idempotency keys (24 h by default). Resending with the same key
/// then would be a fresh request to the server, and the message would be stored
/// twice. The outbox must not resend it; it keeps it in a visible terminal state
/// with the reason instead.
#[tokio::test]
async fn a_lost_answer_then_an_outage_longer_than_the_key_ttl_is_not_stored_twice() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (sender, _) = server.agent("sender").await;
    let (_, reader) = server.agent("reader").await;
    let proxy = LossyProxy::start(&server.url).await;
    let client = Client::builder()
        .request_timeout(Duration::from_secs(2))
        .build(&proxy.url, sender.token.as_str())
        .unwrap();
    let gate = Gate::new().schema(Schema::new("note").field("n", FieldKind::Integer));
    let (db, _dir) = local_db().await;
    let outbox = Outbox::open(db, &client, gate, OutboxConfig::default())
        .await
        .unwrap();
    let message = SendMessage {
        payload: serde_json::json!({ "n": 1 }),
        ..SendMessage::default()
    };
    let id = outbox
        .try_enqueue(Target::Agent("reader".into()), "note", message)
        .await
        .unwrap()
        .id;

    proxy.lose_next_post();
    let t0 = switchboard_tests::wall_ms();
    outbox.dispatch_due(t0).await.unwrap();
    let entry = outbox.entry(id).await.unwrap().unwrap();
    assert!(!entry.state.is_terminal(), "the answer was lost: {entry:?}");
    let stored = reader.poll("reader", 0, Some(100)).await.unwrap().events;
    assert_eq!(
        stored.len(),
        1,
        "the server stored it though the answer was lost"
    );

    // The agent is cut off for 25 h; the server forgets the key meanwhile.
    let day = 24 * 3600 * 1000;
    server.advance(Duration::from_millis(day as u64 + 3_600_000));
    server.tick().await;
    let later = t0 + day + 3_600_000;
    for step in 0..5 {
        outbox.dispatch_due(later + step * 600_000).await.unwrap();
    }

    let stored = reader.poll("reader", 0, Some(100)).await.unwrap().events;
    assert_eq!(
        stored.len(),
        1,
        "stored once: the outbox must not resend an entry whose key the server may have forgotten"
    );
    let entry = outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state.to_string(), "EXPIRED", "{entry:?}");
    assert!(entry.state.is_terminal(), "{entry:?}");
    let reason = entry.last_error.unwrap_or_default();
    assert!(
        reason.contains("idempotency window")
            && reason.contains("24 h")
            && reason.contains("twice"),
        "the reason says what happened and why it was not resent: {reason}"
    );
    let counts = outbox.counts().await.unwrap();
    assert_eq!((counts.open(), counts.expired), (0, 1), "{counts:?}");
}
