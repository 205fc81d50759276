//! An older client against a newer server: the agent CLI (and the SDK's
//! `check_server`) read `/api/v1/capabilities` first. A newer minor version, with
//! fields this client has never heard of, is fine; another major version is refused
//! with a message that says what to do.
//!
//! The newer server is a stand-in at the HTTP boundary: the real server's
//! capabilities, changed as a future server would answer them.

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::process::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serves `body` as JSON to every request on 127.0.0.1; its base URL.
async fn stand_in(body: serde_json::Value) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = body.to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = vec![0; 8192];
                let _ = tcp.read(&mut request).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tcp.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

/// What this version's server answers.
async fn capabilities_today() -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let server = Serve::start(&mut serve_command(&sqlite_url(dir.path()), dir.path()));
    reqwest::get(format!("{}/api/v1/capabilities", server.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

// Two workers: the stand-in answers while this thread waits for the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_minor_version_is_read_and_a_newer_major_one_refused() {
    let today = capabilities_today().await;
    assert_eq!(today["api_version"], "v1");

    // v1.7: more fields, at the top and inside the limits.
    let mut minor = today.clone();
    minor["api_version"] = "v1.7".into();
    minor["regions"] = serde_json::json!(["eu", "us"]);
    minor["limits"]["max_rooms_per_agent"] = 42.into();
    let url = stand_in(minor).await;
    let client = switchboard_sdk::Client::new(&url, "sb_agent_x").unwrap();
    let caps = client
        .check_server()
        .await
        .expect("a newer minor version is fine");
    assert_eq!(caps.api_version, "v1.7");

    // v2: refused, before any other request, by the SDK and the CLI alike.
    let mut major = today;
    major["api_version"] = "v2".into();
    let url = stand_in(major).await;
    let client = switchboard_sdk::Client::new(&url, "sb_agent_x").unwrap();
    let error = client.check_server().await.unwrap_err();
    assert_eq!(error.kind(), "incompatible");

    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["agent", "callback", "list", "--name", "worker"])
        .env("SWITCHBOARD_SERVER", &url)
        .env("SWITCHBOARD_TOKEN", "sb_agent_x")
        .env("SWITCHBOARD_STATE", dir.path().join("agent.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("the server speaks API v2, this client API v1"),
        "{said}"
    );
}
