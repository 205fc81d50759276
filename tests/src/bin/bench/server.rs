//! The server under measurement: `Config::default()` (WAL, synchronous FULL, workers
//! every second, no test hooks) on a fresh SQLite file (or a PostgreSQL database,
//! see [`crate::pg`]), served on `127.0.0.1:0` in
//! this process. Unlike the debug test fixture it keeps the production worker
//! interval and writes no token file. Stopped gracefully by [`BenchServer::stop`];
//! its temp dir goes with it.

use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{AgentCreated, AgentId, CreateAgent, TenantId};
use switchboard_server::config::RateLimit;
use switchboard_server::store::{Actor, NewMessage, Store};
use switchboard_server::{Clock, Config, Server, SystemClock};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The database file's name inside a server's temp dir.
pub(crate) const DB_FILE: &str = "switchboard.db";

pub(crate) struct BenchServer {
    pub(crate) url: String,
    pub(crate) operator: Client,
    /// Resolving it starts the graceful shutdown.
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
    _dir: Option<tempfile::TempDir>,
}

impl BenchServer {
    /// Serves the database `DB_FILE` in `dir`: a fresh one, or one the caller put
    /// there. The server owns `dir` from now on and deletes it when dropped.
    pub(crate) async fn start(dir: tempfile::TempDir) -> Result<Self> {
        let url = format!("sqlite://{}", dir.path().join(DB_FILE).display());
        Self::open(url, Some(dir)).await
    }

    /// Serves `database_url` (any backend the server takes); `dir`, if any, is kept
    /// until the server is dropped.
    pub(crate) async fn open(database_url: String, dir: Option<tempfile::TempDir>) -> Result<Self> {
        let config = Config {
            database_url,
            operator_token_file: None,
            ..Config::default()
        };
        Self::serve(config, dir).await
    }

    /// [`start`](Self::start) with SQLite's group commit off: every write transaction
    /// commits alone, as before issue 16 (W1 shows what grouping gains).
    pub(crate) async fn start_ungrouped(dir: tempfile::TempDir) -> Result<Self> {
        let config = Config {
            database_url: format!("sqlite://{}", dir.path().join(DB_FILE).display()),
            operator_token_file: None,
            sqlite_group_commit: false,
            ..Config::default()
        };
        Self::serve(config, Some(dir)).await
    }

    /// [`start`](Self::start) with `limit` as every credential's and every tenant's
    /// token bucket (the other workloads run without).
    pub(crate) async fn start_limited(dir: tempfile::TempDir, limit: RateLimit) -> Result<Self> {
        let config = Config {
            database_url: format!("sqlite://{}", dir.path().join(DB_FILE).display()),
            operator_token_file: None,
            rate_limit: limit,
            tenant_rate_limit: limit,
            ..Config::default()
        };
        Self::listen(config, Some(dir)).await
    }

    /// [`start`](Self::start) with these webhook settings.
    pub(crate) async fn open_with(
        dir: tempfile::TempDir,
        webhooks: switchboard_server::config::WebhookConfig,
    ) -> Result<Self> {
        let config = Config {
            database_url: format!("sqlite://{}", dir.path().join(DB_FILE).display()),
            operator_token_file: None,
            webhooks,
            ..Config::default()
        };
        Self::serve(config, Some(dir)).await
    }

    async fn serve(mut config: Config, dir: Option<tempfile::TempDir>) -> Result<Self> {
        // The workloads drive one credential past a deployment's default limit
        // (1,000/s): they measure the queue, not the rate limiter (AUTH measures it).
        config.rate_limit = RateLimit::OFF;
        config.tenant_rate_limit = RateLimit::OFF;
        Self::listen(config, dir).await
    }

    async fn listen(config: Config, dir: Option<tempfile::TempDir>) -> Result<Self> {
        let server = Server::open(config).await.context("opening the server")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let operator = Client::new(&url, server.operator_token())?;
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.serve(listener, async move {
            let _ = rx.await;
        }));
        Ok(Self {
            url,
            operator,
            shutdown: Some(tx),
            handle: Some(handle),
            _dir: dir,
        })
    }

    /// Creates an agent over HTTP; returns it with a client holding its token.
    pub(crate) async fn agent(&self, name: &str) -> Result<(AgentCreated, Client)> {
        let created = self
            .operator
            .create_agent(&CreateAgent {
                name: name.to_owned(),
            })
            .await
            .with_context(|| format!("creating agent {name}"))?;
        let client = Client::new(&self.url, created.token.as_str())?;
        Ok((created, client))
    }

    /// Graceful shutdown; waits (at most 30 s) until the database is closed.
    pub(crate) async fn stop(mut self) -> Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(handle) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(30), handle)
                .await
                .context("the server did not stop within 30 s")???;
        }
        Ok(())
    }
}

impl Drop for BenchServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub(crate) fn temp_dir(parent: &Path) -> Result<tempfile::TempDir> {
    std::fs::create_dir_all(parent)?;
    tempfile::Builder::new()
        .prefix("switchboard-bench-")
        .tempdir_in(parent)
        .with_context(|| format!("creating a temp dir in {}", parent.display()))
}

pub(crate) fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// The JSON payload of every benchmark message: about 100 bytes.
pub(crate) fn payload(i: usize) -> serde_json::Value {
    serde_json::json!({
        "kind": "task",
        "task_id": i,
        "title": "summarize the incident report",
        "detail": "bench payload, about a hundred bytes",
    })
}

/// Writes `n` pending events into `agent`'s inbox through the store (one transaction
/// each, as a direct send without an idempotency key), from the operator.
pub(crate) async fn preload(
    store: &dyn Store,
    tenant: TenantId,
    agent: AgentId,
    n: usize,
) -> Result<()> {
    for i in 0..n {
        let now = now_ms();
        let msg = NewMessage {
            payload: payload(i).to_string(),
            correlation_id: None,
            priority: 0,
            available_at: now,
            expires_at: None,
            max_attempts: 5,
        };
        store
            .send_direct(tenant, agent, &Actor::Operator, &msg, None, now)
            .await
            .context("pre-loading an event")?;
    }
    Ok(())
}
