//! Shared by the tests that run `switchboard serve` as a process: the command line
//! and the ready line it prints first.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

pub(crate) mod outage;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// `switchboard serve` on `127.0.0.1:0` over `database_url`, with its operator
/// token file in `dir` and stdout piped (the ready line). The caller adds flags and
/// says where stderr goes.
pub(crate) fn serve_command(database_url: &str, dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
        ])
        .arg("--operator-token-file")
        .arg(dir.join("operator-token"))
        .stdout(Stdio::piped());
    command
}

/// The SQLite database `switchboard.db` in `dir`.
pub(crate) fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join("switchboard.db").display())
}

/// Reads the ready line, the first line `serve` prints, as JSON.
pub(crate) fn ready_line(child: &mut Child) -> serde_json::Value {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout is piped"))
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("the ready line is JSON");
    assert_eq!(ready["ready"], true, "{line}");
    ready
}

/// A running `serve` process, killed (SIGKILL) when dropped.
pub(crate) struct Serve {
    pub(crate) child: Child,
    pub(crate) url: String,
}

impl Serve {
    /// Spawns `command` and waits for its ready line.
    pub(crate) fn start(command: &mut Command) -> Self {
        let mut child = command.spawn().expect("spawn switchboard serve");
        let ready = ready_line(&mut child);
        let url = ready["url"].as_str().expect("url").to_owned();
        Self { child, url }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `sig` (`-STOP`, `-CONT`, `-TERM`…) to process `pid` with kill(1).
pub(crate) fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// The `agent run` handler: `$WORK` seconds of work, then the payload into a file of
/// its own in `$OUT` named `<agent>.<seq>.<event id>.<nanoseconds>.<pid>`, renamed
/// into place once written (so a run interrupted anywhere never garbles another's).
const HANDLER: &str = r#"sleep "$WORK"; cat > "$OUT/.$$.tmp" && mv "$OUT/.$$.tmp" "$OUT/$SWITCHBOARD_AGENT.$SWITCHBOARD_SEQ.$SWITCHBOARD_EVENT_ID.$(date +%s%N).$$""#;

/// `switchboard agent run` draining `name` through `url` (its local state in
/// `state`, leases of `lease_seconds`), each event handled by [`HANDLER`] after
/// `work` seconds (`"0.2"`) into `out`; read the runs back with [`handler_runs`].
pub(crate) fn agent_run(
    url: &str,
    token: &str,
    name: &str,
    state: &Path,
    out: &Path,
    lease_seconds: u64,
    work: &str,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("agent")
        .arg("--state")
        .arg(state)
        .args(["run", "--name", name, "--lease-seconds"])
        .arg(lease_seconds.to_string())
        .args(["--max-poll-seconds", "1", "--", "sh", "-c", HANDLER])
        .env("SWITCHBOARD_SERVER", url)
        .env("SWITCHBOARD_TOKEN", token)
        .env("SWITCHBOARD_LOG", "warn")
        .env("OUT", out)
        .env("WORK", work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn switchboard agent run")
}

/// One finished run of [`HANDLER`].
pub(crate) struct HandlerRun {
    pub(crate) agent: String,
    pub(crate) seq: u64,
    pub(crate) event_id: String,
    pub(crate) payload: serde_json::Value,
}

/// The finished handler runs in `out`, in the order they started.
pub(crate) fn handler_runs(out: &Path) -> Vec<HandlerRun> {
    let mut runs: Vec<(u128, HandlerRun)> = Vec::new();
    for entry in std::fs::read_dir(out).expect("read the handlers' directory") {
        let path = entry.expect("entry").path();
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if file.starts_with('.') {
            continue; // a run stopped before its rename: not a finished run
        }
        let parts: Vec<&str> = file.split('.').collect();
        let [agent, seq, event_id, at_ns, _pid] = parts[..] else {
            panic!("unexpected file {file}");
        };
        let payload =
            serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("JSON payload");
        runs.push((
            at_ns.parse().expect("time"),
            HandlerRun {
                agent: agent.to_owned(),
                seq: seq.parse().expect("seq"),
                event_id: event_id.to_owned(),
                payload,
            },
        ));
    }
    runs.sort_by_key(|(at, _)| *at);
    runs.into_iter().map(|(_, r)| r).collect()
}
