//! The console page in a real browser: it renders what the server reports, client-side
//! routes get the console too, its files carry the types browsers insist on, and a
//! screenshot is left for a human to look at.

use switchboard_proto::Capabilities;

use crate::driver::Browser;
use crate::support::{
    bounded, console_and_browser, console_dir, console_server, server_line, target_dir,
};

/// What the console puts in `<title>` and `<h1>`.
const TITLE: &str = "Switchboard console";

/// The capabilities the server reports, fetched over plain HTTP.
async fn capabilities(base: &str) -> Capabilities {
    let response = bounded(
        "GET /api/v1/capabilities",
        reqwest::get(format!("{base}/api/v1/capabilities")),
    )
    .await;
    bounded("reading the capabilities", response.json()).await
}

#[tokio::test]
async fn console_renders_the_server_line() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let caps = capabilities(&server.url).await;
    assert_eq!(
        caps.server_version,
        env!("CARGO_PKG_VERSION"),
        "the workspace shares one version"
    );
    assert_eq!(caps.backend, "sqlite");

    let browser = Browser::start().await;
    browser.open_console(&format!("{}/", server.url)).await;

    let title = bounded("reading the title", browser.client.title()).await;
    assert_eq!(title, TITLE);
    assert_eq!(browser.text("h1").await, TITLE);
    let line = browser.text("#server-info").await;
    assert_eq!(
        line,
        server_line("sqlite"),
        "the console shows the version and backend the server reports"
    );
    let class = browser.attr("#server-info", "class").await;
    assert!(
        !class.unwrap_or_default().contains("error"),
        "the capabilities request succeeded, so the line is not an error"
    );
}

#[tokio::test]
async fn client_side_routes_serve_the_console() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let index = std::fs::read_to_string(ui.join("index.html")).expect("read index.html");
    let server = console_server(ui).await;
    let url = format!("{}/agents/anything", server.url);

    // Over plain HTTP: the route answers with the console's index.html.
    let response = bounded(&format!("GET {url}"), reqwest::get(&url)).await;
    assert_eq!(
        response.status(),
        200,
        "client-side routes fall back to index.html"
    );
    let body = bounded("reading the body", response.text()).await;
    assert_eq!(body, index);

    // In the browser: the console loads its script and wasm from there and renders.
    let browser = Browser::start().await;
    browser.open_console(&url).await;
    let line = browser.text("#server-info").await;
    assert!(
        line.contains(env!("CARGO_PKG_VERSION")) && line.contains("sqlite"),
        "the console rendered under a nested route, got {line:?}"
    );
    let current = bounded("reading the URL", browser.client.current_url()).await;
    assert_eq!(current.path(), "/agents/anything", "no redirect to /");
}

#[tokio::test]
async fn wasm_and_script_are_served_with_their_types() {
    let Some(ui) = console_dir() else {
        return;
    };
    let server = console_server(ui).await;
    // Browsers refuse `WebAssembly.instantiateStreaming` without `application/wasm`,
    // and module scripts without a JavaScript type.
    for (file, expected) in [
        ("switchboard_ui_bg.wasm", "application/wasm"),
        ("switchboard_ui.js", "text/javascript"),
    ] {
        let url = format!("{}/{file}", server.url);
        let response = bounded(&format!("GET {url}"), reqwest::get(&url)).await;
        assert_eq!(response.status(), 200, "{file} is served");
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            content_type.starts_with(expected),
            "{file} is served as {content_type:?}, expected {expected}"
        );
        let body = bounded("reading the body", response.bytes()).await;
        if file.ends_with(".wasm") {
            assert!(body.starts_with(b"\0asm"), "{file} is a wasm module");
        }
    }
}

#[tokio::test]
async fn screenshot_of_the_rendered_console() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    let browser = Browser::start().await;
    browser.open_console(&format!("{}/", server.url)).await;

    let png = bounded("taking a screenshot", browser.client.screenshot()).await;
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "WebDriver screenshots are PNG"
    );
    let path = target_dir().join("browser-console.png");
    std::fs::write(&path, &png)
        .unwrap_or_else(|e| panic!("could not write {}: {e}", path.display()));
    // Past libtest's capture: the path is for the human running the tests.
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!("browser screenshot: {}\n", path.display()).as_bytes(),
    );
}

/// The overview's "Queue table (PostgreSQL)" tiles: there on PostgreSQL, with the
/// numbers the server reports and no advice for a healthy table; absent on SQLite.
/// `cargo xtask test` runs this one on both backends.
#[tokio::test]
async fn overview_queue_table_tiles_follow_the_backend() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let server = console_server(ui).await;
    server.agent("alice").await;
    let browser = Browser::start().await;
    browser.open_logged_in(&server, true).await;
    browser.find("#overview-tiles").await;
    if switchboard_tests::backend() != "postgres" {
        assert!(
            !browser.exists("#queue-table-tiles").await,
            "SQLite has no queue table health"
        );
        return;
    }
    browser.find("#queue-table-tiles").await;
    for id in ["dead-tuples", "live-tuples"] {
        let value = browser.text(&format!("#tile-{id} .tile-value")).await;
        assert!(value.parse::<u64>().is_ok(), "{id} is a count: {value:?}");
    }
    let vacuum = browser.text("#tile-vacuum-age .tile-value").await;
    assert!(
        vacuum == "never" || vacuum.ends_with(" ago"),
        "the last vacuum is an age or never: {vacuum:?}"
    );
    let oldest = browser.text("#tile-oldest-transaction .tile-value").await;
    assert!(oldest.ends_with('s'), "an age in seconds: {oldest:?}");
    assert!(
        !browser.exists("#queue-table-advice").await,
        "a fresh table needs no advice"
    );
    browser.screenshot("browser-queue-table.png").await;
}

/// The overview says when retention is held back by an archive that cannot be
/// written, with the archive's reason, and stops saying it once the archive is fixed.
#[tokio::test]
async fn overview_shows_retention_held_back_by_its_archive() {
    let Some(ui) = console_and_browser() else {
        return;
    };
    let archive = tempfile::tempdir().expect("archive dir");
    let retention = std::time::Duration::from_secs(60);
    let server = switchboard_tests::TestServer::with(switchboard_tests::Options {
        ui_dir: Some(ui),
        manual_clock: true,
        retention: Some(retention),
        archive_dir: Some(archive.path().to_owned()),
        ..Default::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let message = switchboard_proto::SendMessage {
        payload: serde_json::json!({ "n": 1 }),
        ..Default::default()
    };
    alice
        .send_message("alice", &message, "held-back-1")
        .await
        .expect("send");
    let claimed = alice
        .claim(
            "alice",
            &switchboard_proto::ClaimRequest {
                limit: Some(1),
                lease_seconds: Some(60),
                attempt_id: None,
            },
        )
        .await
        .expect("claim");
    let c = &claimed.events[0];
    alice
        .ack("alice", c.event.event_id, c.claim_token)
        .await
        .expect("ack");
    // A file where the archive's directory was: every write fails.
    std::fs::remove_dir(archive.path()).expect("empty archive");
    std::fs::write(archive.path(), b"").expect("blocker");
    server.advance(retention * 2);
    assert!(server.tick().await.retention.held_back.is_some());

    let browser = Browser::start().await;
    let path = browser.open_logged_in(&server, true).await;
    let notice = browser
        .wait_text("#retention-held-back", "the held-back notice", |t| {
            t.starts_with("Retention is held back")
        })
        .await;
    assert!(
        notice.contains(&archive.path().display().to_string()),
        "the notice names the archive: {notice:?}"
    );
    browser.screenshot("browser-retention-held-back.png").await;

    std::fs::remove_file(archive.path()).expect("unblock");
    std::fs::create_dir(archive.path()).expect("archive dir");
    assert_eq!(server.tick().await.retention.archived, 1);
    browser.open_console(&format!("{}/", server.url)).await;
    browser
        .wait_text("#retention-archive", "the archive line", |t| {
            t.contains("1 event archived")
        })
        .await;
    assert!(
        !browser.exists("#retention-held-back").await,
        "no notice once the archive takes writes ({path})"
    );
}
