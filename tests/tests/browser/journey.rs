//! An operator's journey through the console in a real browser: log in with the
//! operator token, watch an agent's depth change live, inspect an event's timeline,
//! find quarantined work, replay one event and purge another (type-to-confirm), and
//! see both actions in the audit log. Also: a read-only link in the browser, and the
//! live indicator when the server goes away.

use serde_json::json;
use switchboard_proto::{ClaimRequest, EventId, ReleaseRequest, SendMessage};
use switchboard_tests::sdk::Client;
use switchboard_tests::{TestServer, key};

use crate::driver::Browser;
use crate::support::{bounded, console_and_browser, console_server};

/// Sends `payload` to `agent` as the operator; returns the event id.
async fn send(
    server: &TestServer,
    agent: &str,
    payload: serde_json::Value,
    max_attempts: u32,
) -> EventId {
    server
        .operator()
        .send_message(
            agent,
            &SendMessage {
                payload,
                correlation_id: None,
                priority: None,
                available_at: None,
                expires_at: None,
                max_attempts: Some(max_attempts),
            },
            &key(),
        )
        .await
        .expect("send")
        .event_id
}

/// Sends two single-attempt events to `agent`, claims them and fails both: they go
/// to the quarantine. Returns their ids.
async fn quarantine_two(server: &TestServer, agent: &str, client: &Client) -> (EventId, EventId) {
    let a = send(server, agent, json!({"task": "deploy", "n": 1}), 1).await;
    let b = send(server, agent, json!({"task": "deploy", "n": 2}), 1).await;
    let claimed = client
        .claim(
            agent,
            &ClaimRequest {
                limit: Some(10),
                lease_seconds: Some(60),
                attempt_id: None,
            },
        )
        .await
        .expect("claim");
    for c in claimed.events {
        client
            .release(
                agent,
                c.event.event_id,
                &ReleaseRequest {
                    claim_token: c.claim_token,
                    delay_seconds: None,
                    error: Some("schema mismatch: field ref is missing".to_owned()),
                    terminal: false,
                },
            )
            .await
            .expect("release");
    }
    (a, b)
}

#[tokio::test(flavor = "current_thread")]
async fn operator_journey_login_live_inspect_quarantine_replay_purge_audit() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let (_, bot) = server.agent("build-bot").await;
    let browser = Browser::start().await;
    browser.open_console(&format!("{}/", server.url)).await;

    // Not logged in: the login page. Log in with the operator token.
    browser.find("#login").await;
    browser.type_into("#login-token", "sb_op_wrong").await;
    browser.click("#login-submit").await;
    browser
        .wait_text(
            "#login-error",
            "a wrong token shows the server's detail",
            |t| t.contains("unknown or revoked"),
        )
        .await;
    browser.clear("#login-token").await;
    browser
        .type_into("#login-token", &server.operator_token)
        .await;
    browser.click("#login-submit").await;
    browser.find("#overview-tiles").await;
    let p50 = browser.text("#tile-latency-p50 .tile-value").await;
    assert_eq!(p50, "–", "no delivery yet, so no latency");
    browser
        .wait_text("#live", "the live stream connects", |t| t.contains("Live"))
        .await;
    let url = bounded("reading the URL", browser.client.current_url()).await;
    assert!(
        !url.as_str().contains(&server.operator_token),
        "the token never sits in the page URL"
    );

    // Agents: the depth changes live after a message is sent over HTTP.
    browser.click("a[data-nav='/agents']").await;
    let pending = "tr[data-agent='build-bot'] td[data-col='pending']";
    browser
        .wait_text(pending, "starts at 0", |t| t == "0")
        .await;
    let first = send(
        &server,
        "build-bot",
        json!({"task": "build", "ref": "main"}),
        5,
    )
    .await;
    browser
        .wait_text(pending, "shows the new event without a reload", |t| {
            t == "1"
        })
        .await;
    browser.screenshot("browser-agents.png").await;

    // Click through to the inbox, then the inspector with its timeline.
    browser.click("tr[data-agent='build-bot'] td a").await;
    let row_link = format!("tr[data-event='{first}'] a");
    browser.click(&row_link).await;
    browser.find("#timeline li[data-action='created']").await;
    let payload = browser.text("#payload").await;
    assert!(
        payload.contains("\"ref\": \"main\""),
        "pretty JSON payload: {payload}"
    );
    assert!(browser.text("#event-attempts").await.starts_with("0 of 5"));
    browser.screenshot("browser-inspector.png").await;

    // Two events go to the quarantine (max_attempts=1, then a failed release).
    let (replayed, purged) = quarantine_two(&server, "build-bot", &bot).await;
    browser.click("a[data-nav='/quarantine']").await;
    browser.wait_count("#quarantine-table tbody tr", 2).await;
    let error = browser
        .text(&format!(
            "tr[data-event='{replayed}'] td[data-col='last-error']"
        ))
        .await;
    assert!(
        error.contains("schema mismatch"),
        "the last error is listed: {error}"
    );
    browser.screenshot("browser-quarantine.png").await;

    // Replay one: the confirmation shows the count.
    browser
        .click(&format!("button[data-replay='{replayed}']"))
        .await;
    let text = browser.text("#confirm-text").await;
    assert!(text.starts_with("Replay 1 event"), "{text}");
    browser.click("#confirm-ok").await;
    browser
        .wait_text("#action-result", "the replay is reported", |t| {
            t.starts_with("Replayed 1 event")
        })
        .await;
    browser.wait_count("#quarantine-table tbody tr", 1).await;

    // Purge the other: the button stays disabled until the word is typed.
    browser
        .click(&format!("button[data-purge='{purged}']"))
        .await;
    assert_eq!(
        browser.attr("#confirm-ok", "disabled").await.as_deref(),
        Some("true"),
        "purge needs type-to-confirm"
    );
    browser.type_into("#confirm-input", "purge").await;
    browser.click("#confirm-ok").await;
    browser
        .wait_text("#action-result", "the purge is reported", |t| {
            t.starts_with("Purged 1 event")
        })
        .await;
    browser.find("#quarantine-empty").await;
    browser.click("a[data-nav='/']").await;
    browser.find("#counter-tiles").await;
    browser.screenshot("browser-overview.png").await;

    // Both actions are in the audit log.
    browser.click("a[data-nav='/audit']").await;
    browser.find("tr[data-audit-action='replay']").await;
    browser.find("tr[data-audit-action='purge']").await;
    let replay_count = browser
        .text("tr[data-audit-action='replay'] td[data-col='count']")
        .await;
    assert_eq!(replay_count, "1");
    browser.screenshot("browser-audit.png").await;

    // The server goes away: the console says so.
    server.stop().await;
    browser
        .wait_text("#live", "the indicator shows the disconnection", |t| {
            t.contains("Disconnected")
        })
        .await;
}

#[tokio::test(flavor = "current_thread")]
async fn release_a_claimed_event_from_the_inspector() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let (_, bot) = server.agent("slow-bot").await;
    let id = send(&server, "slow-bot", json!({"task": "long"}), 5).await;
    let claimed = bot
        .claim(
            "slow-bot",
            &ClaimRequest {
                limit: Some(1),
                lease_seconds: Some(600),
                attempt_id: None,
            },
        )
        .await
        .expect("claim");
    let token = claimed.events[0].claim_token;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.find("#overview").await;
    browser.goto(&server, &format!("/events/{id}")).await;

    let first = browser
        .wait_text("#lease-countdown", "the lease counts down", |t| {
            t.starts_with("expires in 9m")
        })
        .await;
    browser
        .wait_text("#lease-countdown", "a second later", |t| {
            t != first && t.starts_with("expires in")
        })
        .await;
    browser.click("#event-release").await;
    browser.click("#confirm-ok").await;
    browser
        .wait_text("#action-result", "the release is reported", |t| {
            t.starts_with("Released 1 event")
        })
        .await;
    browser
        .wait_text("#event-status", "the event is pending again", |t| {
            t == "pending"
        })
        .await;
    browser.find("#timeline li[data-action='released']").await;
    // The claim was a step in the event's row until the release moved it into a
    // history row of its own: the timeline reads as it did with a row per step.
    let timeline = browser.text("#timeline").await;
    let steps: Vec<&str> = timeline
        .lines()
        .filter_map(|l| {
            ["created", "claimed", "released"]
                .into_iter()
                .find(|a| l.contains(a))
        })
        .collect();
    assert_eq!(steps, ["created", "claimed", "released"], "{timeline}");
    assert!(
        timeline.contains("claimed by agent:slow-bot · attempt 1 of 5")
            && timeline.contains("released by operator"),
        "who did each, and the claim's attempt: {timeline}"
    );

    // The holder's token no longer works (its claim was invalidated).
    let stale = bot.ack("slow-bot", id, token).await;
    assert!(
        stale.is_err(),
        "the old claim token is stale after an operator release"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_read_only_link_logs_in_without_destructive_buttons() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let (_, bot) = server.agent("lint-bot").await;
    quarantine_two(&server, "lint-bot", &bot).await;
    let browser = Browser::start().await;
    let path = browser.open_logged_in(&server, true).await;
    browser.find("#overview-tiles").await;
    let url = bounded("reading the URL", browser.client.current_url()).await;
    assert_eq!(url.path(), "/", "redirected to the console");
    assert!(url.query().is_none(), "no ticket left in the URL: {url}");
    browser.find("#read-only").await;

    browser.click("a[data-nav='/quarantine']").await;
    browser.wait_count("#quarantine-table tbody tr", 2).await;
    for css in [
        "button[data-replay]",
        "button[data-purge]",
        "#replay-all",
        "#purge-all",
        "#select-all",
    ] {
        assert!(
            !browser.exists(css).await,
            "{css} is hidden for a read-only session"
        );
    }
    // The cookie works once per link: the same link again is refused.
    browser
        .client
        .goto(&format!("{}{path}", server.url))
        .await
        .expect("goto");
    let body = browser.text("body").await;
    assert!(body.contains("already used or has expired"), "{body}");
}

/// The agents' client side (issue 6): what an agent's SDK reports about its outbox
/// and consumer shows on the Agents page, poison on both sides included, and a new
/// report arrives live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_page_shows_each_agents_client_side() {
    use switchboard_proto::{ClientPoison, ClientReport, InboxSummary, OutboxSummary};
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let (_, alice) = server.agent("alice").await;
    let report = ClientReport {
        sdk: "switchboard-sdk/test".into(),
        outbox: OutboxSummary {
            queued: 2,
            retryable: 1,
            poison: 1,
            expired: 1,
            ..OutboxSummary::default()
        },
        outbox_poison: vec![ClientPoison {
            id: "17".into(),
            target: Some("agent:nobody".into()),
            reason: "HTTP 404 not_found: agent \"nobody\"".into(),
            at: time::OffsetDateTime::now_utc(),
        }],
        outbox_expired: vec![ClientPoison {
            id: "18".into(),
            target: Some("room:ops".into()),
            reason: "not sent within the server's idempotency window (24 h keys, less a \
                     1 h margin) since its first attempt"
                .into(),
            at: time::OffsetDateTime::now_utc(),
        }],
        inbox: InboxSummary {
            mode: "polling".into(),
            poll_interval_seconds: Some(8.0),
            handled: 5,
            ..InboxSummary::default()
        },
        inbox_poison: vec![],
    };
    alice
        .put_client_report("alice", &report)
        .await
        .expect("report");

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.goto(&server, "/agents").await;
    let row = r#"#client-table tr[data-client-agent="alice"]"#;
    browser
        .wait_text(
            &format!("{row} td[data-col=\"mode\"]"),
            "the polling mode",
            |t| t == "polling every 8s",
        )
        .await;
    assert_eq!(
        browser
            .text(&format!("{row} td[data-col=\"outbox-open\"]"))
            .await,
        "3"
    );
    assert_eq!(
        browser
            .text(&format!("{row} td[data-col=\"outbox-poison\"]"))
            .await,
        "1"
    );
    let poison = browser
        .text(r#"#client-poison li[data-client-poison="outbox"][data-agent="alice"]"#)
        .await;
    assert!(
        poison.contains("agent:nobody") && poison.contains("not_found"),
        "{poison}"
    );
    assert_eq!(
        browser
            .text(&format!("{row} td[data-col=\"outbox-expired\"]"))
            .await,
        "1"
    );
    let expired = browser
        .text(r#"#client-poison li[data-client-poison="expired"][data-agent="alice"]"#)
        .await;
    assert!(
        expired.contains("room:ops") && expired.contains("idempotency window"),
        "{expired}"
    );

    // A new report (the consumer quarantined an event) arrives without a reload.
    let mut later = report.clone();
    later.inbox.mode = "sse".into();
    later.inbox.poisoned = 1;
    later.inbox_poison = vec![ClientPoison {
        id: "0192-event".into(),
        target: None,
        reason: "failed 3 times locally; last: schema mismatch".into(),
        at: time::OffsetDateTime::now_utc(),
    }];
    alice
        .put_client_report("alice", &later)
        .await
        .expect("report");
    browser
        .wait_text(
            &format!("{row} td[data-col=\"mode\"]"),
            "the live update",
            |t| t == "sse",
        )
        .await;
    let poison = browser
        .text(r#"#client-poison li[data-client-poison="inbox"][data-agent="alice"]"#)
        .await;
    assert!(poison.contains("schema mismatch"), "{poison}");
    browser.screenshot("browser-agents-client-side.png").await;
}
