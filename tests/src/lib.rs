//! Test fixtures: a real server on `127.0.0.1:0` over a real SQLite file in a temp dir,
//! and clients of the SDK pointed at it. The server stops (gracefully) and its files
//! are deleted when the fixture is dropped.
//!
//! With `SWITCHBOARD_TEST_POSTGRES` or `SWITCHBOARD_TEST_MYSQL` set to an admin
//! URL, every server runs on PostgreSQL or MariaDB / MySQL instead, each on a fresh
//! database of its own ([`database`]): the same tests are the conformance suite of
//! every backend.

use std::path::PathBuf;
use std::time::Duration;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{AgentCreated, CreateAgent};
use switchboard_server::{Config, Hooks, ManualClock, Server, Workers};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod chaos;
mod database;
pub mod exposition;
pub mod faultproxy;
pub mod receiver;
pub use database::{Backend, DatabaseOutage, TestDatabase, backend, mysql_url, postgres_url};
pub use switchboard_sdk as sdk;
pub use switchboard_server as server;

/// How to start a [`TestServer`].
#[derive(Default)]
pub struct Options {
    /// Drive time by hand (and run workers only through [`TestServer::tick`]).
    pub manual_clock: bool,
    pub heartbeat: Option<Duration>,
    pub retention: Option<Duration>,
    pub max_body_bytes: Option<usize>,
    pub hooks: Hooks,
    /// The built console (`ui/dist`) to serve at `/`; `None` serves the "not built" page.
    pub ui_dir: Option<PathBuf>,
    /// How often the overview's history samples (default 5 s).
    pub sample_interval: Option<Duration>,
    /// How often the background passes run on the real clock (default 50 ms).
    pub worker_interval: Option<Duration>,
    /// Webhook settings (a test receiver's CA, loopback allowed, the schedule). On
    /// the manual clock deliveries run only through [`TestServer::deliver`].
    pub webhooks: Option<switchboard_server::config::WebhookConfig>,
    /// Retention archives what it removes here first (`--archive-dir`).
    pub archive_dir: Option<PathBuf>,
    /// Each credential's and each tenant's rate limit; none unless set (on the
    /// manual clock, buckets refill only as the test moves time).
    pub rate_limit: Option<switchboard_server::config::RateLimit>,
    pub tenant_rate_limit: Option<switchboard_server::config::RateLimit>,
    /// Each client address's limit on credential lookups; none unless set.
    pub address_rate_limit: Option<switchboard_server::config::RateLimit>,
    /// Proxies whose `X-Forwarded-For` names the client (`--trusted-proxy`).
    pub trusted_proxies: Vec<String>,
    /// The region the server is in (`--region`).
    pub region: Option<String>,
    /// The `host[:port]` clients address the server by (`--public-url`), which
    /// signed requests are verified against.
    pub public_authority: Option<String>,
    /// How long the access tokens the token endpoint mints live
    /// (`--access-token-ttl`; default 15 min).
    pub access_token_ttl: Option<Duration>,
}

pub struct TestServer {
    pub url: String,
    pub operator_token: String,
    /// Present with `Options::manual_clock`.
    pub clock: Option<ManualClock>,
    /// The SQLite file (unused on the database servers).
    pub db_path: PathBuf,
    /// What the server was opened with: `sqlite://…`, `postgres://…` or `mysql://…`.
    pub database_url: String,
    /// `None` only while an outage holds the server down.
    workers: Option<Workers>,
    deliverer: Option<switchboard_server::workers::deliverer::Deliverer>,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
    database: Option<TestDatabase>,
}

/// `url` with its database path replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{db}{query}", &base[..host_end])
}

impl TestServer {
    pub async fn start() -> Self {
        Self::with(Options::default()).await
    }

    pub async fn with(opts: Options) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let db_path = dir.path().join("switchboard.db");
        let database = TestDatabase::create().await;
        let database_url = database.as_ref().map_or_else(
            || format!("sqlite://{}", db_path.display()),
            |d| d.url.clone(),
        );
        let token_file = dir.path().join("operator-token");
        Self::open(opts, dir, database_url, database, token_file).await
    }

    /// A second server instance on this one's PostgreSQL or MariaDB database, with
    /// the same operator token and a clock of its own (as another host of a team
    /// deployment).
    pub async fn another_instance(&self, opts: Options) -> Self {
        assert!(
            self.backend().shared(),
            "several instances share a database only on PostgreSQL and MariaDB / MySQL"
        );
        let dir = tempfile::tempdir().expect("temp dir");
        let token_file = self._dir.path().join("operator-token");
        Self::open(opts, dir, self.database_url.clone(), None, token_file).await
    }

    /// Like [`another_instance`](Self::another_instance), but in a runtime of its
    /// own on another thread, so that [`Doomed::kill`] can stop it the way `kill -9`
    /// stops a process: every task (requests in flight, the heartbeat, the workers)
    /// is dropped where it stands, nothing is shut down gracefully, and nothing of
    /// it runs again.
    pub async fn another_doomed_instance(&self, opts: Options) -> Doomed {
        assert!(
            self.backend().shared(),
            "several instances share a database only on PostgreSQL and MariaDB / MySQL"
        );
        let database_url = self.database_url.clone();
        let token_file = self._dir.path().join("operator-token");
        tokio::task::spawn_blocking(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a runtime for the doomed instance");
            let dir = tempfile::tempdir().expect("temp dir");
            let server = runtime.block_on(Self::open(opts, dir, database_url, None, token_file));
            Doomed {
                server: Some(server),
                runtime: Some(runtime),
            }
        })
        .await
        .expect("the doomed instance starts")
    }

    async fn open(
        opts: Options,
        dir: tempfile::TempDir,
        database_url: String,
        database: Option<TestDatabase>,
        token_file: PathBuf,
    ) -> Self {
        let db_path = dir.path().join("switchboard.db");
        let mut config = Config {
            database_url: database_url.clone(),
            operator_token_file: Some(token_file),
            hooks: opts.hooks,
            ui_dir: opts.ui_dir,
            // Durability across power loss is not under test here; fsync per commit
            // only slows the suite. The crash test runs the default (FULL).
            sqlite_synchronous: "normal".to_owned(),
            ..Config::default()
        };
        let clock = opts.manual_clock.then(ManualClock::new);
        if let Some(clock) = &clock {
            config.clock = std::sync::Arc::new(clock.clone());
            // Passes run only when the test says so.
            config.worker_interval = Duration::from_secs(3600);
        } else {
            config.worker_interval = opts.worker_interval.unwrap_or(Duration::from_millis(50));
        }
        if let Some(h) = opts.heartbeat {
            config.heartbeat = h;
        }
        config.region = opts.region;
        config.public_authority = opts.public_authority;
        if let Some(ttl) = opts.access_token_ttl {
            config.access_token_ttl = ttl;
        }
        if let Some(r) = opts.retention {
            config.retention = r;
        }
        config.archive_dir = opts.archive_dir;
        if let Some(i) = opts.sample_interval {
            config.sample_interval = i;
        }
        if let Some(b) = opts.max_body_bytes {
            config.max_body_bytes = b;
        }
        // Off unless the test asks: the conformance suite drives single credentials
        // far past any client (100 concurrent lease claims, thousands of sends with
        // one token), and on the manual clock a bucket would never refill. The
        // `serve`-based tests (chaos, schemathesis, packages) run with the defaults.
        let off = switchboard_server::config::RateLimit::OFF;
        config.rate_limit = opts.rate_limit.unwrap_or(off);
        config.tenant_rate_limit = opts.tenant_rate_limit.unwrap_or(off);
        config.address_rate_limit = opts.address_rate_limit.unwrap_or(off);
        config.trusted_proxies = opts
            .trusted_proxies
            .iter()
            .map(|p| p.parse().expect("a CIDR range"))
            .collect();
        if let Some(w) = opts.webhooks {
            config.webhooks = w;
        }
        if clock.is_some() {
            config.webhooks.deliver_in_background = false;
        }
        let server = Server::open(config).await.expect("server opens");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let operator_token = server.operator_token().to_owned();
        let workers = server.workers();
        let deliverer = server.deliverer();
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.serve(listener, async move {
            let _ = rx.await;
        }));
        Self {
            url,
            operator_token,
            clock,
            db_path,
            database_url,
            workers: Some(workers),
            deliverer: Some(deliverer),
            shutdown: Some(tx),
            handle: Some(handle),
            _dir: dir,
            database,
        }
    }

    pub fn operator(&self) -> Client {
        Client::new(&self.url, self.operator_token.as_str()).expect("client")
    }

    /// Creates an agent and returns it with a client holding its token.
    pub async fn agent(&self, name: &str) -> (AgentCreated, Client) {
        let created = self
            .operator()
            .create_agent(&CreateAgent {
                name: name.to_owned(),
            })
            .await
            .expect("create agent");
        let client = Client::new(&self.url, created.token.as_str()).expect("client");
        (created, client)
    }

    /// Creates tenant `name` with the admin's token (the operator token `serve`
    /// wrote) and returns it with a client holding its operator's token.
    pub async fn tenant(&self, name: &str) -> (switchboard_sdk::proto::TenantCreated, Client) {
        let created = self
            .operator()
            .create_tenant(name)
            .await
            .expect("create tenant");
        let client = Client::new(&self.url, created.operator_token.as_str()).expect("client");
        (created, client)
    }

    /// Creates agent `name` with `n` events in its quarantine (sent with
    /// `max_attempts: 1`, claimed under a 1 s lease, then reaped), and returns the
    /// agent's client. On the manual clock it advances time; otherwise it waits out
    /// the lease.
    pub async fn fill_quarantine(&self, name: &str, n: usize) -> Client {
        use futures::StreamExt;
        use switchboard_sdk::proto::{ClaimRequest, SendMessage};
        let (_, agent) = self.agent(name).await;
        let op = self.operator();
        futures::stream::iter(0..n)
            .map(|i| {
                let op = op.clone();
                async move {
                    let message = SendMessage {
                        payload: serde_json::json!({ "n": i }),
                        max_attempts: Some(1),
                        ..Default::default()
                    };
                    op.send_message(name, &message, &key())
                        .await
                        .expect("send succeeds");
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        let claim = ClaimRequest {
            limit: Some(100),
            lease_seconds: Some(1),
            attempt_id: None,
        };
        let mut claimed = 0;
        while claimed < n {
            let got = agent.claim(name, &claim).await.expect("claim").events.len();
            assert!(got > 0, "claimed {claimed} of {n}, then nothing");
            claimed += got;
        }
        match &self.clock {
            Some(_) => self.advance(Duration::from_millis(1_100)),
            None => tokio::time::sleep(Duration::from_millis(1_100)).await,
        }
        let reaped = self.tick().await.reap.quarantined;
        // On the real clock the background workers may have reaped some already, or
        // hold some in a pass of their own (which this pass skipped, `SKIP LOCKED`)
        // that commits a moment later.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let quarantined = loop {
            let quarantined = self
                .operator()
                .overview()
                .await
                .expect("overview")
                .totals
                .quarantined;
            if quarantined as usize >= n || std::time::Instant::now() > deadline {
                break quarantined;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(
            reaped as usize <= n && quarantined as usize >= n,
            "{quarantined} quarantined of {n}"
        );
        agent
    }

    /// The manual clock's now, as a wire timestamp. Times a test sends (an
    /// `available_at`, an expiry) start from here, never from the system clock: the
    /// manual clock stood still while the set-up took its time.
    pub fn now(&self) -> time::OffsetDateTime {
        use switchboard_server::clock::Clock as _;
        let clock = self
            .clock
            .as_ref()
            .expect("now needs Options::manual_clock");
        switchboard_server::clock::to_timestamp(clock.now_ms())
    }

    /// Advances the manual clock.
    pub fn advance(&self, d: Duration) {
        self.clock
            .as_ref()
            .expect("advance needs Options::manual_clock")
            .advance(d.as_millis() as i64);
    }

    /// One pass of the background workers (scavenger, expiry, retention).
    /// One pass of the webhook delivery worker, waiting for its deliveries.
    pub async fn deliver(&self) -> Vec<switchboard_server::workers::deliverer::Delivered> {
        self.deliverer
            .as_ref()
            .expect("the server is up")
            .pass()
            .await
            .expect("webhook pass")
    }

    /// One worker pass; every task of it must succeed.
    pub async fn tick(&self) -> switchboard_server::TickReport {
        let report = self.tick_report().await;
        assert!(
            report.failures.is_empty(),
            "background tasks failed: {:?}",
            report.failures
        );
        report
    }

    /// One worker pass, failures and all.
    pub async fn tick_report(&self) -> switchboard_server::TickReport {
        self.workers.as_ref().expect("server is up").tick().await
    }

    /// One heartbeat of this instance at its clock's now (a shared database only).
    pub async fn beat(&self) {
        self.workers
            .as_ref()
            .expect("server is up")
            .beat_once()
            .await
            .expect("heartbeat");
    }

    /// Stops the server, keeps it down for `downtime`, then starts it again on the
    /// same address and the same database file (same operator token), as after an
    /// outage. Only for servers on the real clock.
    pub async fn outage(&mut self, downtime: Duration) {
        assert!(self.clock.is_none(), "outage needs the real clock");
        self.stop_inner().await;
        // The workers hold the store, and the store holds the file's lock.
        self.workers = None;
        self.deliverer = None;
        tokio::time::sleep(downtime).await;
        let config = Config {
            database_url: self.database_url.clone(),
            operator_token_file: Some(self._dir.path().join("operator-token")),
            sqlite_synchronous: "normal".to_owned(),
            worker_interval: Duration::from_millis(50),
            ..Config::default()
        };
        let server = Server::open(config).await.expect("server reopens");
        let addr = self.url.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .expect("the same address is free again");
        self.workers = Some(server.workers());
        self.deliverer = Some(server.deliverer());
        let (tx, rx) = oneshot::channel::<()>();
        self.handle = Some(tokio::spawn(server.serve(listener, async move {
            let _ = rx.await;
        })));
        self.shutdown = Some(tx);
    }

    /// Stops gracefully and waits for the server to finish.
    pub async fn stop(mut self) {
        self.stop_inner().await;
    }

    async fn stop_inner(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// A server instance that a test kills (see [`TestServer::another_doomed_instance`]).
pub struct Doomed {
    server: Option<TestServer>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Doomed {
    /// The running instance.
    pub fn server(&self) -> &TestServer {
        self.server.as_ref().expect("not killed yet")
    }

    /// Stops the instance at once, as `kill -9` would: its runtime drops every task
    /// where it stands. Its database connections and files are leaked rather than
    /// closed, as a killed process's would be until the kernel cleans up.
    pub fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        if let Some(mut server) = self.server.take() {
            // Nothing of it may run again, not even its graceful shutdown.
            server.shutdown.take();
            std::mem::forget(server);
        }
    }
}

impl Drop for Doomed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The wall clock in Unix ms (what an SDK's outbox stamps its entries with).
pub fn wall_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is after 1970")
            .as_millis(),
    )
    .expect("ms fit in i64")
}

/// A fresh idempotency key.
pub fn key() -> String {
    uuid::Uuid::now_v7().to_string()
}
