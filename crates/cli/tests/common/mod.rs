//! Shared by the tests that run `switchboard serve` as a process: the command line
//! and the ready line it prints first.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

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
