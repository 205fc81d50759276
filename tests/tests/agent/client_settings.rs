//! Remote client settings, obeyed by the real SDK against the real server: a
//! consumer's polling follows the operator's ceiling from the response that brings
//! it, and a reporter sends nothing while reports are paused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use switchboard_tests::TestServer;
use switchboard_tests::sdk::Consumer;
use switchboard_tests::sdk::consumer::{ConsumerConfig, Delivery, Mode, Outcome};
use switchboard_tests::sdk::proto::ClientSettings;
use switchboard_tests::sdk::report::Reporter;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_db, send_numbered};

fn ceiling(ms: Option<u64>) -> ClientSettings {
    ClientSettings {
        poll_ceiling_ms: ms,
        reports_paused: None,
    }
}

fn paused(paused: bool) -> ClientSettings {
    ClientSettings {
        poll_ceiling_ms: None,
        reports_paused: Some(paused),
    }
}

/// A polling consumer that would otherwise look every 2 to 5 minutes handles an
/// event within seconds once the operator lowers its ceiling to 1 s, and goes back
/// to its own bounds when the setting is cleared.
#[tokio::test]
async fn a_consumer_polls_under_the_operators_ceiling() {
    let server = TestServer::start().await;
    let operator = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let (db, _dir) = local_db().await;
    let mut config = ConsumerConfig::default();
    config.sse = false;
    config.min_poll = Duration::from_secs(120);
    config.max_poll = Duration::from_secs(300);
    let consumer = Consumer::new(alice.clone(), "alice", db, config);
    let status = consumer.status();
    let handled = Arc::new(Mutex::new(0u32));
    let cancel = CancellationToken::new();
    let running = tokio::spawn({
        let (cancel, handled) = (cancel.clone(), handled.clone());
        async move {
            let handler = move |_: Delivery| {
                *handled.lock().unwrap() += 1;
                std::future::ready(Outcome::Ack)
            };
            consumer.run(handler, cancel).await
        }
    });
    let polling_every = |ms: u64| {
        let status = status.clone();
        move || {
            let mode = status.borrow().mode;
            std::future::ready(matches!(mode, Mode::Polling { interval_ms } if interval_ms == ms))
        }
    };
    // Its first look found nothing: the next is minutes away.
    eventually(Duration::from_secs(10), "polling on its own bounds", || {
        let mode = status.borrow().mode;
        std::future::ready(matches!(mode, Mode::Polling { interval_ms } if interval_ms >= 120_000))
    })
    .await;

    operator
        .put_client_settings(Some("alice"), &ceiling(Some(1_000)))
        .await
        .unwrap();
    // Any response to the agent brings the change; the waiting consumer obeys at once.
    alice.own_client_settings("alice").await.unwrap();
    assert_eq!(alice.client_settings().poll_ceiling_ms, Some(1_000));
    eventually(
        Duration::from_secs(10),
        "polling every second",
        polling_every(1_000),
    )
    .await;
    send_numbered(&bob, "alice", 0, 1).await;
    eventually(Duration::from_secs(10), "the event handled", || {
        std::future::ready(*handled.lock().unwrap() == 1)
    })
    .await;

    // Cleared: its next poll (within the second) brings its own bounds back.
    operator
        .delete_client_settings(Some("alice"))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "its own bounds again", || {
        let mode = status.borrow().mode;
        std::future::ready(matches!(mode, Mode::Polling { interval_ms } if interval_ms >= 120_000))
    })
    .await;
    assert_eq!(alice.client_settings().poll_ceiling_ms, None);
    cancel.cancel();
    running.await.unwrap().unwrap();
}

/// While the tenant's reports are paused, the reporter sends none (not even the
/// last one at its stop); it reads its settings now and then and resumes by
/// itself.
#[tokio::test]
async fn a_reporter_holds_its_reports_while_paused() {
    let server = TestServer::start().await;
    let operator = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (db, _dir) = local_db().await;
    operator
        .put_client_settings(None, &paused(true))
        .await
        .unwrap();
    // The agent learns it from a response.
    alice.own_client_settings("alice").await.unwrap();
    assert!(alice.client_settings().reports_paused);

    let reporter = Reporter::new(alice.clone(), "alice", db.clone(), None)
        .interval(Duration::from_millis(20))
        .paused_check(Duration::from_millis(100));
    let cancel = CancellationToken::new();
    let reporting = tokio::spawn(reporter.run(cancel.clone()));
    // Many intervals pass: a reporter that ignored the pause would have sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(operator.client_reports().await.unwrap().is_empty());

    // Resumed: the reporter's own check brings the news, and the report follows.
    operator
        .put_client_settings(None, &paused(false))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the report", || async {
        operator
            .client_reports()
            .await
            .unwrap()
            .iter()
            .any(|r| r.name == "alice")
    })
    .await;
    assert!(!alice.client_settings().reports_paused);

    // Paused again for alice alone: the stop's last report is held back too.
    operator
        .put_client_settings(Some("alice"), &paused(true))
        .await
        .unwrap();
    alice.own_client_settings("alice").await.unwrap();
    assert!(alice.client_settings().reports_paused);
    let before = operator.client_reports().await.unwrap()[0].received_at;
    cancel.cancel();
    reporting.await.unwrap();
    let after = operator.client_reports().await.unwrap()[0].received_at;
    assert_eq!(before, after, "no report at the stop while paused");
}
