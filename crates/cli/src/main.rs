//! `switchboard`: the headless coordination server and the agent subcommands.

mod agent;
mod archive;
mod doctor;
mod mcp;
mod names;
mod operator;
mod serve;
mod tenants;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "switchboard",
    version,
    about = "Self-hosted coordination service for AI agents"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the coordination server headless (no window).
    Serve(Box<serve::ServeArgs>),
    /// An agent's side: login, run a handler on the inbox, send through the durable
    /// outbox, tail, status, check a payload against the privacy gate.
    Agent(Box<agent::AgentCli>),
    /// Check a deployment (the settings `serve` would use) and say how to fix each
    /// problem; exit status 0 ok, 1 warnings, 2 errors.
    Doctor(Box<doctor::DoctorArgs>),
    /// An MCP server over stdio acting as one agent: tools to send, claim, ack and
    /// release work and to hold a name and memory lease; the inbox as a resource
    /// with update notifications. Add it to an MCP client's configuration.
    Mcp(Box<mcp::McpArgs>),
    /// Canonical agent names: import legacy names into the server's registry.
    Names(names::NamesCli),
    /// The deployment admin's tenants: create one (prints its operator token once),
    /// list them.
    Tenants(tenants::TenantsCli),
    /// What retention archived (`serve --archive-dir`): list the files, restore a
    /// range as JSON lines for inspection.
    Archive(archive::ArchiveCli),
}

/// An SDK client builder that trusts `ca_file` (PEM) besides the system's roots: a
/// server whose certificate a private CA signed (`--ca-file`).
pub(crate) fn client_builder(
    ca_file: Option<&std::path::Path>,
) -> anyhow::Result<switchboard_sdk::ClientBuilder> {
    switchboard_broker::host::client_builder(ca_file)
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args).map(|()| 0),
        Command::Agent(args) => agent::run(*args),
        Command::Doctor(args) => doctor::run(*args),
        Command::Mcp(args) => mcp::run(*args),
        Command::Names(args) => names::run(args),
        Command::Archive(args) => archive::run(args),
        Command::Tenants(args) => tenants::run(args),
    };
    match result {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("switchboard: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
