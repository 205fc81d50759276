//! The local token broker inside the desktop app (issue 40): the same broker as
//! `switchboard agent broker` (the `switchboard-broker` crate), started when a
//! policy exists at its default path (`$XDG_CONFIG_HOME/switchboard/broker.toml`)
//! or is named (`--broker-policy`, `SWITCHBOARD_BROKER_POLICY`), on the default
//! socket unless one is named (`--broker-socket`, `SWITCHBOARD_BROKER_SOCKET`).
//!
//! Its host logins are the keyring profiles the policy names (or
//! `SWITCHBOARD_SERVER` + `SWITCHBOARD_TOKEN`), exactly as in the CLI, whatever
//! console the window shows (embedded or remote). A broker that cannot start (a bad
//! policy, a socket another broker listens on, a directory open to others) does not
//! stop the app: it is logged and the tray's line says why. It stops, removing its
//! socket, when the app quits ([`stop`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use switchboard_broker::{Broker, Options, Running, host};
use tauri::{AppHandle, Manager, Runtime};

/// Where the broker would listen and what it serves.
#[derive(Debug, Clone)]
pub struct Config {
    pub policy: PathBuf,
    pub socket: PathBuf,
    /// The policy was named (flag or variable), not found at the default path.
    named: bool,
}

impl Config {
    /// The broker's settings from the flags (`None`: not given), else the
    /// variables, else the defaults; `Err` with the reason it stays off when no
    /// policy is named and none exists at the default path.
    pub fn resolve(policy: Option<PathBuf>, socket: Option<PathBuf>) -> Result<Self, String> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let socket = socket
            .or_else(|| var(switchboard_broker::SOCKET_VAR))
            .unwrap_or_else(switchboard_broker::default_socket);
        if let Some(policy) = policy.or_else(|| var(switchboard_broker::POLICY_VAR)) {
            return Ok(Self {
                policy,
                socket,
                named: true,
            });
        }
        let policy = switchboard_broker::default_policy();
        if policy.is_file() {
            Ok(Self {
                policy,
                socket,
                named: false,
            })
        } else {
            Err(format!("no policy at {}", policy.display()))
        }
    }
}

/// The broker as the app holds it: the tray's line, and the running broker.
pub(crate) struct Hosted {
    status: Mutex<String>,
    running: Mutex<Option<Running>>,
    /// Set when the app quits: a broker that finishes starting after it is stopped.
    closed: AtomicBool,
}

impl Hosted {
    fn new(status: String) -> Self {
        Self {
            status: Mutex::new(status),
            running: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// The tray's line: `Token broker: listening on …` or `Token broker: off (…)`.
    pub(crate) fn status(&self) -> String {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Manages the broker's state on `app` and, when `config` says so, starts it in the
/// background; the tray's line follows ([`crate::tray::set_broker_line`]).
pub(crate) fn manage<R: Runtime>(app: &AppHandle<R>, config: Result<Config, String>) {
    let config = match config {
        Ok(config) => config,
        Err(why) => {
            tracing::info!("token broker off: {why}");
            app.manage(Arc::new(Hosted::new(format!("Token broker: off ({why})"))));
            return;
        }
    };
    let hosted = Arc::new(Hosted::new("Token broker: starting…".to_owned()));
    app.manage(hosted.clone());
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let line = match Broker::start(options(&config)).await {
            Ok(running) => {
                let line = format!("Token broker: listening on {}", running.socket().display());
                tracing::info!(
                    socket = %running.socket().display(),
                    policy = %running.policy().display(),
                    named = config.named,
                    "token broker started"
                );
                let mut slot = hosted.running.lock().unwrap_or_else(|e| e.into_inner());
                if hosted.closed.load(Ordering::SeqCst) {
                    drop(running); // the app quit meanwhile: remove the socket
                } else {
                    *slot = Some(running);
                }
                line
            }
            Err(error) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    policy = %config.policy.display(),
                    "the token broker did not start; the app runs without it"
                );
                format!("Token broker: off ({})", short(&format!("{error:#}")))
            }
        };
        *hosted.status.lock().unwrap_or_else(|e| e.into_inner()) = line.clone();
        crate::tray::set_broker_line(&app, &line);
    });
}

/// Stops the broker (its socket removed) when the app quits.
pub(crate) fn stop<R: Runtime>(app: &AppHandle<R>) {
    if let Some(hosted) = app.try_state::<Arc<Hosted>>() {
        hosted.closed.store(true, Ordering::SeqCst);
        let running = hosted
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        drop(running);
    }
}

/// The options of the CLI's broker, with the desktop's host logins: each profile
/// through `host::connect`, trusting `SWITCHBOARD_CA_FILE` as the CLI does, its
/// device login refreshed under the same lock file as the CLI's commands.
fn options(config: &Config) -> Options {
    let profile = std::env::var("SWITCHBOARD_PROFILE")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let ca_file = std::env::var_os("SWITCHBOARD_CA_FILE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    Options {
        socket: config.socket.clone(),
        policy: config.policy.clone(),
        default_profile: profile,
        connect: Arc::new(move |profile| {
            let ca_file = ca_file.clone();
            Box::pin(async move {
                let lock = host::default_lock(&switchboard_server::Config::data_dir(), &profile);
                host::connect(&profile, host::client_builder(ca_file.as_deref())?, lock).await
            })
        }),
    }
}

/// The first line of an error, at most 120 characters, for a menu line.
fn short(error: &str) -> String {
    let line = error.lines().next().unwrap_or_default();
    if line.chars().count() <= 120 {
        return line.to_owned();
    }
    let cut: String = line.chars().take(119).collect();
    format!("{cut}…")
}
