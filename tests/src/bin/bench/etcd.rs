//! etcd (Debian's `etcd-server`, 3.4): lease keep-alives at W4 renew's concurrency,
//! against our W4 renew.
//!
//! A single-member etcd is started here on 127.0.0.1 (free ports, a temp data dir,
//! its defaults otherwise), 1,000 leases are granted (TTL 300 s, as W4's), and 16
//! renewers keep them alive round-robin for W4's time, each keep-alive one
//! `POST /v3/lease/keepalive` with `{"ID": …}` to etcd's gRPC gateway, the JSON over
//! HTTP/1.1 API every etcd serves on its client port, answered with the lease's new
//! TTL. Why the gateway and not the `etcd-client` crate over gRPC: our renew is one
//! JSON request over HTTP/1.1 with keep-alive (reqwest, one connection per task),
//! and so is each keep-alive here, through the same client library; a gRPC
//! keep-alive stream would compare a different transport (and the crate would need
//! `protoc` at build time). The gateway does add an in-process gRPC hop inside etcd.
//!
//! Durability differs in etcd's favour: a keep-alive is answered by the leader from
//! memory (it is not written to the raft log or fsynced), while our renew is a
//! committed write with synchronous FULL.

use crate::w1::Rate;
use anyhow::{Context, Result, anyhow, ensure};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::process::{Child, Command};

/// W4's lease count and renewers.
pub(crate) const LEASES: usize = 1_000;
pub(crate) const RENEWERS: usize = 16;

/// An etcd this bench started; killed when dropped.
pub(crate) struct Etcd {
    child: Child,
    url: String,
    pub(crate) version: String,
    _data: tempfile::TempDir,
}

impl Etcd {
    pub(crate) async fn start(bin: &Path, parent: &Path) -> Result<Self> {
        let version = crate::peers::version_output(bin)
            .await?
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("etcd Version:")
            .trim()
            .to_owned();
        let data = crate::server::temp_dir(parent)?;
        let (client, peer) = (crate::peers::free_port()?, crate::peers::free_port()?);
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new(bin)
            .args(["--name", "bench", "--data-dir"])
            .arg(data.path().join("etcd"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let etcd = Self {
            child,
            url: client_url,
            version,
            _data: data,
        };
        crate::peers::wait_for_port(client, Duration::from_secs(15)).await?;
        Ok(etcd)
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    /// Grants `LEASES` leases, then renews them from `RENEWERS` tasks for `measure`
    /// (no warm-up beyond the grants, as W4 has none beyond its acquires).
    pub(crate) async fn keepalives(&self, measure: Duration) -> Result<Rate> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let grant = format!("{}/v3/lease/grant", self.url);
        let mut ids = Vec::with_capacity(LEASES);
        // The gateway may answer 503 for a moment after the port opens.
        for attempt in 0.. {
            match post(&http, &grant, &json!({ "TTL": 300 })).await {
                Ok(first) => {
                    ids.push(lease_id(&first)?);
                    break;
                }
                Err(_) if attempt < 50 => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => return Err(e),
            }
        }
        while ids.len() < LEASES {
            ids.push(lease_id(
                &post(&http, &grant, &json!({ "TTL": 300 })).await?,
            )?);
        }
        let ids = Arc::new(ids);
        let next = Arc::new(AtomicUsize::new(0));
        let url = Arc::new(format!("{}/v3/lease/keepalive", self.url));
        let op = move || {
            let (http, ids, next, url) = (http.clone(), ids.clone(), next.clone(), url.clone());
            async move {
                let id = &ids[next.fetch_add(1, Ordering::Relaxed) % ids.len()];
                let answer = post(&http, &url, &json!({ "ID": id })).await?;
                let ttl = answer["result"]["TTL"].as_str().unwrap_or("0");
                ensure!(ttl != "0", "lease {id} not kept alive: {answer}");
                Ok(())
            }
        };
        crate::w1::drive(RENEWERS, measure, op).await
    }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> Result<Value> {
    let response = http.post(url).json(body).send().await?;
    let status = response.status();
    let text = response.text().await?;
    ensure!(status.is_success(), "{url}: {status}: {text}");
    // A stream's answers are JSON objects one after another; a keep-alive sends one.
    serde_json::from_str(text.trim()).with_context(|| format!("{url} answered {text}"))
}

/// The gateway writes 64-bit integers as strings.
fn lease_id(granted: &Value) -> Result<String> {
    granted["ID"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("no lease ID in {granted}"))
}

/// `etcd`: `SWITCHBOARD_BENCH_ETCD`, else `PATH` (Debian's `etcd-server` puts it
/// in /usr/bin), else /usr/bin/etcd.
pub(crate) fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SWITCHBOARD_BENCH_ETCD").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    crate::peers::on_path("etcd").or_else(|| {
        let debian = PathBuf::from("/usr/bin/etcd");
        debian.is_file().then_some(debian)
    })
}
