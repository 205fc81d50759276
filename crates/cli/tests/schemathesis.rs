//! Bad input (issue 17): schemathesis, pinned from PyPI, fuzzes `switchboard serve`
//! against its own `/api/v1/openapi.json`, once with the operator token and once with
//! an agent's. A finding fails the test: a 5xx, a response that breaks the document
//! (schema, content type, status code), or an error that is not an RFC 9457 problem
//! document with a `code` (checked here over every exchange schemathesis recorded).
//!
//! `SWITCHBOARD_TEST_SCHEMATHESIS` names the directory schemathesis is installed in
//! (`python3 -m pip install --target`; `cargo xtask test` installs it into
//! `target/schemathesis` and sets it). Unset, the test says so and passes.
//!
//! CI size: the main endpoints (the agent's inbox, messages, rooms, the operator's
//! agents and events), a few examples each, no stateful phase. Full size
//! (`SWITCHBOARD_CHAOS=full`, `cargo xtask chaos`): every endpoint, more examples,
//! and the stateful phase over the links schemathesis infers.
//!
//! Left out on purpose: registering a webhook callback (the server would challenge
//! the generated URL, a host on the internet: this suite sends traffic to loopback
//! only), and revoking the fuzzed agent's tokens (the agent's run would meet only
//! 401s).

mod common;

use common::{Serve, serve_command, sqlite_url};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{CreateAgent, CreateRoom, RegisterMemory, SendMessage};
use switchboard_tests::chaos::{ChaosRow, Scale};

/// The pinned version; `xtask/src/prereqs.rs` installs the same one.
const VERSION: &str = "4.32.5";

/// What every run checks.
const CHECKS: &str = "not_a_server_error,response_schema_conformance,\
                      content_type_conformance,status_code_conformance";

/// The agent and the room every run works on (schemathesis fills each `{agent}`,
/// `{room}` and `{memory_id}` with them and a memory, so requests reach something).
const AGENT: &str = "fuzz-bot";
const ROOM: &str = "fuzz-room";

/// The main endpoints: the CI run covers these.
const MAIN_PATHS: &str = "^/api/v1/(agents/\\{agent\\}/(inbox|messages|snapshot|client-settings)|rooms|ops/(agents|events|overview|client-settings))";

fn installed() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("SWITCHBOARD_TEST_SCHEMATHESIS")?);
    // The CLI's path is accepted too: its packages are two levels up (`<dir>/bin/st`).
    let dir = if dir.is_file() {
        dir.parent()?.parent()?.to_path_buf()
    } else {
        dir
    };
    Some(dir)
}

struct Run {
    /// Test cases schemathesis reported, and the requests it recorded.
    cases: u64,
    requests: u64,
    server_5xx: u64,
    /// What went wrong, one line each; empty when clean.
    findings: Vec<String>,
    report: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_5xx_no_schema_break_and_only_problem_documents() {
    let Some(st_dir) = installed() else {
        eprintln!(
            "SWITCHBOARD_TEST_SCHEMATHESIS is not set: schemathesis did not run \
             (cargo xtask test installs schemathesis=={VERSION} and sets it)"
        );
        return;
    };
    let scale = Scale::current();
    let dir = tempfile::tempdir().expect("temp dir");
    let log = std::fs::File::create(dir.path().join("serve.log")).expect("log file");
    let server = Serve::start(
        serve_command(&sqlite_url(dir.path()), dir.path())
            .args(["--heartbeat-seconds", "0.2"])
            .stderr(Stdio::from(log)),
    );
    let operator = std::fs::read_to_string(dir.path().join("operator-token"))
        .expect("operator token")
        .trim()
        .to_owned();
    let op = Client::new(&server.url, operator.as_str()).expect("client");
    let agent = op
        .create_agent(&CreateAgent { name: AGENT.into() })
        .await
        .expect("create the agent");
    // Something in its inbox, so reads, claims and acks have events to work on.
    for n in 0..5 {
        let msg = SendMessage {
            payload: serde_json::json!({ "n": n }),
            ..Default::default()
        };
        op.send_message(AGENT, &msg, &format!("seed-{n}"))
            .await
            .expect("send");
    }

    op.create_room(&CreateRoom { name: ROOM.into() })
        .await
        .expect("create the room");
    op.add_member(ROOM, AGENT).await.expect("join the room");
    let memory = op
        .register_memory(&RegisterMemory {
            memory_instance_id: None,
            label: Some("fuzzed".into()),
        })
        .await
        .expect("register a memory");
    let target = Target {
        st_dir,
        url: server.url.clone(),
        tmp: dir.path().to_path_buf(),
        config: format!(
            "[parameters]\n\"path.agent\" = \"{AGENT}\"\n\"path.room\" = \"{ROOM}\"\n\
             \"path.memory_id\" = \"{}\"\n",
            memory.memory_instance_id
        ),
    };

    let mut failed = Vec::new();
    for (who, token) in [
        ("operator", operator.as_str()),
        ("agent", agent.token.as_str()),
    ] {
        let started = Instant::now();
        let run = schemathesis(&target, token, who, scale);
        let seconds = started.elapsed().as_secs();
        println!("{}", run.report);
        let mut row = ChaosRow::new(&format!("schemathesis-{who}"), "sqlite");
        row.sent = run.requests;
        row.server_5xx = run.server_5xx;
        row.note = format!(
            "{} cases, {seconds} s, {} scale; checks {CHECKS}, problem documents; findings: {}",
            run.cases,
            scale.pick("ci", "full"),
            if run.findings.is_empty() {
                "none".to_owned()
            } else {
                run.findings.len().to_string()
            }
        );
        row.record();
        failed.extend(run.findings.into_iter().map(|f| format!("{who}: {f}")));
    }

    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    if log.contains("panicked") {
        failed.push(format!("the server panicked:\n{log}"));
    }
    assert!(
        failed.is_empty(),
        "schemathesis found {} problem(s):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// What every run goes against.
struct Target {
    /// Where schemathesis is installed (a `PYTHONPATH`).
    st_dir: PathBuf,
    /// The server.
    url: String,
    /// Where the configuration and the reports go.
    tmp: PathBuf,
    /// `schemathesis.toml`: the values of the path parameters.
    config: String,
}

/// Runs schemathesis with `token`; reads its HAR recording for what the server
/// answered.
fn schemathesis(target: &Target, token: &str, who: &str, scale: Scale) -> Run {
    let Target {
        st_dir,
        url,
        tmp,
        config: config_toml,
    } = target;
    let reports = tmp.join(format!("report-{who}"));
    let config = tmp.join(format!("schemathesis-{who}.toml"));
    std::fs::write(&config, config_toml).expect("write the config");
    let har = reports.join("run.har");
    let mut command = Command::new("python3");
    command
        .env("PYTHONPATH", st_dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(tmp)
        .args(["-m", "schemathesis.cli", "--config-file"])
        .arg(&config)
        .args(["run", &format!("{url}/api/v1/openapi.json")])
        .args(["--checks", CHECKS])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--seed", "17", "--workers", "1", "--no-color"])
        .args(["--generation-database", "none"])
        .args(["--request-timeout", "10"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .arg("--report-dir")
        .arg(&reports)
        // Registering a callback would challenge a generated URL: see the top.
        .args(["--exclude-operation-id", "register_callback"])
        // Revoking the agent the runs share would leave the agent's run nothing but
        // 401s (its token is the fuzzed agent's); revocation has its own tests.
        .args(["--exclude-operation-id", "revoke_agent"]);
    match scale {
        Scale::Ci => {
            command
                .args(["--include-path-regex", MAIN_PATHS])
                .args(["--max-examples", "10"])
                .args(["--phases", "examples,coverage,fuzzing,stateful"]);
        }
        Scale::Full => {
            command
                .args(["--max-examples", "100"])
                .args(["--phases", "examples,coverage,fuzzing,stateful"]);
        }
    }
    let output = command.output().expect("run python3 -m schemathesis.cli");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!(
        "== schemathesis ({who}, {}):\n{stdout}{stderr}",
        output.status
    );

    let mut findings = Vec::new();
    if !output.status.success() {
        findings.push(format!("schemathesis exited with {}", output.status));
    }
    let (requests, server_5xx) = match std::fs::read(&har) {
        Ok(bytes) => {
            let har: Value = serde_json::from_slice(&bytes).expect("the HAR file is JSON");
            exchanges(&har, &mut findings)
        }
        Err(e) => {
            findings.push(format!("no HAR recording at {}: {e}", har.display()));
            (0, 0)
        }
    };
    Run {
        cases: cases(&stdout),
        requests,
        server_5xx,
        findings,
        report,
    }
}

/// Counts the exchanges and the 5xx among them, and adds a finding for each error
/// that is not a problem document with a `code`.
fn exchanges(har: &Value, findings: &mut Vec<String>) -> (u64, u64) {
    let entries = har["log"]["entries"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut server_5xx = 0;
    for e in &entries {
        let status = e["response"]["status"].as_u64().unwrap_or(0);
        let what = format!(
            "{} {} -> {status}",
            e["request"]["method"].as_str().unwrap_or("?"),
            e["request"]["url"].as_str().unwrap_or("?")
        );
        if status >= 500 {
            server_5xx += 1;
        }
        if status < 400 {
            continue;
        }
        let content = &e["response"]["content"];
        let mime = content["mimeType"].as_str().unwrap_or("");
        let body: Option<Value> = content["text"]
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok());
        let code = body.as_ref().and_then(|b| b["code"].as_str());
        if !mime.starts_with("application/problem+json") || code.is_none() {
            findings.push(format!(
                "{what}: not a problem document with a code ({mime:?}: {})",
                content["text"].as_str().unwrap_or("")
            ));
        }
    }
    (entries.len() as u64, server_5xx)
}

/// The number of test cases in schemathesis's summary: `Test cases:`, then
/// `N generated, …` on the next line.
fn cases(stdout: &str) -> u64 {
    let mut lines = stdout.lines().skip_while(|l| l.trim() != "Test cases:");
    lines
        .nth(1)
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
