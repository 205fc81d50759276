//! Device login in the console (issue 15): a device asks; the operator follows the
//! link the device shows to the Devices page, where the request it names is
//! marked with who asked and from where; the operator names the agent and
//! approves, and the device's next poll gets tokens that act as that agent.
//! Another request is denied from the page and its device is told so.

use serde_json::Value;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::reqwest;

use crate::driver::Browser;
use crate::support::{console_and_browser, console_server};

async fn form(server: &TestServer, path: &str, body: String) -> (u16, Value) {
    let reply = reqwest::Client::new()
        .post(format!("{}{path}", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("user-agent", "switchboard-cli/browser-test")
        .body(body)
        .send()
        .await
        .expect("request");
    let status = reply.status().as_u16();
    (status, reply.json().await.expect("JSON"))
}

async fn ask(server: &TestServer, agent: &str) -> Value {
    let (status, body) = form(
        server,
        "/oauth/device_authorization",
        format!("client_id=switchboard-cli&scope=agent%3A{agent}"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn poll(server: &TestServer, device: &Value) -> (u16, Value) {
    form(
        server,
        "/oauth/token",
        format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code\
             &client_id=switchboard-cli&device_code={}",
            device["device_code"].as_str().unwrap()
        ),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_approves_a_device_on_the_devices_page() {
    let Some(dist) = console_and_browser() else {
        return;
    };
    let server = console_server(dist).await;
    let laptop = ask(&server, "carol").await;
    let stranger = ask(&server, "mallory").await;
    let code = laptop["user_code"].as_str().unwrap().to_owned();
    let other = stranger["user_code"].as_str().unwrap().to_owned();

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    // The link the device shows.
    let link = laptop["verification_uri_complete"].as_str().unwrap();
    let path = link
        .strip_prefix(server.url.as_str())
        .expect("this server's link");
    browser.goto(&server, path).await;
    let row = format!(r#"#devices-table tr[data-code="{code}"]"#);
    browser.wait_count(&format!("{row}.marked"), 1).await;
    browser
        .wait_count(&format!(r#"#devices-table tr[data-code="{other}"]"#), 1)
        .await;
    let source = browser
        .text(&format!(r#"{row} td[data-col="source"]"#))
        .await;
    assert!(
        source.contains("127.0.0.1") && source.contains("switchboard-cli/browser-test"),
        "{source:?}"
    );
    assert_eq!(
        browser
            .text(&format!(r#"{row} td[data-col="agent"]"#))
            .await,
        "carol"
    );

    // Log it in as another agent than it asked for.
    let input = format!(r#"input[data-agent="{code}"]"#);
    browser.find(&input).await.clear().await.expect("clear");
    browser.type_into(&input, "carol-laptop").await;
    browser
        .click(&format!(r#"button[data-approve="{code}"]"#))
        .await;
    browser
        .wait_text("#device-result", "the approval", |t| {
            t.contains("carol-laptop")
        })
        .await;
    let (status, tokens) = poll(&server, &laptop).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    let inbox = reqwest::Client::new()
        .get(format!("{}/api/v1/agents/carol-laptop/inbox", server.url))
        .bearer_auth(access)
        .send()
        .await
        .expect("inbox");
    assert_eq!(inbox.status(), 200);

    browser
        .click(&format!(r#"button[data-deny="{other}"]"#))
        .await;
    browser
        .wait_text("#device-result", "the denial", |t| t.contains("denied"))
        .await;
    let (status, refused) = poll(&server, &stranger).await;
    assert_eq!(
        (status, &refused["error"]),
        (400, &Value::from("access_denied"))
    );
    browser
        .wait_text(
            &format!(r#"#devices-table tr[data-code="{other}"] td[data-col="state"]"#),
            "the denied state",
            |t| t.contains("denied"),
        )
        .await;
}
