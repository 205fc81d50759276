//! Signed requests in the console (issue 39): the Agents page shows the tenant's
//! signature policy and each agent's key state (how many keys, the newest one's
//! id), and an operator who may write sets the policy there; a read-only session
//! sees the panel without the form.

use switchboard_tests::sdk::signing::SigningKey;

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_see_each_agents_keys_and_set_the_policy() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let (_, signer) = server.agent("signer").await;
    let key = SigningKey::generate();
    let jkt = signer
        .register_key(&key.public_key())
        .await
        .expect("key")
        .jkt;
    server.agent("plain").await;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.goto(&server, "/agents").await;
    browser
        .wait_text("#signature-policy", "the policy", |t| t == "optional")
        .await;
    let row = r#"#signature-keys-table tr[data-agent="signer"]"#;
    browser
        .wait_text(&format!(r#"{row} td[data-col="keys"]"#), "one key", |t| {
            t == "1"
        })
        .await;
    assert_eq!(
        browser
            .text(&format!(r#"{row} td[data-col="newest"]"#))
            .await,
        jkt
    );
    let plain = r#"#signature-keys-table tr[data-agent="plain"] td[data-col="keys"]"#;
    assert_eq!(browser.text(plain).await, "0");

    browser.select("#signature-policy-select", "required").await;
    browser.click("#signature-policy-save").await;
    browser
        .wait_text("#signature-policy-result", "the new policy", |t| {
            t.contains("required")
        })
        .await;
    browser
        .wait_text("#signature-policy", "the policy", |t| t == "required")
        .await;
    let overview = server.operator().signatures().await.expect("overview");
    assert_eq!(overview.policy, "required");

    // A read-only session sees the policy and the keys, not the form.
    let reader = Browser::start().await;
    reader.open_logged_in(&server, true).await;
    reader.goto(&server, "/agents").await;
    reader
        .wait_text("#signature-policy", "the policy", |t| t == "required")
        .await;
    assert!(!reader.exists("#signature-policy-select").await);
}
