//! Webhook failures on a manual clock: the retry schedule and `Retry-After`, the
//! same `webhook-id` on every retry, a 410 that disables the callback and leaves the
//! event for pull, the disable after failing for the configured period, the
//! quarantine of a poison event, and a slow endpoint that never holds up a pull
//! agent's claims.

use super::webhooks::{hooked, listed, registered, verified};
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_tests::receiver::{Answer, Receiver};
use switchboard_tests::sdk::proto::{ClaimRequest, EventStatus, SendMessage};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::server::workers::deliverer::Delivered;
use switchboard_tests::{Options, TestServer, key};

fn with_schedule(receiver: &Receiver, schedule: &[u64], disable_after_s: u64) -> Options {
    let mut options = hooked(receiver, true);
    let webhooks = options.webhooks.as_mut().unwrap();
    webhooks.retry_schedule = schedule.iter().copied().map(Duration::from_secs).collect();
    webhooks.disable_after = Duration::from_secs(disable_after_s);
    options
}

async fn send(server: &TestServer, to: &str, n: u64, max_attempts: Option<u32>) -> String {
    let message = SendMessage {
        payload: json!({ "n": n }),
        max_attempts,
        ..Default::default()
    };
    let receipt = server
        .operator()
        .send_message(to, &message, &key())
        .await
        .expect("send");
    receipt.event_id.to_string()
}

async fn callback(server: &TestServer) -> Value {
    listed(server).await["callbacks"][0].clone()
}

fn now_s(server: &TestServer) -> i64 {
    use switchboard_tests::server::Clock;
    server.clock.as_ref().unwrap().now_ms() / 1000
}

#[tokio::test]
async fn failures_retry_on_the_schedule_with_one_webhook_id_and_410_disables() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(with_schedule(&receiver, &[1, 60], 3_600)).await;
    let (id, _) = registered(&server, &receiver, "flaky").await;
    let event = send(&server, "flaky", 1, None).await;
    receiver.then([Answer::Status(500), Answer::RetryAfter(503, 30), Answer::Ok]);

    let first = server.deliver().await;
    assert!(
        matches!(&first[..], [Delivered::Retried { error, delay }] if error == "HTTP 500" && *delay == Duration::from_secs(1)),
        "{first:?}"
    );
    assert!(
        server.deliver().await.is_empty(),
        "not due before its delay"
    );
    let cb = callback(&server).await;
    assert_eq!(
        (cb["failure_streak"].as_u64(), cb["last_status"].as_u64()),
        (Some(1), Some(500))
    );
    server.advance(Duration::from_secs(1));
    let second = server.deliver().await;
    assert!(
        matches!(&second[..], [Delivered::Retried { delay, .. }] if *delay == Duration::from_secs(30)),
        "a 503's Retry-After wins over the schedule: {second:?}"
    );
    server.advance(Duration::from_secs(29));
    assert!(server.deliver().await.is_empty(), "Retry-After is honoured");
    server.advance(Duration::from_secs(1));
    let third = server.deliver().await;
    assert_eq!(third, [Delivered::Acked { status: 204 }]);
    let got = receiver.of_kind("inbox.event");
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(
            verified(&receiver, &id, r, now_s(&server)),
            event,
            "the same webhook-id each time"
        );
    }
    let cb = callback(&server).await;
    assert_eq!(
        (cb["failure_streak"].as_u64(), cb["last_status"].as_u64()),
        (Some(0), Some(204))
    );
    // The timeline shows each attempt.
    let detail = server
        .operator()
        .event(event.parse().unwrap())
        .await
        .unwrap();
    let steps: Vec<(&str, Option<&str>)> = detail
        .history
        .iter()
        .map(|h| (h.action.as_str(), h.detail.as_deref()))
        .collect();
    assert_eq!(
        steps.iter().filter(|s| s.0 == "claimed").count(),
        3,
        "{steps:?}"
    );
    assert!(
        steps
            .iter()
            .any(|s| s.0 == "released" && s.1.is_some_and(|d| d.contains("HTTP 500"))),
        "{steps:?}"
    );
    assert_eq!(steps.last().unwrap().0, "acked", "{steps:?}");
    let attempts: Value = server
        .operator()
        .request(Method::GET, &format!("ops/callbacks/{id}/attempts"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let statuses: Vec<Value> = attempts["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [json!(204), json!(503), json!(500), json!(200)],
        "newest first, the challenge last"
    );

    // 410: the callback is disabled at once; the event stays for pull.
    let gone = send(&server, "flaky", 2, None).await;
    receiver.then([Answer::Status(410)]);
    let out = server.deliver().await;
    assert!(
        matches!(&out[..], [Delivered::Disabled { reason }] if reason.contains("410")),
        "{out:?}"
    );
    let cb = callback(&server).await;
    assert_eq!(cb["state"], "disabled");
    assert!(cb["disabled_reason"].as_str().unwrap().contains("410 Gone"));
    server.advance(Duration::from_secs(3_600));
    assert!(
        server.deliver().await.is_empty(),
        "a disabled callback gets nothing"
    );
    let claimed = server
        .operator()
        .claim(
            "flaky",
            &ClaimRequest {
                limit: Some(5),
                lease_seconds: Some(30),
                attempt_id: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(claimed.events.len(), 1, "the event waits for pull");
    assert_eq!(claimed.events[0].event.event_id.to_string(), gone);
    // An operator enables it again: deliveries resume.
    let enabled = server
        .operator()
        .request(Method::POST, &format!("ops/callbacks/{id}/enable"))
        .send()
        .await
        .unwrap();
    assert_eq!(enabled.status(), 200);
    let cb = callback(&server).await;
    assert_eq!(
        (cb["state"].as_str(), cb["failure_streak"].as_u64()),
        (Some("active"), Some(0))
    );
}

#[tokio::test]
async fn a_callback_failing_for_the_configured_period_is_disabled() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(with_schedule(&receiver, &[60], 150)).await;
    registered(&server, &receiver, "down").await;
    receiver.always(Answer::Status(502));
    send(&server, "down", 1, Some(100)).await;
    for _ in 0..2 {
        let out = server.deliver().await;
        assert!(matches!(&out[..], [Delivered::Retried { .. }]), "{out:?}");
        server.advance(Duration::from_secs(60));
    }
    // 120 s of failures: still active.
    let out = server.deliver().await;
    assert!(matches!(&out[..], [Delivered::Retried { .. }]), "{out:?}");
    server.advance(Duration::from_secs(60));
    // 180 s ≥ 150 s: disabled, saying why.
    let out = server.deliver().await;
    assert!(
        matches!(&out[..], [Delivered::Disabled { reason }] if reason.contains("HTTP 502")),
        "{out:?}"
    );
    let cb = callback(&server).await;
    assert_eq!(cb["state"], "disabled");
    assert_eq!(cb["failure_streak"], 4);
    server.tick().await;
    let metrics = server.operator().metrics_text().await.expect("metrics");
    use switchboard_tests::exposition::{labelled, sum};
    assert_eq!(
        sum(&metrics, "webhook_callbacks_disabled"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        labelled(
            &metrics,
            "webhook_deliveries_total",
            &[("outcome", "failed")]
        ),
        Some(4.0),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_poison_event_goes_to_the_quarantine_and_the_next_one_is_delivered() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(with_schedule(&receiver, &[1], 86_400)).await;
    registered(&server, &receiver, "poisoned").await;
    let poison = send(&server, "poisoned", 1, Some(3)).await;
    let next = send(&server, "poisoned", 2, None).await;
    receiver.then([
        Answer::Status(500),
        Answer::Status(500),
        Answer::Status(500),
    ]);
    for _ in 0..3 {
        let out = server.deliver().await;
        assert!(matches!(&out[..], [Delivered::Retried { .. }]), "{out:?}");
        server.advance(Duration::from_secs(1));
    }
    let detail = server
        .operator()
        .event(poison.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        detail.event.event.status,
        EventStatus::Quarantined,
        "attempts used up"
    );
    let out = server.deliver().await;
    assert_eq!(out, [Delivered::Acked { status: 204 }]);
    let got = receiver.of_kind("inbox.event");
    assert_eq!(got.last().unwrap().json["event"]["event_id"], json!(next));
}

#[tokio::test]
async fn a_hanging_endpoint_does_not_hold_up_pull_claims() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(with_schedule(&receiver, &[1], 86_400)).await;
    registered(&server, &receiver, "slow").await;
    let (_, puller) = server.agent("puller").await;
    send(&server, "slow", 1, None).await;
    send(&server, "puller", 1, None).await;
    receiver.then([Answer::Hang(Duration::from_secs(3))]);
    let deliver = server.deliver();
    tokio::pin!(deliver);
    // While the delivery hangs (it holds its claim and its callback's lease, no
    // transaction), another agent claims and acks.
    let pulled = async {
        receiver
            .wait_for("inbox.event", 1, Duration::from_secs(10))
            .await;
        let claimed = puller
            .claim(
                "puller",
                &ClaimRequest {
                    limit: Some(1),
                    lease_seconds: Some(30),
                    attempt_id: None,
                },
            )
            .await
            .unwrap();
        let e = &claimed.events[0];
        puller
            .ack("puller", e.event.event_id, e.claim_token)
            .await
            .unwrap();
    };
    tokio::select! {
        out = &mut deliver => panic!("the delivery ended before the pull: {out:?}"),
        () = pulled => {}
    }
    assert_eq!(deliver.await, [Delivered::Acked { status: 204 }]);
}
