//! Tenants in the console (issue 15): the deployment admin sees the tenant list
//! under Agents, creates a tenant and is shown its operator token once; a taken
//! name gets the server's problem. That tenant's operator, logged in with the
//! token shown, sees only its own agents and no tenant list.

use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::proto::CreateAgent;

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

fn cell(tenant: &str, col: &str) -> String {
    format!(r#"#tenants-table tr[data-tenant="{tenant}"] td[data-col="{col}"]"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_creates_a_tenant_whose_operator_sees_only_it() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    server.agent("alice").await;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.goto(&server, "/agents").await;
    browser
        .wait_text(
            &cell("default", "agents"),
            "the default tenant's row",
            |t| t == "1",
        )
        .await;

    browser.type_into("#tenant-name", "team-b").await;
    browser.click("#tenant-create").await;
    browser
        .wait_text("#tenant-created", "the created notice", |t| {
            t.contains("Created team-b")
        })
        .await;
    let token = browser.text("#tenant-token").await;
    assert!(token.starts_with("sb_op_"), "{token:?}");
    browser
        .wait_text(&cell("team-b", "agents"), "team-b's row", |t| t == "0")
        .await;

    browser.type_into("#tenant-name", "team-b").await;
    browser.click("#tenant-create").await;
    browser
        .wait_text("#tenant-error", "the server's problem", |t| {
            t.contains("already exists") && t.contains("pick another name")
        })
        .await;

    // The token shown works, for team-b only.
    let op_b = Client::new(&server.url, token.as_str()).expect("client");
    op_b.create_agent(&CreateAgent {
        name: "carol".to_owned(),
    })
    .await
    .expect("team-b's operator creates an agent");
    let team_b = Browser::start().await;
    team_b.open_logged_in_as(&server, &token, false).await;
    team_b.goto(&server, "/agents").await;
    team_b.wait_count("#agents-table tr[data-agent]", 1).await;
    assert!(
        team_b
            .exists(r#"#agents-table tr[data-agent="carol"]"#)
            .await
    );
    assert!(
        !team_b.exists("#tenants").await,
        "only the admin sees tenants"
    );
    // The admin's list counts carol now.
    browser.goto(&server, "/agents").await;
    browser
        .wait_text(&cell("team-b", "agents"), "team-b's count", |t| t == "1")
        .await;
}
