use std::time::Duration;

use switchboard_tests::TestServer;
use switchboard_tests::sdk::consumer::{ConsumerConfig, Delivery, Outcome};
use switchboard_tests::sdk::outbox::OutboxConfig;
use switchboard_tests::sdk::privacy::{FieldKind, Gate, Schema};
use switchboard_tests::sdk::proto::{ClientPoison, ClientReport, ErrorCode, SendMessage};
use switchboard_tests::sdk::report::Reporter;
use switchboard_tests::sdk::{Consumer, Outbox, Target};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_db, send_numbered};

#[tokio::test]
async fn client_side_poison_and_mode_reach_the_operator() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    send_numbered(&bob, "alice", 0, 1).await;
    let (db, _dir) = local_db().await;

    // An outbox entry the server refuses for good (no such agent).
    let gate = Gate::new().schema(Schema::new("note").field("n", FieldKind::Integer));
    let outbox = Outbox::open(db.clone(), &alice, gate, OutboxConfig::default())
        .await
        .unwrap();
    let id = outbox
        .try_enqueue(
            Target::Agent("nobody".into()),
            "note",
            SendMessage {
                payload: serde_json::json!({"n": 1}),
                ..SendMessage::default()
            },
        )
        .await
        .unwrap()
        .id;
    outbox.deliver(id, Duration::from_secs(10)).await.unwrap();

    // An event the handler rejects.
    let mut config = ConsumerConfig::default();
    config.min_poll = Duration::from_millis(20);
    let consumer = Consumer::new(alice.clone(), "alice", db.clone(), config);
    let reporter = Reporter::new(alice.clone(), "alice", db, Some(consumer.status()))
        .interval(Duration::from_millis(50));
    let cancel = CancellationToken::new();
    let reporting = tokio::spawn(reporter.run(cancel.clone()));
    let consuming = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let handler =
                |_: Delivery| std::future::ready(Outcome::Poison("schema mismatch".into()));
            consumer.run(handler, cancel).await
        }
    });
    let operator = server.operator();
    eventually(Duration::from_secs(10), "the report", || async {
        let reports = operator.client_reports().await.unwrap();
        reports.iter().any(|r| {
            r.name == "alice" && r.report.inbox_poison.len() == 1 && r.report.inbox.mode == "sse"
        })
    })
    .await;
    cancel.cancel();
    consuming.await.unwrap().unwrap();
    reporting.await.unwrap();

    let report = operator
        .client_reports()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.name == "alice")
        .unwrap()
        .report;
    assert_eq!(
        report.inbox.mode, "stopped",
        "the last report says it stopped"
    );
    assert_eq!((report.outbox.poison, report.outbox.sent), (1, 0));
    assert_eq!(
        report.outbox_poison[0].target.as_deref(),
        Some("agent:nobody")
    );
    assert!(
        report.outbox_poison[0].reason.contains("not_found"),
        "{report:?}"
    );
    assert_eq!(report.inbox.poisoned, 1);
    assert!(report.inbox_poison[0].reason.contains("schema mismatch"));
    assert!(report.sdk.starts_with("switchboard-sdk/"));
}

#[tokio::test]
async fn a_report_tells_the_console_through_the_change_stream() {
    use futures::StreamExt;
    let server = TestServer::start().await;
    let (created, alice) = server.agent("alice").await;
    let mut stream = server.operator().ops_stream().await.unwrap();
    alice
        .put_client_report("alice", &ClientReport::default())
        .await
        .unwrap();
    let change = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = stream.next().await.expect("open").expect("event");
            if let Some(change) = event.ops_change() {
                return change;
            }
        }
    })
    .await
    .expect("a change event");
    assert_eq!(change.agent_id, created.agent_id);
}

#[tokio::test]
async fn reports_are_bounded_and_scoped() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let entry = ClientPoison {
        id: "1".into(),
        target: None,
        reason: "x".into(),
        at: time::OffsetDateTime::now_utc(),
    };
    let too_many = ClientReport {
        inbox_poison: vec![entry.clone(); 21],
        ..ClientReport::default()
    };
    let error = alice
        .put_client_report("alice", &too_many)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ValidationFailed), "{error}");
    assert!(error.to_string().contains("at most 20"), "{error}");

    let too_long = ClientReport {
        outbox_poison: vec![ClientPoison {
            reason: "y".repeat(1001),
            ..entry
        }],
        ..ClientReport::default()
    };
    let error = alice
        .put_client_report("alice", &too_long)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::ValidationFailed), "{error}");

    let error = bob
        .put_client_report("alice", &ClientReport::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(ErrorCode::NotFound),
        "another agent's report: {error}"
    );
    let error = alice.client_reports().await.unwrap_err();
    assert_eq!(
        error.code(),
        Some(ErrorCode::Forbidden),
        "operators only: {error}"
    );
    assert!(server.operator().client_reports().await.unwrap().is_empty());
}
