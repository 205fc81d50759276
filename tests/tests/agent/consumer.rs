use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_tests::sdk::consumer::{ConsumerConfig, Delivery, Mode, Outcome, local_poison};
use switchboard_tests::sdk::proto::{EventListQuery, EventStatus, InboxEvent};
use switchboard_tests::sdk::{Client, Consumer};
use switchboard_tests::{Options, TestServer};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_db, send_numbered};

/// Polls quickly and without SSE, so tests that move the server's manual clock see
/// the effect soon.
fn polling() -> ConsumerConfig {
    let mut config = ConsumerConfig::default();
    config.sse = false;
    config.min_poll = Duration::from_millis(20);
    config.max_poll = Duration::from_millis(100);
    config
}

fn n_of(event: &InboxEvent) -> u64 {
    event.payload.as_ref().expect("payload")["n"]
        .as_u64()
        .expect("n")
}

/// A handler that records the `n` of every event it is given and acks.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<u64>>>);

impl Recorder {
    fn handler(&self) -> impl Fn(Delivery) -> std::future::Ready<Outcome> + Send + Sync + 'static {
        let seen = self.0.clone();
        move |delivery: Delivery| {
            seen.lock().unwrap().push(n_of(&delivery.event));
            std::future::ready(Outcome::Ack)
        }
    }

    fn seen(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

async fn completed(client: &Client, agent: &str) -> u64 {
    client
        .snapshot(agent)
        .await
        .expect("snapshot")
        .counts
        .completed
}

#[tokio::test]
async fn an_agent_offline_for_many_events_catches_up_in_order() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 300).await;

    let (db, _dir) = local_db().await;
    let recorder = Recorder::default();
    let consumer = Consumer::new(alice.clone(), "alice", db, polling());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (handler, cancel) = (recorder.handler(), cancel.clone());
        async move { consumer.run(handler, cancel).await }
    });
    eventually(Duration::from_secs(60), "300 events handled", || async {
        recorder.seen().len() >= 300
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(
        recorder.seen(),
        (0..300).collect::<Vec<_>>(),
        "once each, in order"
    );
    assert_eq!(completed(&alice, "alice").await, 300);
}

#[tokio::test]
async fn the_sse_wake_up_brings_new_work_without_waiting_for_a_poll() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let (db, _dir) = local_db().await;
    let mut config = ConsumerConfig::default();
    // Polls would come only every minute: what arrives sooner was woken by SSE.
    config.min_poll = Duration::from_secs(60);
    config.max_poll = Duration::from_secs(60);
    let consumer = Consumer::new(alice.clone(), "alice", db.clone(), config);
    let mut status = consumer.status();
    let recorder = Recorder::default();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (handler, cancel) = (recorder.handler(), cancel.clone());
        async move { consumer.run(handler, cancel).await }
    });
    tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| s.mode == Mode::Sse),
    )
    .await
    .expect("connected")
    .unwrap();
    send_numbered(&bob, "alice", 7, 1).await;
    eventually(Duration::from_secs(5), "woken by SSE", || async {
        recorder.seen() == [7]
    })
    .await;
    // The mode is published for `switchboard agent status` in another process.
    let (mode, _) = db
        .published(&Consumer::mode_key("alice"))
        .await
        .unwrap()
        .expect("published");
    assert!(mode.contains("sse"), "{mode}");
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_crash_between_handling_and_acking_is_deduplicated_on_redelivery() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 3).await;
    let (db, _dir) = local_db().await;
    let recorder = Recorder::default();

    // First life: handles 0 and 1, then "dies" right after 1 is marked handled.
    let first = Consumer::new(alice.clone(), "alice", db.clone(), polling())
        .crash_after_handled(|event| n_of(event) == 1);
    first
        .run(recorder.handler(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(recorder.seen(), [0, 1]);
    assert_eq!(completed(&alice, "alice").await, 1, "1 was never acked");

    // Its lease runs out; the second life gets 1 again.
    server.advance(Duration::from_secs(61));
    let second = Consumer::new(alice.clone(), "alice", db, polling());
    let status = second.status();
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (handler, cancel) = (recorder.handler(), cancel.clone());
        async move { second.run(handler, cancel).await }
    });
    eventually(Duration::from_secs(10), "all acked", || async {
        completed(&alice, "alice").await == 3
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(recorder.seen(), [0, 1, 2], "1 was handled once");
    assert_eq!(status.borrow().deduplicated, 1);
}

#[tokio::test]
async fn a_crash_mid_handler_brings_the_event_back_after_the_lease() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 1).await;
    let (db, _dir) = local_db().await;

    let started = Arc::new(tokio::sync::Notify::new());
    let first = Consumer::new(alice.clone(), "alice", db.clone(), polling());
    let hung = tokio::spawn({
        let started = started.clone();
        async move {
            let handler = move |_: Delivery| {
                let started = started.clone();
                async move {
                    started.notify_one();
                    std::future::pending::<Outcome>().await
                }
            };
            first.run(handler, CancellationToken::new()).await
        }
    });
    started.notified().await;
    hung.abort(); // the process dies mid-handler
    let _ = hung.await;

    server.advance(Duration::from_secs(61));
    let recorder = Recorder::default();
    let second = Consumer::new(alice.clone(), "alice", db, polling());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (handler, cancel) = (recorder.handler(), cancel.clone());
        async move { second.run(handler, cancel).await }
    });
    eventually(
        Duration::from_secs(10),
        "handled after the lease",
        || async { completed(&alice, "alice").await == 1 },
    )
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(recorder.seen(), [0], "completed once");
}

#[tokio::test]
async fn three_local_failures_quarantine_the_event_on_the_server_at_once() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 1).await;
    let (db, _dir) = local_db().await;
    let calls = Arc::new(Mutex::new(0));
    let handler = {
        let calls = calls.clone();
        move |_: Delivery| {
            *calls.lock().unwrap() += 1;
            std::future::ready(Outcome::Failed("schema mismatch".into()))
        }
    };
    let consumer = Consumer::new(alice.clone(), "alice", db.clone(), polling());
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { consumer.run(handler, cancel).await }
    });
    // Each failure releases with a backoff; move the server's clock past it while
    // the event waits out its backoff, never while it is claimed: however slow the
    // consumer, no claim's 60 s lease expires under the handler.
    eventually(Duration::from_secs(20), "quarantined", || async {
        let counts = alice.snapshot("alice").await.unwrap().counts;
        if counts.claimed == 0 {
            server.advance(Duration::from_secs(15));
        }
        counts.quarantined == 1
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(
        *calls.lock().unwrap(),
        3,
        "no crash loop: three tries, then quarantine"
    );
    let event = &server
        .operator()
        .events(&EventListQuery {
            agent: Some("alice".into()),
            status: Some(EventStatus::Quarantined),
            ..Default::default()
        })
        .await
        .unwrap()
        .events[0];
    assert_eq!(
        event.event.attempts, 3,
        "the server's max of 5 was not needed"
    );
    let last_error = event.event.last_error.as_deref().unwrap();
    assert!(
        last_error.contains("failed 3 times locally") && last_error.contains("schema mismatch"),
        "{last_error}"
    );
    let poison = local_poison(&db, 10).await.unwrap();
    assert_eq!(poison.len(), 1);
    assert_eq!(poison[0].failures, 3);
}

#[tokio::test]
async fn shutdown_finishes_the_handler_in_flight_and_releases_the_rest() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 3).await;
    let (db, _dir) = local_db().await;
    let mut config = polling();
    config.batch = 3;
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    let cancel = CancellationToken::new();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Mutex::new(Some(started_tx));
    let finish = Arc::new(tokio::sync::Notify::new());
    let handled = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let (finish, handled) = (finish.clone(), handled.clone());
        move |delivery: Delivery| {
            let (finish, handled) = (finish.clone(), handled.clone());
            if let Some(tx) = started_tx.lock().unwrap().take() {
                let _ = tx.send(());
            }
            async move {
                finish.notified().await;
                handled.lock().unwrap().push(n_of(&delivery.event));
                Outcome::Ack
            }
        }
    };
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { consumer.run(handler, cancel).await }
    });
    started_rx.await.unwrap();
    cancel.cancel();
    finish.notify_one();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("stops")
        .unwrap()
        .unwrap();
    assert_eq!(*handled.lock().unwrap(), [0], "only the one in flight ran");
    let counts = alice.snapshot("alice").await.unwrap().counts;
    assert_eq!(
        (counts.completed, counts.claimed, counts.pending),
        (1, 0, 2),
        "{counts:?}"
    );
}

#[tokio::test]
async fn a_long_handler_keeps_its_lease_by_extending_it() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 1).await;
    let (db, _dir) = local_db().await;
    let mut config = polling();
    config.lease = Duration::from_secs(1);
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    let status = consumer.status();
    let calls = Arc::new(Mutex::new(HashMap::<u64, u32>::new()));
    let handler = {
        let calls = calls.clone();
        move |delivery: Delivery| {
            *calls
                .lock()
                .unwrap()
                .entry(n_of(&delivery.event))
                .or_default() += 1;
            async move {
                // Three lease lengths: without extension the scavenger would take it.
                tokio::time::sleep(Duration::from_millis(3000)).await;
                Outcome::Ack
            }
        }
    };
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { consumer.run(handler, cancel).await }
    });
    eventually(Duration::from_secs(15), "acked", || async {
        completed(&alice, "alice").await == 1
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    assert_eq!(calls.lock().unwrap()[&0], 1);
    assert_eq!(
        status.borrow().acked,
        1,
        "the ack was accepted: the claim was never lost"
    );
}

/// Acks ride with the next claim: while the consumer handles a batch, the events it
/// handled before in that batch are still claimed (their acks wait), and the first
/// event of the next batch finds the previous batch completed (acked by the claim
/// that brought it). At the end every event is completed.
#[tokio::test]
async fn the_consumer_acks_a_batch_with_its_next_claim() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 6).await;
    let (db, _dir) = local_db().await;
    let mut config = polling();
    config.batch = 3;
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    // For each event n > 0: the status of event n - 1 when n's handler ran.
    let before: Arc<Mutex<Vec<(u64, EventStatus)>>> = Arc::default();
    let handler = {
        let (alice, before) = (alice.clone(), before.clone());
        move |delivery: Delivery| {
            let (alice, before) = (alice.clone(), before.clone());
            async move {
                let n = n_of(&delivery.event);
                if n > 0 {
                    let page = alice.poll("alice", 0, None).await.expect("poll");
                    // Sent in order to a fresh inbox: event n has sequence n + 1
                    // (a completed event's payload is gone, its sequence stays).
                    let previous = page
                        .events
                        .iter()
                        .find(|e| e.seq == n)
                        .map(|e| e.status)
                        .expect("the previous event");
                    before.lock().unwrap().push((n, previous));
                }
                Outcome::Ack
            }
        }
    };
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { consumer.run(handler, cancel).await }
    });
    eventually(Duration::from_secs(30), "6 events completed", || async {
        completed(&alice, "alice").await == 6
    })
    .await;
    cancel.cancel();
    run.await.unwrap().unwrap();
    use EventStatus::{Claimed, Completed};
    assert_eq!(
        *before.lock().unwrap(),
        [
            (1, Claimed),
            (2, Claimed),
            (3, Completed),
            (4, Claimed),
            (5, Claimed)
        ]
    );
}

#[tokio::test]
async fn stop_when_idle_returns_once_nothing_is_claimable_with_the_acks_sent() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 3).await;

    let (db, _dir) = local_db().await;
    let mut config = polling();
    config.stop_when_idle = true;
    // The first event fails once: its release delay (>= 1 s) makes it unclaimable,
    // so it must not keep the run going.
    let failed = Arc::new(Mutex::new(false));
    let recorder = Recorder::default();
    let handler = {
        let (failed, record) = (failed.clone(), recorder.handler());
        move |delivery: Delivery| {
            let first = n_of(&delivery.event) == 0
                && !std::mem::replace(&mut *failed.lock().unwrap(), true);
            if first {
                std::future::ready(Outcome::Failed("not yet".into()))
            } else {
                record(delivery)
            }
        }
    };
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    let ran = tokio::time::timeout(
        Duration::from_secs(30),
        consumer.run(handler, CancellationToken::new()),
    )
    .await
    .expect("run returns without being cancelled");
    ran.expect("run");
    assert_eq!(
        recorder.seen(),
        [1, 2],
        "the released event waits for its delay"
    );
    assert_eq!(
        completed(&alice, "alice").await,
        2,
        "the acks are sent before run returns"
    );
}

#[tokio::test]
async fn settled_moves_once_per_outcome_after_it_is_applied() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 3).await;

    let (db, _dir) = local_db().await;
    let mut config = polling();
    config.stop_when_idle = true;
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    let status = consumer.status();
    // What `settled` was when each handler call began: every earlier outcome (an
    // ack, a release with a delay) is applied before the next event is handed out.
    let at_call = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let at_call = at_call.clone();
        move |delivery: Delivery| {
            at_call.lock().unwrap().push(status.borrow().settled);
            std::future::ready(match n_of(&delivery.event) {
                1 => Outcome::RetryLater(Some(Duration::from_secs(60))),
                _ => Outcome::Ack,
            })
        }
    };
    let status = consumer.status();
    consumer
        .run(handler, CancellationToken::new())
        .await
        .expect("run");
    assert_eq!(*at_call.lock().unwrap(), [0, 1, 2]);
    assert_eq!(
        status.borrow().settled,
        3,
        "an ack and a release count alike"
    );
    assert_eq!(status.borrow().handled, 2);
}

#[tokio::test]
async fn a_cancelled_consumer_claims_nothing_more() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 2).await;

    let (db, _dir) = local_db().await;
    let consumer = Consumer::new(alice.clone(), "alice", db, polling());
    let cancel = CancellationToken::new();
    // The first event's handler stops the consumer (as Ctrl-C would): its outcome
    // is applied, and the second event is never claimed (a claim then a release
    // would spend one of its attempts).
    let handler = {
        let cancel = cancel.clone();
        move |_: Delivery| {
            cancel.cancel();
            std::future::ready(Outcome::Ack)
        }
    };
    consumer.run(handler, cancel).await.expect("run");
    let pending = server
        .operator()
        .events(&EventListQuery {
            agent: Some("alice".into()),
            status: Some(EventStatus::Pending),
            ..Default::default()
        })
        .await
        .unwrap()
        .events;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].event.attempts, 0, "never claimed");
    assert_eq!(completed(&alice, "alice").await, 1, "the ack was sent");
}
