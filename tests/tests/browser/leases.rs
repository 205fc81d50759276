//! The Leases and Fencing pages in the browser: a lease appears with its holder,
//! owner client, token and a ticking countdown; a memory's lineage opens as a tree;
//! fencing rejections appear live; a force-release removes the lease live.

use serde_json::json;
use switchboard_proto::{AcquireLease, BranchMemory, RegisterMemory};
use switchboard_tests::key;
use switchboard_tests::sdk::Precondition;

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

#[tokio::test(flavor = "current_thread")]
async fn leases_lineage_fencing_and_force_release_live() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let (_, agent) = server.agent("mind-host").await;
    let root = agent
        .register_memory(&RegisterMemory {
            memory_instance_id: None,
            label: Some("main".into()),
        })
        .await
        .expect("memory")
        .memory_instance_id;
    let ask = AcquireLease {
        // The seed's way: a display name, whose canonical name the lease is on.
        name: String::new(),
        display_name: Some("Plan ner".into()),
        memory_instance_id: root,
        ttl_seconds: 300.0,
        owner_client: Some("host-a pid 7".into()),
        lock_delay_seconds: None,
    };
    let lease = agent.acquire_lease(&ask, &key()).await.expect("lease").0;
    let child = agent
        .branch_memory(&BranchMemory {
            parent_memory_instance_id: root,
            parent_fencing_token: lease.fencing_token,
            label: Some("experiment".into()),
        })
        .await
        .expect("branch")
        .memory_instance_id;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    browser.find("#overview").await;
    browser.click("a[data-nav='/leases']").await;
    let row = format!("tr[data-lease='{}']", lease.lease_id);
    // The page renders its list after its own fetch: wait for the row.
    browser.find(&row).await;
    assert_eq!(
        browser
            .text(&format!("{row} td[data-col='name'] code"))
            .await,
        "planner"
    );
    assert_eq!(
        browser
            .text(&format!("{row} td[data-col='name'] [data-display-name]"))
            .await,
        "Plan ner",
        "the display name is shown next to the canonical name"
    );
    assert_eq!(
        browser.text(&format!("{row} td[data-col='holder']")).await,
        "agent:mind-host"
    );
    assert_eq!(
        browser.text(&format!("{row} td[data-col='owner']")).await,
        "host-a pid 7"
    );
    assert_eq!(
        browser.text(&format!("{row} td[data-col='token']")).await,
        "1"
    );
    let first = browser
        .wait_text(
            &format!("{row} td[data-col='expires']"),
            "a countdown",
            |t| t.starts_with("expires in 4m"),
        )
        .await;
    browser
        .wait_text(&format!("{row} td[data-col='expires']"), "it ticks", |t| {
            t != first
        })
        .await;

    // The memory's lineage: the root, and the branch under it.
    browser
        .click(&format!("{row} td[data-col='memory'] button"))
        .await;
    browser
        .find(&format!(
            "#lineage li[data-memory='{root}'] li[data-memory='{child}']"
        ))
        .await;
    let tree = browser.text("#lineage").await;
    assert!(
        tree.contains("experiment") && tree.contains("branched at token 1"),
        "{tree}"
    );
    browser.screenshot("browser-leases.png").await;

    // A stale token is refused and shows up live on the Fencing page.
    browser.click("a[data-nav='/fencing']").await;
    browser.find("#fencing-empty").await;
    let refused = agent
        .put_record(
            root,
            "plan",
            &json!({"zombie": true}),
            0,
            Precondition::None,
        )
        .await;
    assert!(refused.is_err());
    browser.wait_count("#fencing-table tbody tr", 1).await;
    assert_eq!(browser.text("td[data-col='presented']").await, "0");
    assert_eq!(browser.text("td[data-col='current']").await, "1");
    browser.screenshot("browser-fencing.png").await;

    // Force release, confirmed inline; the row goes away live.
    browser.click("a[data-nav='/leases']").await;
    browser
        .click(&format!("button[data-force='{}']", lease.lease_id))
        .await;
    browser
        .click(&format!("button[data-force-confirm='{}']", lease.lease_id))
        .await;
    browser
        .wait_text("#action-result", "the force-release is reported", |t| {
            t.starts_with("Forced out planner")
        })
        .await;
    browser.find("#leases-empty").await;
    let stale = agent
        .put_record(
            root,
            "plan",
            &json!(1),
            lease.fencing_token,
            Precondition::None,
        )
        .await;
    let code = stale
        .expect_err("fenced")
        .problem()
        .and_then(|p| p.code.clone());
    assert_eq!(
        code.as_deref(),
        Some("stale_fence"),
        "the old holder is refused"
    );
}
