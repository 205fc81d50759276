//! `switchboard agent broker`: the local token broker (issue 40). It holds the
//! host's logins (a device login's refresh token stays in the keyring; or a static
//! token) and, over a Unix socket in a private directory, gives the sidecars its
//! policy allows short-lived, narrower access tokens made by token exchange
//! (RFC 8693) of the host's own token, bound to the key each sidecar presents.
//!
//! - `socket.rs`: the private directory (0700, this user's) and the socket (0600);
//! - `peer.rs`: the peer's uid and pid (`SO_PEERCRED`) and executable (via a pidfd);
//! - `policy.rs`: the policy file: agent → profile, executables, scope cap;
//! - `service.rs`: the protocol (HTTP/1.1 + JSON, `switchboard_sdk::broker`) and
//!   the decisions.
//!
//! Limits: request bodies of at most 16 KiB (`broker::MAX_BODY_BYTES`), a request
//! head within 10 s, at most [`MAX_CONNECTIONS`] connections served at once (more
//! wait to be accepted).

mod peer;
mod policy;
mod service;
mod socket;

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use super::Common;
use policy::Policy;
use service::{Broker, Host, Loaded};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 64;

#[derive(Args, Debug)]
pub(crate) struct BrokerArgs {
    /// The socket to listen on [default: $XDG_RUNTIME_DIR/switchboard/broker.sock,
    /// else /tmp/switchboard-<uid>/broker.sock]. Its directory is made 0700; one
    /// that exists must be this user's and closed to others.
    #[arg(long, env = "SWITCHBOARD_BROKER_SOCKET")]
    socket: Option<PathBuf>,
    /// The policy file (TOML) [default: $XDG_CONFIG_HOME/switchboard/broker.toml]:
    /// `[[allow]]` entries with `agent`, `executables` (absolute paths), and
    /// optionally `profile` (the login holding that agent; default --profile) and
    /// `scopes` (a cap; `{agent_id}` stands for the login's agent id). Read at
    /// start and again on SIGHUP.
    #[arg(long, env = "SWITCHBOARD_BROKER_POLICY")]
    policy: Option<PathBuf>,
}

pub(crate) async fn run(common: &Common, args: BrokerArgs) -> anyhow::Result<u8> {
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    anyhow::bail!(
        "the token broker checks its peers on Linux (and, partly, macOS) only; it is not \
         supported on this system (docs/broker.md)"
    );
    init_logs();
    let uid = rustix::process::getuid().as_raw();
    let policy_path = args
        .policy
        .unwrap_or_else(|| super::config_dir().join("broker.toml"));
    let socket = args
        .socket
        .unwrap_or_else(switchboard_sdk::broker::default_socket);
    let loaded = load(common, &policy_path).await?;
    let agents: Vec<String> = loaded
        .policy
        .entries
        .iter()
        .map(|e| e.agent.clone())
        .collect();
    socket::prepare(&socket, uid)?;
    let listener = tokio::net::UnixListener::bind(&socket)
        .with_context(|| format!("cannot listen on {}", socket.display()))?;
    socket::restrict(&socket)?;
    let broker = Arc::new(Broker::new(uid, policy_path.clone(), loaded));
    tracing::info!(
        socket = %socket.display(),
        policy = %policy_path.display(),
        agents = agents.join(" "),
        "token broker listening"
    );
    // One line for whoever started it (tests, supervisors): where it listens.
    let ready = serde_json::json!({"ready": true, "socket": socket, "agents": agents});
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{ready}");
    let _ = stdout.flush();

    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot watch SIGHUP")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    let result = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break Ok(0),
            _ = terminate.recv() => break Ok(0),
            _ = hangup.recv() => match load(common, &policy_path).await {
                Ok(loaded) => {
                    broker.replace(loaded);
                    tracing::info!(policy = %policy_path.display(), "policy reloaded");
                }
                Err(e) => tracing::error!(
                    error = format!("{e:#}"),
                    "the policy was not reloaded; the previous one stays in force"
                ),
            },
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // The peer is read at once (its pid must still be its own); a
                    // connection past the limit waits for a slot before it is served.
                    let peer = peer::inspect(&stream);
                    let (broker, slots) = (broker.clone(), slots.clone());
                    tokio::spawn(async move {
                        let Ok(_slot) = slots.acquire_owned().await else { return };
                        service::serve_connection(broker, stream, peer).await;
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    };
    let _ = std::fs::remove_file(&socket);
    tracing::info!("token broker stopped");
    result
}

/// Reads the policy and logs in each of its profiles.
async fn load(common: &Common, policy_path: &std::path::Path) -> anyhow::Result<Loaded> {
    let policy = Policy::load(policy_path, &common.profile)?;
    let mut hosts = HashMap::new();
    for profile in policy.profiles() {
        let mut of_profile = common.clone();
        of_profile.profile.clone_from(&profile);
        let client = of_profile.connected_client().await.with_context(|| {
            format!(
                "the policy {} uses profile {profile:?}, whose login cannot be used",
                policy_path.display()
            )
        })?;
        hosts.insert(profile.clone(), Arc::new(Host::new(profile, client)));
    }
    Ok(Loaded { policy, hosts })
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    // Colours only for a person at a terminal; a log file or journal gets text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
