//! `switchboard agent broker`: the local token broker (issue 40) in the
//! foreground. The broker itself is the `switchboard-broker` crate, which the
//! desktop app hosts too; this command names its socket and policy, logs in the
//! policy's profiles as every other `agent` command does (`Common`), prints a
//! ready line, reloads the policy on SIGHUP and stops (removing the socket) on
//! SIGINT or SIGTERM.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use switchboard_broker::{Broker, Options};

use super::Common;

#[derive(Args, Debug)]
pub(crate) struct BrokerArgs {
    /// The socket to listen on [default: $XDG_RUNTIME_DIR/switchboard/broker.sock,
    /// else /tmp/switchboard-<uid>/broker.sock]. Its directory is made 0700; one
    /// that exists must be this user's and closed to others.
    #[arg(long, env = switchboard_broker::SOCKET_VAR)]
    socket: Option<PathBuf>,
    /// The policy file (TOML) [default: $XDG_CONFIG_HOME/switchboard/broker.toml]:
    /// `[[allow]]` entries with `agent`, `executables` (absolute paths), and
    /// optionally `profile` (the login holding that agent; default --profile) and
    /// `scopes` (a cap; `{agent_id}` stands for the login's agent id). Read at
    /// start and again on SIGHUP.
    #[arg(long, env = switchboard_broker::POLICY_VAR)]
    policy: Option<PathBuf>,
}

pub(crate) async fn run(common: &Common, args: BrokerArgs) -> anyhow::Result<u8> {
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    anyhow::bail!(
        "the token broker checks its peers on Linux (and, partly, macOS) only; it is not \
         supported on this system (docs/broker.md)"
    );
    init_logs();
    let of_profile = common.clone();
    let options = Options {
        socket: args
            .socket
            .unwrap_or_else(switchboard_broker::default_socket),
        policy: args
            .policy
            .unwrap_or_else(switchboard_broker::default_policy),
        default_profile: common.profile.clone(),
        connect: Arc::new(move |profile| {
            let mut common = of_profile.clone();
            common.profile = profile;
            Box::pin(async move { common.connected_client().await })
        }),
    };
    let broker = Broker::start(options).await?;
    // One line for whoever started it (tests, supervisors): where it listens.
    let ready = serde_json::json!({
        "ready": true,
        "socket": broker.socket(),
        "agents": broker.agents(),
    });
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "{ready}");
    let _ = stdout.flush();

    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot watch SIGHUP")?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => if let Err(e) = broker.reload().await {
                tracing::error!(
                    error = format!("{e:#}"),
                    "the policy was not reloaded; the previous one stays in force"
                );
            },
        }
    }
    broker.stop();
    Ok(0)
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
