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
    browser.clear(&input).await;
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

/// Issue 15's whole journey: `switchboard agent login` (the real CLI, in a kernel
/// keyring session) shows a code and a link; the operator approves it on the
/// Devices page; the CLI keeps the refresh token in the keyring and `agent run`
/// handles events; the server's clock passes the access token's expiry between
/// two events, and the CLI renews it without losing the second. (The server is on
/// a manual clock, which the test moves while the CLI polls for its tokens.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_logs_in_approved_in_the_console_and_runs_through_a_token_expiry() {
    use std::time::Duration;
    use switchboard_tests::sdk::proto::SendMessage;
    let Some(dist) = console_and_browser() else {
        return;
    };
    let Some(cli) = crate::support::cli_bin() else {
        return;
    };
    if std::process::Command::new("keyctl")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::skip::<()>("keyctl is missing (Debian package keyutils)");
        return;
    }
    let server = TestServer::with(switchboard_tests::Options {
        manual_clock: true,
        ui_dir: Some(dist),
        ..Default::default()
    })
    .await;
    let home = tempfile::tempdir().unwrap();
    let handled = home.path().join("handled");
    let script = format!(
        "set -e
         {cli} agent login --server {url} --agent eve 2> {home}/login.err
         exec {cli} agent run --name eve -- sh -c 'cat >> {handled}; echo >> {handled}' 2> {home}/run.err",
        cli = cli.display(),
        url = server.url,
        home = home.path().display(),
        handled = handled.display(),
    );
    let mut child = tokio::process::Command::new("keyctl")
        .args(["session", "-", "sh", "-c", &script])
        .env("SWITCHBOARD_KEYRING", "keyutils")
        // The kernel's persistent keyring outlives the session and is shared by
        // every test of this user: a profile of its own keeps this test's entries
        // (its token, its signing key) from meeting another's.
        .env("SWITCHBOARD_PROFILE", unique_profile())
        .env("SWITCHBOARD_STATE", home.path().join("agent.db"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env_remove("SWITCHBOARD_SERVER")
        .env_remove("SWITCHBOARD_TOKEN")
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let err_file = home.path().join("login.err");
    let link = wait_for("the CLI's link", || {
        let text = std::fs::read_to_string(&err_file).ok()?;
        let at = text.find("http")?;
        Some(text[at..].split_whitespace().next()?.to_owned())
    })
    .await;

    let browser = Browser::start().await;
    browser.open_logged_in(&server, false).await;
    let path = link
        .strip_prefix(server.url.as_str())
        .expect("this server's link");
    browser.goto(&server, path).await;
    browser
        .click("#devices-table tr.marked button[data-approve]")
        .await;
    browser
        .wait_text("#device-result", "the approval", |t| t.contains("eve"))
        .await;
    // The CLI polls every few seconds of real time; the server judges the
    // interval on its own (manual) clock, so it moves on as the polls come.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&err_file)
        .unwrap_or_default()
        .contains("logged in")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the CLI did not finish its login: {}",
            std::fs::read_to_string(&err_file).unwrap_or_default()
        );
        server.advance(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    let op = server.operator();
    let lines = || {
        std::fs::read_to_string(&handled)
            .map(|t| t.lines().filter(|l| !l.is_empty()).count())
            .unwrap_or(0)
    };
    let send = |n: u32| {
        let op = op.clone();
        async move {
            // The agent exists once the approval made it.
            op.send_message(
                "eve",
                &SendMessage {
                    payload: serde_json::json!({"n": n}),
                    ..Default::default()
                },
                &switchboard_tests::key(),
            )
            .await
            .expect("send to eve")
        }
    };
    send(1).await;
    let run_log = || std::fs::read_to_string(home.path().join("run.err")).unwrap_or_default();
    wait_or(
        "the first event handled",
        || (lines() == 1).then_some(()),
        run_log,
    )
    .await;
    // Past the access token's 15 minutes on the server's clock: the next claim is
    // refused, renewed from the refresh token, and made again.
    server.advance(Duration::from_secs(16 * 60));
    send(2).await;
    wait_or(
        "the second event handled",
        || (lines() == 2).then_some(()),
        run_log,
    )
    .await;
    let snapshot = op.snapshot("eve").await.expect("snapshot");
    assert_eq!(snapshot.counts.completed, 2, "{snapshot:?}");
    let text = std::fs::read_to_string(&handled).unwrap();
    assert!(
        text.contains("\"n\":1") && text.contains("\"n\":2"),
        "{text}"
    );
    let _ = child.start_kill();
    let _ = child.wait().await;
}

/// Waits (30 s at most) until `ok` finds something; returns it.
async fn wait_for<T>(what: &str, ok: impl Fn() -> Option<T>) -> T {
    wait_or(what, ok, String::new).await
}

/// Like [`wait_for`], with `why` in the panic (a log to read).
async fn wait_or<T>(what: &str, ok: impl Fn() -> Option<T>, why: impl Fn() -> String) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(found) = ok() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "waited 30 s for {what}\n{}",
            why()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A profile name no other test (or earlier run) uses.
fn unique_profile() -> String {
    format!("t-{}", uuid::Uuid::now_v7().simple())
}
