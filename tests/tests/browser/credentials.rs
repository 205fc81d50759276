//! Agents and credentials in the console (issue 15): an operator creates an agent
//! and is shown its `switchboard agent login` line once; the token works; revoking
//! the agent (asked once more in the row) refuses its token from the next request;
//! a scraper's token is revoked from the credentials table. Deleting an agent asks
//! for its name to be typed, then removes it: its row goes, its work is purged,
//! sends to it answer 404. A read-only session sees the tables without the forms
//! and buttons.

use serde_json::json;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::reqwest;

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_create_agents_and_revoke_credentials() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let operator = server.operator();
    let http = reqwest::Client::new();
    let minted: serde_json::Value = http
        .post(format!("{}/api/v1/ops/tokens", server.url))
        .bearer_auth(&server.operator_token)
        .json(&json!({"scopes": ["metrics:read"], "label": "prometheus"}))
        .send()
        .await
        .expect("mint")
        .json()
        .await
        .expect("json");
    let scraper = minted["token"].as_str().expect("token").to_owned();

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.goto(&server, "/agents").await;
    browser.type_into("#agent-name", "carol").await;
    browser.click("#agent-create").await;
    let line = browser
        .wait_text("#agent-login", "the login line", |t| {
            t.starts_with("switchboard agent login --server ")
        })
        .await;
    let want = format!(
        "switchboard agent login --server {} --token sb_ag_",
        server.url
    );
    assert!(
        line.starts_with(&want),
        "{line:?} should start with {want:?}"
    );
    let token = line.rsplit(' ').next().unwrap().to_owned();
    let carol = Client::new(&server.url, token.as_str()).expect("client");
    carol
        .poll("carol", 0, None)
        .await
        .expect("the token shown works");
    browser
        .wait_count(r#"#agents-table tr[data-agent="carol"]"#, 1)
        .await;

    // Carol's read-only token (the seed's `agent:project_A:read`), shown once: it
    // polls, and may not claim.
    browser
        .click(r#"#agents-table button[data-read-token="carol"]"#)
        .await;
    let read = browser
        .wait_text("#read-token", "the read-only token", |t| {
            t.starts_with("sb_ag_")
        })
        .await;
    let reader = Client::new(&server.url, read.as_str()).expect("client");
    reader.poll("carol", 0, None).await.expect("it reads");
    let refused = reader
        .claim("carol", &Default::default())
        .await
        .expect_err("it may not claim");
    assert_eq!(refused.status(), Some(403), "{refused}");

    // Revoke every token of carol: asked once more, then refused.
    browser
        .click(r#"#agents-table button[data-revoke="carol"]"#)
        .await;
    browser.click("#revoke-confirm").await;
    browser
        .wait_text("#revoke-result", "the revoked notice", |t| {
            t.contains("Revoked 2 tokens of carol")
        })
        .await;
    let refused = carol.poll("carol", 0, None).await.expect_err("revoked");
    assert_eq!(refused.status(), Some(401), "{refused}");
    let refused = reader
        .poll("carol", 0, None)
        .await
        .expect_err("revoked too");
    assert_eq!(refused.status(), Some(401), "{refused}");

    // The scraper's token, from the credentials table.
    let id = operator
        .tokens()
        .await
        .expect("list")
        .into_iter()
        .find(|c| c.label == "prometheus")
        .expect("the scraper's token")
        .token_id;
    let row = format!(r#"#credentials-table tr[data-token="{id}"]"#);
    browser
        .wait_text(&format!(r#"{row} td[data-col="state"]"#), "live", |t| {
            t == "live"
        })
        .await;
    browser
        .click(&format!(r#"{row} button[data-revoke="{id}"]"#))
        .await;
    browser.click("#revoke-confirm").await;
    browser
        .wait_text(&format!(r#"{row} td[data-col="state"]"#), "revoked", |t| {
            t.starts_with("revoked ")
        })
        .await;
    let scrape = http
        .get(format!("{}/metrics", server.url))
        .bearer_auth(&scraper)
        .send()
        .await
        .expect("scrape");
    assert_eq!(scrape.status(), 401);

    // Delete dave: the button asks for the name, enabled only when it is typed.
    let (_, dave) = server.agent("dave").await;
    operator
        .send_message(
            "dave",
            &switchboard_tests::sdk::proto::SendMessage {
                payload: json!("left over"),
                ..Default::default()
            },
            &switchboard_tests::key(),
        )
        .await
        .expect("send");
    browser.goto(&server, "/agents").await;
    browser
        .click(r#"#agents-table button[data-delete="dave"]"#)
        .await;
    browser.type_into("#delete-name", "dav").await;
    assert_eq!(
        browser.attr("#delete-confirm", "disabled").await.as_deref(),
        Some("true"),
        "not until the whole name is typed"
    );
    browser.type_into("#delete-name", "e").await;
    browser.click("#delete-confirm").await;
    browser
        .wait_text("#delete-result", "the deleted notice", |t| {
            t.contains("Deleted dave: 1 credential revoked, 1 open event purged")
        })
        .await;
    browser
        .wait_count(r#"#agents-table tr[data-agent="dave"]"#, 0)
        .await;
    assert_eq!(
        dave.poll("dave", 0, None).await.expect_err("gone").status(),
        Some(401)
    );

    // Read-only: the tables, no forms or buttons.
    let viewer = Browser::start().await;
    viewer.open_logged_in(&server, true).await;
    viewer.goto(&server, "/agents").await;
    viewer
        // The operator's, carol's two, the scraper's and dave's (revoked, its agent
        // shown as `deleted:<id>`).
        .wait_count("#credentials-table tr[data-token]", 5)
        .await;
    assert!(!viewer.exists("#agent-form").await);
    assert!(!viewer.exists("button[data-revoke]").await);
    assert!(!viewer.exists("button[data-read-token]").await);
    assert!(!viewer.exists("button[data-delete]").await);
}
