//! `switchboard mcp`: an MCP server over stdio that acts as one agent, so a coding or
//! assistant agent that speaks the Model Context Protocol can hand work to other
//! agents, claim it under a lease, and hold a name and a memory under a fencing
//! token, through tools.
//!
//! It is built on the SDK as `switchboard agent run` is: sends go into the profile's
//! durable outbox through the privacy gate (delivered by a task of this process, and
//! by any later process of the profile if this one dies first); claims, acks and
//! releases are the SDK's fenced calls; the inbox is watched with the SDK's SSE
//! wake-up and adaptive polling ([`watch`]).
//!
//! Terms:
//! - *session*: one `switchboard mcp` process, serving one MCP client over stdio.
//! - *keeper*: the session's memory of the claim tokens and fencing tokens it got
//!   ([`keeper`]). The model names an event (its id) or a lease (its name) and never
//!   sees or copies a token.
//!
//! # Several sessions of one profile
//!
//! One state file per profile, shared (the same file `switchboard agent send` and
//! `run` use): the outbox and the cursors are written one statement at a time under
//! SQLite's lock, and an outbox entry is resent only with its stored idempotency key,
//! so two sessions that both pick up an entry store it once on the server. What is
//! not shared is the keeper: a claim belongs to the session (the model) that made
//! it, and another editor window of the same agent cannot ack it; the server's
//! fencing (`stale_claim`, `stale_fence`) refuses a mix-up either way. Each session
//! watches the inbox with a cursor of its own (`mcp-watch:<agent>:<pid>`), so every
//! window is told about new work.

mod handler;
mod keeper;
mod text;
mod tools;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use rmcp::ServiceExt;
use switchboard_sdk::Outbox;
use switchboard_sdk::outbox::OutboxConfig;
use tokio_util::sync::CancellationToken;

use crate::agent::Common;

#[derive(Args, Debug)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    common: Common,
    /// The agent this session acts as (name or id); its token must be the login's.
    #[arg(long, env = "SWITCHBOARD_AGENT")]
    name: String,
    /// Watch the inbox by polling only (no SSE wake-up stream).
    #[arg(long)]
    no_sse: bool,
    /// No adaptive polling: only the SSE wake-up stream tells this session about new
    /// work (a diagnostic; the SDK's safety-net poll is off too). With --no-sse as
    /// well, the inbox is not watched at all: no inbox notifications.
    #[arg(long)]
    no_poll: bool,
    /// Longest polling interval while the SSE stream is down, in seconds.
    #[arg(long, default_value_t = 300)]
    max_poll_seconds: u64,
    /// How long a send waits for the server before answering "queued", in seconds
    /// (the outbox keeps delivering it after that).
    #[arg(long, default_value_t = 5)]
    send_wait_seconds: u64,
}

/// The shared parts of a session, cheap to clone into the handler and its tasks.
pub(crate) struct Session {
    pub(crate) client: switchboard_sdk::Client,
    pub(crate) agent: String,
    pub(crate) outbox: Outbox,
    pub(crate) keeper: keeper::Keeper,
    pub(crate) inbox: watch::InboxSignal,
    pub(crate) send_wait: Duration,
    /// What the privacy gate lets through, for the sends' descriptions.
    pub(crate) payload_note: String,
}

/// Runs the MCP server on stdin/stdout until the client closes it.
pub(crate) fn run(args: McpArgs) -> anyhow::Result<u8> {
    // stdout carries the protocol; diagnostics go to stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHBOARD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: McpArgs) -> anyhow::Result<u8> {
    let common = &args.common;
    let client = common.connected_client().await?;
    let db = common.db().await?;
    let (gate, payload_note) = (common.gate()?, tools::payload_note(&common.schemas()?.0));
    let outbox = Outbox::open(db.clone(), &client, gate, OutboxConfig::default()).await?;
    let cancel = CancellationToken::new();
    let delivering = tokio::spawn({
        let (outbox, cancel) = (outbox.clone(), cancel.clone());
        async move { outbox.run(cancel).await }
    });
    let inbox = watch::InboxSignal::new();
    let watching = tokio::spawn(watch::run(
        client.clone(),
        args.name.clone(),
        db.clone(),
        watch::WatchConfig {
            sse: !args.no_sse,
            poll: !args.no_poll,
            max_poll: Duration::from_secs(args.max_poll_seconds.max(1)),
        },
        inbox.clone(),
        cancel.clone(),
    ));
    let session = Arc::new(Session {
        client,
        agent: args.name.clone(),
        outbox,
        keeper: keeper::Keeper::default(),
        inbox,
        send_wait: Duration::from_secs(args.send_wait_seconds),
        payload_note,
    });
    eprintln!(
        "switchboard mcp: serving agent {} over stdio (state {})",
        args.name,
        db.path().display()
    );
    let handler = handler::Handler::new(session.clone(), cancel.clone());
    let result = match handler.serve(rmcp::transport::stdio()).await {
        Ok(running) => running
            .waiting()
            .await
            .map(drop)
            .context("the MCP session ended abnormally"),
        Err(e) => Err(anyhow::anyhow!(
            "the MCP client did not start a session: {e}"
        )),
    };
    cancel.cancel();
    // Leases this session holds are released, so the name and memory are free at
    // once rather than after their TTL; claims run out on their own (another
    // claimer gets the event when its lease ends).
    session.keeper.release_leases(&session.client).await;
    if let Ok(Err(e)) = delivering.await {
        eprintln!("switchboard mcp: the outbox stopped: {e}");
    }
    let _ = watching.await;
    result.map(|()| 0)
}
