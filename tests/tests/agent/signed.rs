//! Signed requests under the durable layer (issue 39): an outbox sending and a
//! consumer handling, both with clients that hold a key, keep working while the
//! tenant's policy goes from optional to required and while each agent rotates its
//! key: every message is stored once and handled once.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_tests::TestServer;
use switchboard_tests::sdk::consumer::{ConsumerConfig, Delivery, Outcome};
use switchboard_tests::sdk::outbox::{Outbox, OutboxConfig, Target};
use switchboard_tests::sdk::privacy::{FieldKind, Gate, Schema};
use switchboard_tests::sdk::proto::SendMessage;
use switchboard_tests::sdk::signing::SigningKey;
use switchboard_tests::sdk::{Client, Consumer};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_db};

/// A client of agent `name` whose static token is bound to a new key.
async fn signing_agent(server: &TestServer, name: &str) -> Client {
    let (created, unsigned) = server.agent(name).await;
    let key = SigningKey::generate();
    unsigned.register_key(&key.public_key()).await.expect("key");
    Client::builder()
        .signing_key(Some(key))
        .build(&server.url, created.token.as_str())
        .unwrap()
}

#[tokio::test]
async fn the_outbox_and_the_consumer_go_on_across_a_required_policy_and_rotations() {
    const MESSAGES: u64 = 30;
    let server = TestServer::start().await;
    let sender = signing_agent(&server, "writer").await;
    let reader = signing_agent(&server, "reader").await;

    let (reader_db, _reader_dir) = local_db().await;
    let mut config = ConsumerConfig::default();
    config.sse = false;
    config.min_poll = Duration::from_millis(20);
    config.max_poll = Duration::from_millis(100);
    let consumer = Consumer::new(reader.clone(), "reader", reader_db, config);
    let handled = Arc::new(Mutex::new(Vec::new()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (handled, cancel) = (handled.clone(), cancel.clone());
        async move {
            consumer
                .run(
                    move |delivery: Delivery| {
                        let n = delivery.event.payload.as_ref().unwrap()["n"]
                            .as_u64()
                            .unwrap();
                        handled.lock().unwrap().push(n);
                        std::future::ready(Outcome::Ack)
                    },
                    cancel,
                )
                .await
        }
    });

    let gate = Gate::new().schema(Schema::new("note").field("n", FieldKind::Integer));
    let (writer_db, _writer_dir) = local_db().await;
    let outbox = Outbox::open(writer_db, &sender, gate, OutboxConfig::default())
        .await
        .unwrap();
    let operator = server.operator();
    for n in 0..MESSAGES {
        let message = SendMessage {
            payload: serde_json::json!({ "n": n }),
            ..SendMessage::default()
        };
        outbox
            .try_enqueue(Target::Agent("reader".into()), "note", message)
            .await
            .unwrap();
        outbox
            .dispatch_due(switchboard_tests::wall_ms())
            .await
            .unwrap();
        match n {
            10 => {
                operator.set_signature_policy("required").await.unwrap();
            }
            15 => {
                sender.rotate_key().await.expect("the writer rotates");
            }
            20 => {
                reader.rotate_key().await.expect("the reader rotates");
            }
            _ => {}
        }
    }
    eventually(Duration::from_secs(30), "every message handled", || async {
        handled.lock().unwrap().len() as u64 >= MESSAGES
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    let seen = handled.lock().unwrap().clone();
    assert_eq!(seen.len() as u64, MESSAGES, "handled once each: {seen:?}");
    assert_eq!(
        seen.iter().copied().collect::<HashSet<_>>().len() as u64,
        MESSAGES
    );
    let stored = operator.poll("reader", 0, Some(1000)).await.unwrap().events;
    assert_eq!(stored.len() as u64, MESSAGES, "stored once each");
    // The required policy held: an unsigned call of a credential with no key is
    // refused, so the signed ones above were checked.
    let (_, plain) = server.agent("plain").await;
    let refused = plain
        .send_message(
            "plain",
            &SendMessage {
                payload: serde_json::json!({}),
                ..SendMessage::default()
            },
            &switchboard_tests::key(),
        )
        .await
        .expect_err("unsigned under required");
    assert!(
        refused.to_string().contains("signature_required"),
        "{refused}"
    );
}
