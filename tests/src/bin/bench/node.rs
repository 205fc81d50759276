//! The Node peers: pg-boss and graphile-worker, each draining PG-W2's load on a
//! fresh database of the bench's PostgreSQL (see `tests/peers/node/*.js` for what
//! each one's claim and ack are).
//!
//! The scripts run from `tests/peers/node` on the machine's `node` with their
//! pinned packages (`package-lock.json`), which `cargo xtask bench --peers`
//! installs with `npm ci` into `<target>/peers/node` (given to node as
//! `NODE_PATH`). Each gets one JSON argument (database URL, queues, messages per
//! queue, consumers, batch, payload), pre-loads (not timed), drains, and prints one
//! JSON line: `{"peer", "version", "messages", "seconds", "cpu_seconds"}` (CPU of
//! the node process only).

use crate::drain::Drain;
use crate::server::payload;
use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// The longest one script may run.
const TIMEOUT: Duration = Duration::from_secs(900);

/// A Node peer: its script in `tests/peers/node` and its npm package.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodePeer {
    pub(crate) name: &'static str,
    pub(crate) script: &'static str,
    pub(crate) package: &'static str,
}

pub(crate) const PG_BOSS: NodePeer = NodePeer {
    name: "pg-boss",
    script: "pgboss.js",
    package: "pg-boss",
};

pub(crate) const GRAPHILE_WORKER: NodePeer = NodePeer {
    name: "graphile-worker",
    script: "graphile.js",
    package: "graphile-worker",
};

#[derive(Deserialize)]
struct Output {
    messages: u64,
    seconds: f64,
    cpu_seconds: f64,
}

/// Where the scripts and their installed packages are.
pub(crate) struct Node {
    scripts: PathBuf,
    modules: PathBuf,
}

impl Node {
    /// Finds the scripts and the `npm ci` output, and checks that `node` runs.
    pub(crate) async fn find(peers: &Path) -> Result<Self> {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/node");
        let modules = peers.join("node").join("node_modules");
        ensure!(
            modules.is_dir(),
            "{} is missing: run `cargo xtask bench --peers` (it runs npm ci there)",
            modules.display()
        );
        let version = Command::new("node")
            .arg("--version")
            .output()
            .await
            .context("running node (install Node.js 20)")?;
        ensure!(version.status.success(), "node --version failed");
        Ok(Self { scripts, modules })
    }

    /// The installed version of `peer`'s package.
    pub(crate) fn version(&self, peer: NodePeer) -> String {
        let manifest = self.modules.join(peer.package).join("package.json");
        std::fs::read_to_string(manifest)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v["version"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "?".to_owned())
    }

    /// One drain by `peer` on the fresh database `url`.
    pub(crate) async fn drain(
        &self,
        peer: NodePeer,
        url: &str,
        queues: usize,
        per_queue: usize,
        consumers: usize,
        batch: u32,
    ) -> Result<Drain> {
        let arg = serde_json::json!({
            "url": url,
            "queues": queues,
            "per_queue": per_queue,
            "consumers": consumers,
            "batch": batch,
            "payload": payload(0),
        });
        let run = Command::new("node")
            .arg(self.scripts.join(peer.script))
            .arg(arg.to_string())
            .env("NODE_PATH", &self.modules)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(TIMEOUT, run)
            .await
            .with_context(|| format!("{} ran longer than {TIMEOUT:?}", peer.name))?
            .with_context(|| format!("running node {}", peer.script))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            bail!("{} failed ({}): {}", peer.name, out.status, stderr.trim());
        }
        let line = stdout.lines().rev().find(|l| l.starts_with('{'));
        let Some(line) = line else {
            bail!("{} printed no result: {stdout}", peer.name);
        };
        let result: Output =
            serde_json::from_str(line).with_context(|| format!("{} printed {line}", peer.name))?;
        let expected = (queues * per_queue) as u64;
        ensure!(
            result.messages == expected,
            "{} drained {} of {expected}",
            peer.name,
            result.messages
        );
        Ok(Drain {
            messages: result.messages,
            seconds: result.seconds,
            cpu_seconds: result.cpu_seconds,
        })
    }
}
