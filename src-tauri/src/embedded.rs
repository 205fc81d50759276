//! The server inside the desktop app: bound to `127.0.0.1:0`, stopped on app exit.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::Context as _;
use switchboard_server::embed::Console;
use tauri::Url;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long shutdown waits for in-flight requests and open streams to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub(crate) struct EmbeddedServer {
    url: Url,
    /// The server's surface for its embedding app: login links, the tray's status.
    console: Console,
    /// Cancelled when the app exits; the serve future then drains and returns.
    shutdown: CancellationToken,
    /// The serve future, awaited on stop so the database is closed before exit.
    serving: JoinHandle<std::io::Result<()>>,
}

impl EmbeddedServer {
    /// Opens the server (database, migrations, workers) and starts serving.
    pub(crate) async fn start(config: switchboard_server::Config) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .context("binding 127.0.0.1:0 for the embedded server")?;
        let addr = listener
            .local_addr()
            .context("reading the server's address")?;
        let server = switchboard_server::Server::open(config)
            .await
            .context("opening the embedded server")?;
        let console = server.console();
        let shutdown = CancellationToken::new();
        let serving = tokio::spawn(server.serve(listener, shutdown.clone().cancelled_owned()));
        let url = Url::parse(&format!("http://{addr}/")).context("building the console URL")?;
        Ok(Self {
            url,
            console,
            shutdown,
            serving,
        })
    }

    /// The console's address, `http://127.0.0.1:PORT/`.
    pub(crate) fn url(&self) -> &Url {
        &self.url
    }

    pub(crate) fn console(&self) -> &Console {
        &self.console
    }

    /// A one-time login link (`/login?ticket=…`, single use, two minutes): the window
    /// opens it, the server sets the session cookie and redirects to the console.
    pub(crate) async fn login_url(&self) -> anyhow::Result<Url> {
        let path = self.console.login_path().await.map_err(|e| {
            anyhow::anyhow!(
                "minting a console login link: {}",
                e.problem.detail.clone().unwrap_or_default()
            )
        })?;
        self.url
            .join(&path)
            .context("building the login link's URL")
    }

    /// Signals shutdown and waits (bounded) for the server to finish.
    pub(crate) async fn stop(self) {
        self.shutdown.cancel();
        match tokio::time::timeout(SHUTDOWN_GRACE, self.serving).await {
            Ok(Ok(Ok(()))) => tracing::info!("embedded server stopped"),
            Ok(Ok(Err(error))) => tracing::error!(%error, "embedded server failed"),
            Ok(Err(error)) => tracing::error!(%error, "embedded server task panicked"),
            Err(_) => tracing::warn!(
                "embedded server still busy after {}s; exiting anyway",
                SHUTDOWN_GRACE.as_secs()
            ),
        }
    }
}
