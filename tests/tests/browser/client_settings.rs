//! Remote client settings on the Agents page (issue 18): the operator sees what
//! each agent's SDK obeys, edits the tenant's row and an agent's, gets the server's
//! problem for a ceiling out of bounds, and clears a row; the agents' next
//! responses carry the change. A read-only session sees the table without edits.

use switchboard_tests::sdk::proto::{ClientSettings, EffectiveClientSettings};

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

fn cell(key: &str, col: &str) -> String {
    format!(r#"#client-settings-table tr[data-settings="{key}"] td[data-col="{col}"]"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_and_edit_client_settings() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let operator = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    operator
        .put_client_settings(
            Some("alice"),
            &ClientSettings {
                poll_ceiling_ms: Some(5_000),
                reports_paused: None,
            },
        )
        .await
        .expect("alice's row");

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.goto(&server, "/agents").await;
    browser
        .wait_text(&cell("alice", "ceiling"), "alice's own ceiling", |t| {
            t == "5s"
        })
        .await;
    assert_eq!(browser.text(&cell("alice", "reports")).await, "inherit");
    assert_eq!(
        browser.text(&cell("alice", "effective")).await,
        "5s, reports sending"
    );
    assert_eq!(browser.text(&cell("tenant", "ceiling")).await, "SDK's own");
    assert!(
        browser
            .text(&cell("alice", "updated"))
            .await
            .contains("operator"),
        "who set it"
    );

    // The tenant's row: pause every agent's reports, ceiling 30 s.
    browser
        .click(r#"button[data-edit-settings="tenant"]"#)
        .await;
    browser.type_into("#settings-ceiling", "30").await;
    browser.select("#settings-reports", "paused").await;
    browser.click("#settings-save").await;
    browser
        .wait_text("#settings-result", "the saved notice", |t| {
            t.contains("Every agent")
        })
        .await;
    let list = operator.client_settings_list().await.expect("list");
    assert_eq!(
        list.tenant.map(|t| t.settings),
        Some(ClientSettings {
            poll_ceiling_ms: Some(30_000),
            reports_paused: Some(true),
        })
    );
    // The page follows: alice keeps her own ceiling, reports paused from the tenant.
    browser
        .wait_text(&cell("alice", "effective"), "the tenant's pause", |t| {
            t == "5s, reports paused"
        })
        .await;
    browser
        .wait_text(&cell("bob", "effective"), "bob's settings", |t| {
            t == "30s, reports paused"
        })
        .await;
    // And so do the agents, from their next response.
    assert_eq!(
        bob.own_client_settings("bob").await.expect("bob's"),
        EffectiveClientSettings {
            poll_ceiling_ms: Some(30_000),
            reports_paused: true
        }
    );
    assert_eq!(bob.client_settings().poll_ceiling_ms, Some(30_000));

    // A ceiling out of bounds: the server's problem, nothing stored.
    browser.click(r#"button[data-edit-settings="alice"]"#).await;
    browser.clear("#settings-ceiling").await;
    browser.type_into("#settings-ceiling", "0.5").await;
    browser.click("#settings-save").await;
    let error = browser
        .wait_text("#settings-error", "the problem", |t| !t.is_empty())
        .await;
    assert!(error.contains("between 1000"), "{error}");
    assert_eq!(
        operator
            .agent_client_settings("alice")
            .await
            .expect("alice")
            .own
            .map(|o| o.settings.poll_ceiling_ms),
        Some(Some(5_000))
    );

    // Clearing alice's row: she inherits the tenant's again.
    browser.click("#settings-clear").await;
    browser
        .wait_text(&cell("alice", "effective"), "the tenant's settings", |t| {
            t == "30s, reports paused"
        })
        .await;
    assert_eq!(browser.text(&cell("alice", "ceiling")).await, "inherit");
    assert_eq!(
        alice.own_client_settings("alice").await.expect("alice's"),
        EffectiveClientSettings {
            poll_ceiling_ms: Some(30_000),
            reports_paused: true
        }
    );

    // A read-only session sees the table, and no way to edit it.
    browser.open_logged_in(&server, true).await;
    browser.goto(&server, "/agents").await;
    browser
        .wait_text(&cell("bob", "effective"), "the table", |t| {
            t == "30s, reports paused"
        })
        .await;
    assert!(!browser.exists("button[data-edit-settings]").await);
}
