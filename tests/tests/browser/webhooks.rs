//! The Webhooks page in the browser, against a real HTTPS receiver: a callback an
//! agent registers through the API appears live; a test event reaches the receiver
//! and its answer (204, then 500) is shown; Disable and Enable change the row; a
//! re-verification the endpoint answers wrongly shows why it failed; the row's
//! attempts list all of it; a real delivery that fails updates the row live; a second registration appears live (no reload); Delete,
//! confirmed in a dialog, leaves the empty state.

use std::time::Duration;

use serde_json::json;
use switchboard_proto::{Callback, SendMessage};
use switchboard_tests::receiver::{Answer, ChallengeAnswer, Receiver};
use switchboard_tests::server::config::WebhookConfig;
use switchboard_tests::{Options, TestServer, key};

use crate::driver::Browser;
use crate::support::{WAIT, bounded, console_and_browser};

/// Registers a callback for agent `name` (created here) as the agent would: with
/// its own token, an Idempotency-Key, and the receiver's URL and secret.
async fn register(server: &TestServer, receiver: &Receiver, name: &str) -> Callback {
    let (agent, _) = server.agent(name).await;
    let response = bounded(
        &format!("registering the callback of {name}"),
        reqwest::Client::new()
            .post(format!("{}/api/v1/agents/{name}/callbacks", server.url))
            .bearer_auth(&agent.token)
            .header("Idempotency-Key", format!("register-{name}"))
            .json(&json!({ "url": receiver.url, "secret": receiver.whsec() }))
            .send(),
    )
    .await;
    let status = response.status();
    let body = bounded("reading the registration", response.text()).await;
    assert_eq!(status, 201, "registration answered {status}: {body}");
    serde_json::from_str(&body).expect("a Callback")
}

/// The operator API's view of one callback.
async fn callback(server: &TestServer, id: &str) -> Callback {
    let list: serde_json::Value = bounded(
        "GET /api/v1/ops/callbacks",
        reqwest::Client::new()
            .get(format!("{}/api/v1/ops/callbacks", server.url))
            .bearer_auth(&server.operator_token)
            .send(),
    )
    .await
    .json()
    .await
    .expect("json");
    let found = list["callbacks"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["callback_id"] == id))
        .unwrap_or_else(|| panic!("callback {id} in {list}"));
    serde_json::from_value(found.clone()).expect("a Callback")
}

impl Browser {
    /// Marks the page, so a reload (which would drop the mark) can be told apart.
    async fn mark_page(&self) {
        bounded(
            "marking the page",
            self.client
                .execute("window.__webhooksMark = 'still here'; return true", vec![]),
        )
        .await;
    }

    async fn page_marked(&self) -> bool {
        bounded(
            "reading the mark",
            self.client
                .execute("return window.__webhooksMark === 'still here'", vec![]),
        )
        .await
        .as_bool()
        .unwrap_or(false)
    }
}

#[tokio::test(flavor = "current_thread")]
async fn webhooks_page_lists_tests_disables_verifies_and_deletes_live() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let receiver = Receiver::start().await;
    let server = TestServer::with(Options {
        ui_dir: Some(ui),
        webhooks: Some(WebhookConfig {
            allow_loopback: true,
            ca_file: Some(receiver.ca_file.clone()),
            // One failed delivery and no retry while the test runs.
            retry_schedule: vec![Duration::from_secs(3600)],
            ..WebhookConfig::default()
        }),
        ..Options::default()
    })
    .await;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.find("#overview").await;
    browser.click("a[data-nav='/webhooks']").await;
    let empty = browser.text("#webhooks-empty").await;
    assert!(
        empty.contains("POST /api/v1/agents/{agent}/callbacks")
            && empty.contains("switchboard agent callback add"),
        "the empty state says how to register: {empty}"
    );
    // The stream is open (its opening re-reads the list once), so what follows can
    // only appear through its `callbacks` events.
    browser.find("#live[data-state='connected']").await;
    browser.mark_page().await;

    // An agent registers; the row appears live.
    let first = register(&server, &receiver, "hook-host").await;
    let id = first.callback_id.to_string();
    let row = format!("tr[data-callback='{id}']");
    let col = |c: &str| format!("{row} td[data-col='{c}']");
    browser.find(&row).await;
    assert_eq!(browser.text(&col("agent")).await, "hook-host");
    assert_eq!(browser.text(&col("url")).await, receiver.url);
    assert_eq!(browser.text(&col("state")).await, "active");
    assert_eq!(browser.text(&col("streak")).await, "0");
    assert_eq!(browser.text(&col("last")).await, "never");
    assert_eq!(browser.text(&col("reason")).await, "–");

    // A test event reaches the receiver; the page shows its answer.
    browser.click(&format!("button[data-test='{id}']")).await;
    let tests = receiver.wait_for("callback.test", 1, WAIT).await;
    assert_eq!(tests[0].method, "POST");
    assert_eq!(tests[0].path, "/hooks/agent");
    browser
        .wait_text("#action-result", "the test's answer is shown", |t| {
            t.starts_with("Test event delivered") && t.contains("HTTP 204")
        })
        .await;
    assert_eq!(
        browser
            .attr("#action-result", "data-callback")
            .await
            .as_deref(),
        Some(id.as_str())
    );

    // The endpoint breaks: the next test event shows the failure.
    receiver.always(Answer::Status(500));
    browser.click(&format!("button[data-test='{id}']")).await;
    receiver.wait_for("callback.test", 2, WAIT).await;
    browser
        .wait_text("#action-error", "the failed test is shown", |t| {
            t.starts_with("Test event failed") && t.contains("HTTP 500")
        })
        .await;
    assert!(!browser.exists("#action-result").await);

    // Disable, then Enable.
    browser.click(&format!("button[data-disable='{id}']")).await;
    browser
        .wait_text(&col("state"), "the row says disabled", |t| t == "disabled")
        .await;
    assert_eq!(
        browser.text(&col("reason")).await,
        "disabled by an operator"
    );
    assert!(browser.exists(&format!("button[data-enable='{id}']")).await);
    assert!(
        !browser
            .exists(&format!("button[data-disable='{id}']"))
            .await
    );
    let on_server = callback(&server, &id).await;
    assert_eq!(on_server.state.as_str(), "disabled");
    browser.click(&format!("button[data-enable='{id}']")).await;
    browser
        .wait_text(&col("state"), "the row says active again", |t| {
            t == "active"
        })
        .await;
    assert_eq!(browser.text(&col("reason")).await, "–");
    assert!(!browser.exists(&format!("button[data-enable='{id}']")).await);
    assert_eq!(callback(&server, &id).await.state.as_str(), "active");

    // Re-verify against an endpoint that answers the challenge wrongly.
    receiver.challenge(ChallengeAnswer::Wrong);
    browser.click(&format!("button[data-verify='{id}']")).await;
    let failed = browser
        .wait_text(
            "#action-error",
            "the verification's failure is shown",
            |t| t.starts_with("Verification failed"),
        )
        .await;
    assert!(
        failed.contains("challenge_response is wrong"),
        "the problem's detail is shown: {failed}"
    );
    let challenges = receiver.of_kind("callback.challenge");
    assert_eq!(challenges.len(), 2, "registration and re-verification");

    // The row's attempts, newest first: the failed challenge, the two tests, the
    // registration's challenge.
    browser.click(&format!("button[data-select='{id}']")).await;
    browser
        .find(&format!("#attempts[data-callback='{id}']"))
        .await;
    browser
        .wait_count("#attempts-table tr[data-attempt]", 4)
        .await;
    let attempt =
        |i: usize, c: &str| format!("#attempts-table tr[data-attempt='{i}'] td[data-col='{c}']");
    let expected = [
        ("challenge", "200", "challenge_response is wrong"),
        ("test", "500", "HTTP 500"),
        ("test", "204", "–"),
        ("challenge", "200", "–"),
    ];
    for (i, (kind, status, error)) in expected.into_iter().enumerate() {
        assert_eq!(browser.text(&attempt(i, "kind")).await, kind, "attempt {i}");
        assert_eq!(
            browser.text(&attempt(i, "status")).await,
            status,
            "attempt {i}"
        );
        let shown = browser.text(&attempt(i, "error")).await;
        assert!(shown.contains(error), "attempt {i}: {shown:?}");
        let latency = browser.text(&attempt(i, "latency")).await;
        assert!(
            latency.ends_with(" ms") || latency.ends_with(" s"),
            "{latency}"
        );
    }
    assert_eq!(
        browser.attr(&row, "aria-selected").await.as_deref(),
        Some("true")
    );

    // A real delivery of an inbox event, which the endpoint (still answering 500)
    // fails: the row's last delivery and failure streak, and the attempts, follow
    // live.
    let message = SendMessage {
        payload: json!({ "hello": "hook-host" }),
        ..SendMessage::default()
    };
    server
        .operator()
        .send_message("hook-host", &message, &key())
        .await
        .expect("send");
    let delivered = receiver.wait_for("inbox.event", 1, WAIT).await;
    assert_eq!(delivered[0].json["event"]["payload"]["hello"], "hook-host");
    browser
        .wait_text(&col("last"), "the failed delivery is shown", |t| {
            t.ends_with(" ago · HTTP 500")
        })
        .await;
    let streak = browser.text(&col("streak")).await;
    assert!(streak.starts_with("1 (failing for "), "{streak}");
    browser
        .wait_text(
            "#attempts-table tr[data-attempt='0'] td[data-col='kind']",
            "the delivery heads the attempts",
            |t| t == "delivery",
        )
        .await;
    browser
        .wait_count("#attempts-table tr[data-attempt]", 5)
        .await;
    assert_eq!(
        browser
            .text("#attempts-table tr[data-attempt='0'] td[data-col='status']")
            .await,
        "500"
    );
    browser.screenshot("browser-webhooks.png").await;

    // A second agent registers while the page is open: it appears live, no reload.
    receiver.challenge(ChallengeAnswer::Right);
    let second = register(&server, &receiver, "hook-two").await;
    let row2 = format!("tr[data-callback='{}']", second.callback_id);
    browser.find(&row2).await;
    browser
        .wait_count("#webhooks-table tbody tr[data-callback]", 2)
        .await;
    assert_eq!(
        browser.text(&format!("{row2} td[data-col='agent']")).await,
        "hook-two"
    );
    assert!(browser.page_marked().await, "the page was not reloaded");
    assert!(
        browser.exists("#attempts-table").await,
        "the selection stays"
    );

    // A read-only session sees the registrations but no action.
    {
        let viewer = Browser::start().await;
        viewer.open_logged_in(&server, true).await;
        viewer.find("#overview").await;
        viewer.click("a[data-nav='/webhooks']").await;
        viewer.find(&row2).await;
        for hook in ["verify", "disable", "enable", "test", "delete"] {
            assert!(
                !viewer.exists(&format!("button[data-{hook}]")).await,
                "a read-only session has no {hook} button"
            );
        }
        viewer.click(&format!("button[data-select='{id}']")).await;
        viewer.find("#attempts-table").await;
    }

    // Nothing on the page is a secret.
    let source = bounded("reading the page", browser.client.source()).await;
    assert!(
        !source.contains(&receiver.whsec()),
        "the secret is never shown"
    );

    // Delete asks first; Cancel keeps the row, then confirming removes it.
    browser.click(&format!("button[data-delete='{id}']")).await;
    let text = browser
        .text("#confirm[data-action='delete'] #confirm-text")
        .await;
    assert!(text.contains(&receiver.url), "{text}");
    browser.click("#confirm-cancel").await;
    browser.wait_count("#confirm", 0).await;
    assert!(browser.exists(&row).await);
    browser.click(&format!("button[data-delete='{id}']")).await;
    browser.click("#confirm-ok").await;
    browser
        .wait_text("#action-result", "the delete is reported", |t| {
            t.starts_with("Deleted the callback of hook-host")
        })
        .await;
    browser.wait_count(&row, 0).await;
    browser.wait_count("#attempts", 0).await;
    browser
        .click(&format!("button[data-delete='{}']", second.callback_id))
        .await;
    browser.click("#confirm-ok").await;
    browser.find("#webhooks-empty").await;
    assert!(browser.page_marked().await, "still the same page");

    // Nothing more reached the receiver than the page asked for.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(receiver.of_kind("callback.test").len(), 2);
}
