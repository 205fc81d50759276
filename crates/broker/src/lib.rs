//! The local token broker's host side (issue 40), shared by `switchboard agent
//! broker` and the desktop app: it holds the host's logins (a device login's
//! refresh token stays in the keyring; or a static token) and, over a Unix socket
//! in a private directory, gives the sidecars its policy allows short-lived,
//! narrower access tokens made by token exchange (RFC 8693) of the host's own
//! token, bound to the key each sidecar presents. The sidecars' side is the SDK's
//! `switchboard_sdk::broker`.
//!
//! - `socket.rs`: the private directory (0700, this user's) and the socket (0600);
//! - `peer.rs`: the peer's uid and pid (`SO_PEERCRED`) and executable (via a pidfd);
//! - `policy.rs`: the policy file: agent → profile, executables, scope cap;
//! - `service.rs`: the protocol (HTTP/1.1 + JSON, `switchboard_sdk::broker`) and
//!   the decisions;
//! - [`host`]: a connected host client from a keyring profile (also what the CLI's
//!   other commands use).
//!
//! [`Broker::start`] loads the policy, logs in each profile it names (through the
//! caller's [`Connect`]), binds the socket and serves it on the current tokio
//! runtime until the returned [`Running`] is stopped or dropped, which removes the
//! socket.
//!
//! Limits: request bodies of at most 16 KiB (`broker::MAX_BODY_BYTES`), a request
//! head within 10 s, at most [`MAX_CONNECTIONS`] connections served at once (more
//! wait to be accepted).

pub mod host;
#[cfg(unix)]
mod peer;
#[cfg(unix)]
mod policy;
#[cfg(unix)]
mod service;
#[cfg(unix)]
mod socket;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use switchboard_sdk::Client;

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The variable naming the policy file (the CLI's `--policy`, the desktop app's
/// `--broker-policy`).
pub const POLICY_VAR: &str = "SWITCHBOARD_BROKER_POLICY";
/// The variable naming the socket (the CLI's `--socket`, the desktop app's
/// `--broker-socket`).
pub const SOCKET_VAR: &str = "SWITCHBOARD_BROKER_SOCKET";

/// A connected host client for a login profile (the policy's `profile`s): what
/// [`host::connect`] makes, with the caller's settings (CA file, lock files).
pub type Connect = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = anyhow::Result<Client>> + Send>> + Send + Sync,
>;

/// `$XDG_CONFIG_HOME/switchboard/broker.toml` (else `~/.config/switchboard/…`):
/// the policy read when none is named.
pub fn default_policy() -> PathBuf {
    host::config_dir().join("broker.toml")
}

/// The socket listened on when none is named: `$XDG_RUNTIME_DIR/switchboard/broker.sock`,
/// else `/tmp/switchboard-<uid>/broker.sock` (the SDK's client looks there too).
pub fn default_socket() -> PathBuf {
    switchboard_sdk::broker::default_socket()
}

/// What a broker serves.
pub struct Options {
    /// The socket to listen on. Its directory is made 0700; one that exists must be
    /// this user's and closed to others.
    pub socket: PathBuf,
    /// The policy file (TOML): `[[allow]]` entries with `agent`, `executables`
    /// (absolute paths), and optionally `profile` and `scopes` (a cap).
    pub policy: PathBuf,
    /// The profile of an entry that names none.
    pub default_profile: String,
    /// Logs in a profile the policy names.
    pub connect: Connect,
}

/// The local token broker.
pub struct Broker;

impl Broker {
    /// Loads the policy, logs in each of its profiles, binds the socket and serves it
    /// on the current tokio runtime. Errors say what to fix (a bad policy, a login
    /// that cannot be used, a socket another broker listens on, a directory open to
    /// other users).
    #[cfg(unix)]
    pub async fn start(options: Options) -> anyhow::Result<Running> {
        use anyhow::Context as _;
        let uid = rustix::process::getuid().as_raw();
        let loaded = load(&options).await?;
        let agents: Vec<String> = loaded
            .policy
            .entries
            .iter()
            .map(|e| e.agent.clone())
            .collect();
        let socket = options.socket.clone();
        socket::prepare(&socket, uid)?;
        let listener = tokio::net::UnixListener::bind(&socket)
            .with_context(|| format!("cannot listen on {}", socket.display()))?;
        socket::restrict(&socket)?;
        let shared = Arc::new(service::Shared::new(uid, options.policy.clone(), loaded));
        tracing::info!(
            socket = %socket.display(),
            policy = %options.policy.display(),
            agents = agents.join(" "),
            "token broker listening"
        );
        let accepting = tokio::spawn(accept(listener, shared.clone()));
        Ok(Running {
            options,
            agents,
            shared,
            accepting,
        })
    }

    /// The broker checks its peers on Linux (and, partly, macOS) only.
    #[cfg(not(unix))]
    pub async fn start(_options: Options) -> anyhow::Result<Running> {
        anyhow::bail!(
            "the token broker needs Unix sockets and is not built for this platform \
             (docs/broker.md describes the named-pipe design for Windows)"
        )
    }
}

/// A broker listening. Stopping it ([`Running::stop`], or dropping it) stops
/// accepting and removes the socket; connections being served finish on their own.
pub struct Running {
    options: Options,
    agents: Vec<String>,
    #[cfg(unix)]
    shared: Arc<service::Shared>,
    #[cfg(unix)]
    accepting: tokio::task::JoinHandle<()>,
}

impl Running {
    /// The socket it listens on.
    pub fn socket(&self) -> &Path {
        &self.options.socket
    }

    /// The policy file it serves.
    pub fn policy(&self) -> &Path {
        &self.options.policy
    }

    /// The agents of its policy (as loaded at start).
    pub fn agents(&self) -> &[String] {
        &self.agents
    }

    /// Reads the policy again and logs in its profiles; on an error the previous
    /// policy stays in force.
    #[cfg(unix)]
    pub async fn reload(&self) -> anyhow::Result<()> {
        let loaded = load(&self.options).await?;
        self.shared.replace(loaded);
        tracing::info!(policy = %self.options.policy.display(), "policy reloaded");
        Ok(())
    }

    /// Stops accepting and removes the socket.
    pub fn stop(self) {}
}

impl Drop for Running {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            self.accepting.abort();
            let _ = std::fs::remove_file(&self.options.socket);
            tracing::info!(socket = %self.options.socket.display(), "token broker stopped");
        }
    }
}

/// Accepts connections until aborted.
#[cfg(unix)]
async fn accept(listener: tokio::net::UnixListener, shared: Arc<service::Shared>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                // The peer is read at once (its pid must still be its own); a
                // connection past the limit waits for a slot before it is served.
                let peer = peer::inspect(&stream);
                let (shared, slots) = (shared.clone(), slots.clone());
                tokio::spawn(async move {
                    let Ok(_slot) = slots.acquire_owned().await else {
                        return;
                    };
                    service::serve_connection(shared, stream, peer).await;
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads the policy and logs in each of its profiles.
#[cfg(unix)]
async fn load(options: &Options) -> anyhow::Result<service::Loaded> {
    use anyhow::Context as _;
    let policy = policy::Policy::load(&options.policy, &options.default_profile)?;
    let mut hosts = std::collections::HashMap::new();
    for profile in policy.profiles() {
        let client = (options.connect)(profile.clone()).await.with_context(|| {
            format!(
                "the policy {} uses profile {profile:?}, whose login cannot be used",
                options.policy.display()
            )
        })?;
        hosts.insert(
            profile.clone(),
            Arc::new(service::Host::new(profile, client)),
        );
    }
    Ok(service::Loaded { policy, hosts })
}
