//! `switchboard agent records MEMORY` against a real `switchboard serve`: every
//! record of the memory, one JSON object per line in key order, across several
//! pages, without a lease (another agent of the tenant reads it); an unknown memory
//! fails with the server's reason.

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use switchboard_sdk::proto::{AcquireLease, CreateAgent, MemoryId, RegisterMemory};
use switchboard_sdk::{Client, Precondition};

/// `switchboard agent records ARGS` logged in by environment as `token` at `url`.
fn records(home: &Path, url: &str, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["agent", "records"])
        .args(args)
        .env("SWITCHBOARD_STATE", home.join("agent.db"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("SWITCHBOARD_SERVER", url)
        .env("SWITCHBOARD_TOKEN", token)
        .stdin(Stdio::null())
        .output()
        .expect("run agent records")
}

#[test]
fn agent_records_prints_every_record_page_by_page_without_a_lease() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server =
        Serve::start(serve_command(&sqlite_url(dir.path()), dir.path()).stderr(Stdio::null()));
    let operator = std::fs::read_to_string(dir.path().join("operator-token"))
        .expect("operator token")
        .trim()
        .to_owned();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (memory, reader) = rt.block_on(async {
        let op = Client::new(&server.url, operator.as_str()).unwrap();
        let mut tokens = Vec::new();
        for name in ["writer", "reader"] {
            let created = op
                .create_agent(&CreateAgent { name: name.into() })
                .await
                .expect("agent");
            tokens.push(created.token);
        }
        let writer = Client::new(&server.url, tokens[0].as_str()).unwrap();
        let m = writer
            .register_memory(&RegisterMemory::default())
            .await
            .unwrap()
            .memory_instance_id;
        let ask: AcquireLease = serde_json::from_value(
            json!({"name": "writer-lease", "memory_instance_id": m, "ttl_seconds": 30}),
        )
        .unwrap();
        let lease = writer.acquire_lease(&ask, "records-cli-1").await.unwrap().0;
        for n in (0..7).rev() {
            let key = format!("note-{n}");
            writer
                .put_record(
                    m,
                    &key,
                    &json!({"n": n}),
                    lease.fencing_token,
                    Precondition::None,
                )
                .await
                .unwrap();
        }
        (m, tokens.pop().expect("reader"))
    });

    let home = tempfile::tempdir().expect("home");
    let memory = memory.to_string();
    let out = records(
        home.path(),
        &server.url,
        &reader,
        &[&memory, "--page-size", "3"],
    );
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let listed: Vec<(String, serde_json::Value)> = lines
        .iter()
        .map(|r| (r["key"].as_str().unwrap().to_owned(), r["value"].clone()))
        .collect();
    let expected: Vec<(String, serde_json::Value)> = (0..7)
        .map(|n| (format!("note-{n}"), json!({"n": n})))
        .collect();
    assert_eq!(
        listed, expected,
        "every record once, in key order, over 3 pages"
    );

    let nowhere = MemoryId::new().to_string();
    let out = records(home.path(), &server.url, &reader, &[&nowhere]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&nowhere) && err.contains("not"), "{err}");
}
