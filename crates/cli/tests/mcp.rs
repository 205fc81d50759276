//! `switchboard mcp` driven by MCP clients we did not write, against a real server
//! (in process, on `127.0.0.1:0`, over a real SQLite file): the official Python SDK
//! (PyPI `mcp`, `tests/peers/mcp/scenarios.py`) on both protocol eras (the 2025
//! `initialize` + `resources/subscribe`, and 2026-07-28 `server/discover` +
//! `subscriptions/listen`), and the official TypeScript SDK (npm
//! `@modelcontextprotocol/sdk`, `tests/peers/mcp/handoff.mjs`) on its latest 2025
//! revision.
//!
//! The hand-offs run with `--no-poll`: the sessions never poll, so only the SSE
//! wake-up stream can bring the inbox notifications they wait for.
//!
//! `SWITCHBOARD_TEST_MCP_PY` names the directory the Python SDK is installed in
//! (`pip install --target`), `SWITCHBOARD_TEST_MCP_NODE` the one holding the
//! TypeScript SDK's `node_modules`; `cargo xtask test` installs both (pinned, see
//! `xtask/src/prereqs.rs`) and sets them. Unset, a test says so and passes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use switchboard_tests::TestServer;
use switchboard_tests::faultproxy::{Fault, FaultProxy, Mix};

/// Where the peers' scripts are.
fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/mcp")
}

fn installed(var: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os(var)?);
    if dir.is_dir() {
        Some(dir)
    } else {
        panic!("{var} is {} but that is not a directory", dir.display());
    }
}

fn python() -> Option<PathBuf> {
    let dir = installed("SWITCHBOARD_TEST_MCP_PY");
    if dir.is_none() {
        eprintln!(
            "SWITCHBOARD_TEST_MCP_PY is not set: the Python MCP client did not run \
             (cargo xtask test installs it and sets it)"
        );
    }
    dir
}

/// A server with agents alice and bob, and the environment the scripts read.
struct World {
    server: TestServer,
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
}

async fn world() -> World {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut env = vec![
        (
            "SB_BIN".to_owned(),
            env!("CARGO_BIN_EXE_switchboard").to_owned(),
        ),
        ("SB_URL".to_owned(), server.url.clone()),
        (
            "SB_CONFIG".to_owned(),
            dir.path().join("config").display().to_string(),
        ),
    ];
    for name in ["alice", "bob"] {
        let (created, _) = server.agent(name).await;
        let upper = name.to_uppercase();
        env.push((format!("SB_{upper}_TOKEN"), created.token.to_string()));
        env.push((
            format!("SB_{upper}_STATE"),
            dir.path().join(format!("{name}.db")).display().to_string(),
        ));
    }
    World { server, dir, env }
}

/// Runs `program args` with the world's environment (plus `extra`); panics with
/// its output unless it exits 0 within `limit`. Returns its stdout.
async fn run(
    world: &World,
    program: &str,
    args: &[&str],
    extra: &[(&str, &str)],
    limit: Duration,
) -> String {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(extra.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{program} {args:?} took longer than {limit:?}"))
        .expect("wait for the client");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(
        output.status.success(),
        "{program} {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    eprintln!("{stdout}");
    stdout
}

/// `scenarios.py SCENARIO` on protocol era `mode` (`legacy` or `2026-07-28`).
async fn scenario(
    world: &World,
    py: &Path,
    name: &str,
    mode: &str,
    extra: &[(&str, &str)],
) -> String {
    let script = peers().join("scenarios.py");
    let mut env = vec![
        ("PYTHONPATH", py.to_str().expect("UTF-8 path")),
        ("SB_MODE", mode),
    ];
    env.extend_from_slice(extra);
    run(
        world,
        "python3",
        &[script.to_str().expect("UTF-8 path"), name],
        &env,
        Duration::from_secs(90),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_the_tools_with_valid_schemas_on_both_eras() {
    let Some(py) = python() else { return };
    let world = world().await;
    for mode in ["legacy", "2026-07-28"] {
        let out = scenario(&world, &py, "schemas", mode, &[]).await;
        assert!(out.contains("ok: 13 tools"), "{out}");
    }
}

/// Whether the console saw `agent` online (an open SSE subscription) within 30 s.
async fn seen_online(server: &TestServer, agent: &str) -> bool {
    let operator = server.operator();
    for _ in 0..300 {
        let agents = operator.agents().await.expect("list the agents");
        if agents.iter().any(|a| a.name == agent && a.subscribers > 0) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Also what operators see: while the sessions run the console lists bob online,
/// and each session's client report names it as `switchboard mcp` over stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_agents_hand_work_over_on_2025_with_sse_only() {
    let Some(py) = python() else { return };
    let world = world().await;
    let (out, online) = tokio::join!(
        scenario(
            &world,
            &py,
            "handoff",
            "legacy",
            &[("SB_ARGS", "--no-poll")],
        ),
        seen_online(&world.server, "bob"),
    );
    assert!(out.contains("ok: handoff on legacy"), "{out}");
    assert!(
        online,
        "bob's MCP session never showed online in the console"
    );
    let reports = world
        .server
        .operator()
        .client_reports()
        .await
        .expect("client reports");
    for agent in ["alice", "bob"] {
        let report = reports
            .iter()
            .find(|r| r.name == agent)
            .unwrap_or_else(|| panic!("no client report from {agent}: {reports:?}"));
        assert!(
            report.report.sdk.starts_with("switchboard-mcp/")
                && report.report.sdk.contains("MCP over stdio"),
            "{agent}'s report does not name its transport: {}",
            report.report.sdk
        );
        // A session that ended cleanly leaves no watch cursor behind.
        let state = world.dir.path().join(format!("{agent}.db"));
        let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", state.display()))
            .await
            .expect("open the state file");
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM cursors WHERE name LIKE 'mcp-watch:%'")
                .fetch_one(&db)
                .await
                .expect("count the cursors");
        assert_eq!(left, 0, "{agent}'s watch cursor outlived its session");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_agents_hand_work_over_on_2026_07_28_with_sse_only() {
    let Some(py) = python() else { return };
    let world = world().await;
    let out = scenario(
        &world,
        &py,
        "handoff",
        "2026-07-28",
        &[("SB_ARGS", "--no-poll")],
    )
    .await;
    assert!(out.contains("ok: handoff on 2026-07-28"), "{out}");
}

/// The same `--no-poll` hand-off fails when the SSE stream is off too: nothing else
/// could bring the notification, so the hand-off tests above do show the SSE path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sse_or_polling_no_notification_comes() {
    let Some(py) = python() else { return };
    let world = world().await;
    let script = peers().join("scenarios.py");
    let output = tokio::process::Command::new("python3")
        .args([script.to_str().expect("UTF-8 path"), "handoff"])
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("PYTHONPATH", &py)
        .env("SB_MODE", "legacy")
        .env("SB_ARGS", "--no-sse --no-poll")
        .env("SB_TIMEOUT", "3")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("no inbox notification came"),
        "expected the hand-off to miss its notification without SSE: {stderr}"
    );
}

/// Two sessions of one profile (two editor windows sharing its state file) are
/// both notified, on SSE alone; one claims, the other cannot ack that claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_two_sessions_of_one_profile_are_both_told() {
    let Some(py) = python() else { return };
    let world = world().await;
    let out = scenario(
        &world,
        &py,
        "two_windows",
        "legacy",
        &[("SB_ARGS", "--no-poll")],
    )
    .await;
    assert!(out.contains("ok: two windows"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_bad_arguments_and_refusals_are_tool_errors() {
    let Some(py) = python() else { return };
    let world = world().await;
    let out = scenario(&world, &py, "errors", "legacy", &[]).await;
    assert!(out.contains("ok: 12 refusals"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_stale_claim_is_refused_and_leases_are_fenced() {
    let Some(py) = python() else { return };
    let world = world().await;
    let out = scenario(&world, &py, "stale", "2026-07-28", &[]).await;
    assert!(out.contains("ok: stale claim refused"), "{out}");
}

/// alice's session queues a message while every connection to the server is
/// swallowed (the entry is queued or mid-send: the script says which), and is killed
/// with SIGKILL before the outbox could deliver it; a new session of the profile
/// delivers it, and bob gets it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_a_killed_session_loses_no_send() {
    let Some(py) = python() else { return };
    let mut world = world().await;
    let addr = world
        .server
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let proxy = FaultProxy::start(addr).await.expect("fault proxy");
    proxy.set_mix(Mix::only(Fault::Blackhole));
    let cut_off = proxy.http_url();
    let out = scenario(
        &world,
        &py,
        "crash_send",
        "legacy",
        &[("SB_ALICE_URL", cut_off.as_str())],
    )
    .await;
    assert!(out.contains("killed"), "{out}");
    proxy.heal();
    world.env.retain(|(k, _)| k != "SB_ALICE_URL");
    let out = scenario(&world, &py, "resume", "legacy", &[]).await;
    assert!(out.contains("ok: resumed"), "{out}");
    drop(world.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_client_lists_tools_and_hands_work_over_with_sse_only() {
    let Some(node) = installed("SWITCHBOARD_TEST_MCP_NODE") else {
        eprintln!(
            "SWITCHBOARD_TEST_MCP_NODE is not set: the TypeScript MCP client did not run \
             (cargo xtask test installs it and sets it)"
        );
        return;
    };
    let world = world().await;
    // ES modules resolve packages from the script's own directory.
    let script = node.join("handoff.mjs");
    std::fs::copy(peers().join("handoff.mjs"), &script).expect("copy the script");
    let out = run(
        &world,
        "node",
        &[script.to_str().expect("UTF-8 path")],
        &[("SB_ARGS", "--no-poll")],
        Duration::from_secs(90),
    )
    .await;
    assert!(out.contains("ok: typescript SDK"), "{out}");
}
