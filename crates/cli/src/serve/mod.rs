//! `switchboard serve`. Configuration comes from flags, then `SWITCHBOARD_*`
//! environment variables, then an optional TOML file (`--config`), then defaults
//! (`settings.rs`).

mod settings;

pub(crate) use settings::{LogFormat, ServeArgs, Settings, resolve};

use anyhow::Context;
use switchboard_server::Server;

fn init_logs(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

pub(crate) fn run(args: ServeArgs) -> anyhow::Result<()> {
    let settings = resolve(args)?;
    init_logs(settings.log_format);
    switchboard_server::failpoints_from_env();
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(serve(settings))
}

async fn serve(settings: Settings) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let addr = listener.local_addr()?;
    switchboard_server::webhooks::check_listen(&settings.config.webhooks, addr)
        .map_err(anyhow::Error::msg)?;
    match &settings.config.ui_dir {
        Some(dir) => tracing::info!(dir = %dir.display(), "console served from a directory"),
        None if switchboard_server::http::console_embedded() => {
            tracing::info!("console served from this binary")
        }
        None => tracing::warn!(
            "this binary has no console inside (a debug build): `/` explains how to get one"
        ),
    }
    let tls = match &settings.tls {
        Some((cert, key)) => Some(
            switchboard_server::tls::Tls::load(cert, key)
                .map_err(|e| anyhow::anyhow!("TLS: {e}"))?,
        ),
        None => None,
    };
    let server = Server::open(settings.config).await?;
    let url = format!("{}://{addr}", if tls.is_some() { "https" } else { "http" });
    let ready = serde_json::json!({ "ready": true, "url": url, "console_url": format!("{url}/") });
    println!("{ready}");
    // A second line: a one-time console link (single use, two minutes), so the
    // operator can open the console without pasting the token. Never logged.
    match switchboard_server::http::session::login_link(
        server.state(),
        server.operator_token(),
        false,
    )
    .await
    {
        Ok(link) => {
            let line = serde_json::json!({
                "login_url": format!("{url}{}", link.path),
                "login_expires_in_seconds": switchboard_server::http::session::TICKET_TTL.as_secs(),
            });
            // Not println!: a reader that took the ready line and closed the pipe must
            // not bring the server down (println! panics on a broken pipe).
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
        Err(e) => tracing::warn!(detail = ?e.problem.detail, "could not mint a console login link"),
    }
    tracing::info!(%url, "listening");
    match tls {
        Some(tls) => {
            tokio::spawn(reload_on_sighup(tls.clone()));
            let listener = tls.listen(listener).map_err(anyhow::Error::msg)?;
            server.serve(listener, shutdown_signal()).await?;
        }
        None => server.serve(listener, shutdown_signal()).await?,
    }
    Ok(())
}

/// SIGHUP reads the certificate and key again (a renewed certificate); a file that
/// does not load leaves the one in use, and says why.
async fn reload_on_sighup(tls: std::sync::Arc<switchboard_server::tls::Tls>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot watch SIGHUP: the TLS certificate reloads only on restart");
        return;
    };
    while hup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => tracing::info!("TLS certificate reloaded"),
            Err(e) => {
                tracing::error!(error = %e, "TLS certificate not reloaded; the old one stays")
            }
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
