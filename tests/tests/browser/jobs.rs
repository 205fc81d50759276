//! "All N matching" in the browser: the confirmation keeps keyboard focus inside it,
//! a paced replay job shows its progress live and can be cancelled, the rest is
//! replayed unpaced, the audit log shows how far each job got, and the overview draws
//! its charts from the server's sample history.

use std::time::Duration;

use fantoccini::Locator;
use switchboard_proto::ClaimRequest;
use switchboard_tests::{Options, TestServer};

use crate::driver::Browser;
use crate::support::{bounded, console_and_browser};

impl Browser {
    /// The `id` of the focused element.
    async fn focused_id(&self) -> String {
        let v = bounded(
            "reading the focused element",
            self.client.execute(
                "return document.activeElement ? document.activeElement.id : ''",
                vec![],
            ),
        )
        .await;
        v.as_str().unwrap_or_default().to_owned()
    }
}

const TAB: &str = "\u{E004}";
const SHIFT_TAB: &str = "\u{E008}\u{E004}";

/// The first number in `text`.
fn number(text: &str) -> u64 {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|s| !s.is_empty())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {text:?}"))
}

#[tokio::test(flavor = "current_thread")]
async fn replay_all_matching_runs_as_a_job_with_progress_cancel_charts_and_audit() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = TestServer::with(Options {
        ui_dir: Some(ui),
        sample_interval: Some(Duration::from_millis(200)),
        ..Options::default()
    })
    .await;
    let bot = server.fill_quarantine("batch-bot", 600).await;
    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.find("#overview").await;

    browser.click("a[data-nav='/quarantine']").await;
    browser
        .wait_text("#replay-all", "the button counts every match", |t| {
            t == "Replay all 600 matching"
        })
        .await;
    browser.click("#replay-all").await;
    let text = browser.text("#confirm-text").await;
    assert!(text.starts_with("Replay 600 events"), "{text}");
    assert!(text.contains("cancel it while it runs"), "{text}");

    // Focus starts on the button and stays inside the dialog both ways round.
    assert_eq!(browser.focused_id().await, "confirm-ok");
    browser.press(TAB).await;
    assert_eq!(browser.focused_id().await, "confirm-cancel");
    browser.press(TAB).await;
    assert_eq!(
        browser.focused_id().await,
        "confirm-rate",
        "Tab wraps to the first"
    );
    browser.press(SHIFT_TAB).await;
    assert_eq!(
        browser.focused_id().await,
        "confirm-cancel",
        "Shift+Tab wraps to the last"
    );

    // A paced job (100/s: six seconds for 600) shows its progress, then a cancel.
    browser.type_into("#confirm-rate", "100").await;
    browser.click("#confirm-ok").await;
    browser.find("#job[data-state='running']").await;
    let progress = browser
        .wait_text("#job-text", "progress moves past the first batch", |t| {
            t.starts_with("Replaying: ") && number(t) >= 100 && number(t) < 600
        })
        .await;
    assert!(progress.contains("of 600 events at 100/s"), "{progress}");
    let bar = browser
        .attr("#job-progress", "value")
        .await
        .unwrap_or_default();
    assert!(
        bar.parse::<u64>().is_ok_and(|v| v >= 100),
        "the bar moves too: {bar}"
    );
    browser.screenshot("browser-job.png").await;
    browser.click("#job-cancel").await;
    let cancelled = browser
        .wait_text("#action-result", "the cancel is reported", |t| {
            t.starts_with("Cancelled: replayed ")
        })
        .await;
    let done = number(&cancelled);
    assert!(done > 0 && done < 600, "{cancelled}");
    assert!(cancelled.contains("of 600 first"), "{cancelled}");
    assert!(!browser.exists("#job").await, "the progress bar is gone");

    // The rest, unpaced.
    let rest = 600 - done;
    browser
        .wait_text("#replay-all", "the count follows the cancel", |t| {
            t == format!("Replay all {rest} matching")
        })
        .await;
    browser.click("#replay-all").await;
    browser.click("#confirm-ok").await;
    browser
        .wait_text("#action-result", "the rest is reported", |t| {
            t.starts_with(&format!("Replayed {rest} events"))
        })
        .await;
    browser.find("#quarantine-empty").await;

    // Some acks, so the latency distribution has something to draw.
    let claim = ClaimRequest {
        limit: Some(20),
        lease_seconds: Some(60),
        attempt_id: None,
    };
    for c in bot.claim("batch-bot", &claim).await.expect("claim").events {
        bot.ack("batch-bot", c.event.event_id, c.claim_token)
            .await
            .expect("ack");
    }
    browser.click("a[data-nav='/']").await;
    for chart in ["depth", "latency", "expirations"] {
        browser
            .find(&format!("#chart-{chart}[data-drawn='true'] svg"))
            .await;
    }
    let lines = bounded(
        "finding the depth lines",
        browser
            .client
            .find_all(Locator::Css("#chart-depth polyline[stroke-width='2']")),
    )
    .await;
    assert!(
        lines.len() >= 3,
        "a line per status (and legend marks): {}",
        lines.len()
    );
    browser
        .wait_text("#tile-delivered .tile-value", "delivered per minute", |t| {
            t == "20"
        })
        .await;
    bounded(
        "scrolling to the charts",
        browser.client.execute(
            "document.getElementById('counter-tiles').scrollIntoView()",
            vec![],
        ),
    )
    .await;
    browser.screenshot("browser-overview-charts.png").await;

    // The audit log says how far each job got.
    browser.click("a[data-nav='/audit']").await;
    browser.find("tr[data-audit-action='replay']").await;
    let jobs = browser.texts("td[data-col='job']").await;
    assert!(
        jobs.contains(&format!("cancelled at {done} of 600")),
        "{jobs:?}"
    );
    assert!(jobs.contains(&"completed".to_owned()), "{jobs:?}");
    browser.screenshot("browser-audit-jobs.png").await;
}
