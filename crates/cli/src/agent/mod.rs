//! `switchboard agent …`: an agent's side from the shell. Login keeps the token in
//! the OS keyring; `run` consumes the inbox through a command; `send` goes through
//! the durable outbox; `tail` follows the inbox read-only; `status` reads the local
//! state; `check` runs the privacy gate on a payload without sending anything;
//! `callback` registers, lists and removes the agent's webhook callback; `records`
//! prints a memory's records (the baseline to resync from); `key` registers, rotates
//! and shows the key the profile's requests are signed with; `broker` gives local
//! sidecars short-lived, narrower tokens over a Unix socket.
//!
//! Local state (outbox, cursors, dedup) lives in one SQLite file per profile:
//! `$XDG_DATA_HOME/switchboard/agents/<profile>.db` unless `--state` says otherwise.
//! The privacy gate's schemas come from `--schemas`, else
//! `$XDG_CONFIG_HOME/switchboard/schemas.json`, else the built-in `message` type.

#[cfg(unix)]
mod broker;
mod callback;
mod commands;
mod key;
mod records;
mod run;

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use switchboard_broker::host;
use switchboard_sdk::privacy::{DEFAULT_SCHEMAS, Gate};
use switchboard_sdk::{Client, LocalDb};

#[derive(Args, Debug)]
pub(crate) struct AgentArgs {
    #[command(subcommand)]
    command: AgentCommand,
}

/// Options every subcommand takes.
#[derive(Args, Debug, Clone)]
pub(crate) struct Common {
    /// The login profile (several servers or agents on one machine).
    #[arg(
        long,
        env = "SWITCHBOARD_PROFILE",
        default_value = "default",
        global = true
    )]
    profile: String,
    /// The local state file [default: $XDG_DATA_HOME/switchboard/agents/<profile>.db].
    #[arg(long, env = "SWITCHBOARD_STATE", global = true)]
    state: Option<PathBuf>,
    /// Privacy-gate schemas (JSON) [default: $XDG_CONFIG_HOME/switchboard/schemas.json,
    /// else the built-in `message` type].
    #[arg(long, env = "SWITCHBOARD_SCHEMAS", global = true)]
    schemas: Option<PathBuf>,
    /// PEM file of CA certificates to trust besides the system's: a server whose
    /// certificate a private CA signed.
    #[arg(long, env = "SWITCHBOARD_CA_FILE", global = true)]
    ca_file: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum AgentCommand {
    /// Store the server URL and the agent token (in the OS keyring).
    Login(commands::LoginArgs),
    /// Remove the stored login (keyring entry and profile).
    Logout,
    /// Consume the inbox: each event goes to CMD on stdin. Exit 0 acks, 75
    /// (EX_TEMPFAIL) releases it for later, anything else counts a failure (the
    /// third quarantines it).
    Run(run::RunArgs),
    /// Send a message through the durable outbox.
    Send(commands::SendArgs),
    /// Follow the inbox read-only, one JSON event per line.
    Tail(commands::TailArgs),
    /// Outbox counts, poison entries, cursors and the consumer's connection mode.
    Status(commands::StatusArgs),
    /// Run the privacy gate on a payload locally; nothing is sent. Exits 1 when it
    /// would be refused.
    Check(commands::CheckArgs),
    /// The agent's webhook callback: add (register an HTTPS endpoint, challenged
    /// first), list, remove, and secret (make a new `whsec_` secret).
    Callback(callback::CallbackArgs),
    /// Every record of a memory, one JSON object per line in key order, read page by
    /// page; no lease needed (the baseline state to resync from).
    Records(records::RecordsArgs),
    /// The key requests are signed with (RFC 9421, Ed25519): register one for a
    /// static token, rotate it, show it.
    Key(key::KeyArgs),
    /// The local token broker: gives the sidecars a policy file allows (checked by
    /// uid and executable) short-lived, narrower access tokens over a Unix socket,
    /// made by token exchange of this host's login, which never leaves it.
    #[cfg(unix)]
    Broker(broker::BrokerArgs),
    /// The local token broker needs Unix sockets (docs/broker.md has the design for
    /// Windows named pipes).
    #[cfg(not(unix))]
    Broker,
}

#[derive(Args, Debug)]
pub(crate) struct AgentCli {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    args: AgentArgs,
}

/// Runs a subcommand; the exit code on success.
pub(crate) fn run(cli: AgentCli) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let common = cli.common;
    runtime.block_on(async move {
        match cli.args.command {
            AgentCommand::Login(args) => commands::login(&common, args).await,
            AgentCommand::Logout => commands::logout(&common).await,
            AgentCommand::Run(args) => run::run(&common, args).await,
            AgentCommand::Send(args) => commands::send(&common, args).await,
            AgentCommand::Tail(args) => commands::tail(&common, args).await,
            AgentCommand::Status(args) => commands::status(&common, args).await,
            AgentCommand::Check(args) => commands::check(&common, args),
            AgentCommand::Callback(args) => callback::run(&common, args).await,
            AgentCommand::Records(args) => records::run(&common, args).await,
            AgentCommand::Key(args) => key::run(&common, args).await,
            #[cfg(unix)]
            AgentCommand::Broker(args) => broker::run(&common, args).await,
            #[cfg(not(unix))]
            AgentCommand::Broker => anyhow::bail!(
                "the token broker needs Unix sockets and is not built for this platform \
                 (docs/broker.md describes the named-pipe design for Windows)"
            ),
        }
    })
}

impl Common {
    /// A client for the login, after checking that the server speaks this client's API
    /// (`switchboard_broker::host::connect`): another major version is refused with
    /// what to do; a server that does not answer is let pass (the commands retry,
    /// and the outbox keeps what is sent until it is reachable). A device login's
    /// refresh token rotates under a lock beside the profile's local state.
    pub(crate) async fn connected_client(&self) -> anyhow::Result<Client> {
        host::connect(
            &self.profile,
            self.builder()?,
            self.state_path().with_extension("login-lock"),
        )
        .await
    }

    /// A client for `server` with `token`, trusting `--ca-file` too.
    fn client_for(&self, server: &str, token: switchboard_sdk::Token) -> anyhow::Result<Client> {
        self.builder()?
            .build(server, token)
            .with_context(|| format!("cannot use the server URL {server}"))
    }

    /// A client for `server` with no credential (the open endpoints, OAuth).
    fn anonymous_client(&self, server: &str) -> anyhow::Result<Client> {
        self.client_for(server, switchboard_sdk::Token::from(ANONYMOUS))
    }

    /// The client settings every command shares: `--ca-file`.
    fn builder(&self) -> anyhow::Result<switchboard_sdk::ClientBuilder> {
        crate::client_builder(self.ca_file.as_deref())
    }

    fn state_path(&self) -> PathBuf {
        self.state.clone().unwrap_or_else(|| {
            switchboard_server::Config::data_dir()
                .join("agents")
                .join(format!("{}.db", self.profile))
        })
    }

    pub(crate) async fn db(&self) -> anyhow::Result<LocalDb> {
        Ok(LocalDb::open(self.state_path()).await?)
    }

    /// The privacy gate with the configured schemas.
    pub(crate) fn gate(&self) -> anyhow::Result<Gate> {
        let (text, from) = self.schemas()?;
        Gate::new()
            .load_schemas(&text)
            .map_err(|e| anyhow::anyhow!("{from}: {e}"))
    }

    /// The privacy gate's schema document and where it came from.
    pub(crate) fn schemas(&self) -> anyhow::Result<(String, String)> {
        Ok(match &self.schemas {
            Some(path) => (
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the schemas {}", path.display()))?,
                path.display().to_string(),
            ),
            None => {
                let path = host::config_dir().join("schemas.json");
                match std::fs::read_to_string(&path) {
                    Ok(text) => (text, path.display().to_string()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => (
                        DEFAULT_SCHEMAS.to_owned(),
                        "the built-in schemas".to_owned(),
                    ),
                    Err(e) => bail!("cannot read the schemas {}: {e}", path.display()),
                }
            }
        })
    }
}

use host::ANONYMOUS;
