//! Watching the inbox: the SDK's [`Follower`] reads new events by cursor whenever
//! the SSE wake-up stream says the inbox changed (adaptive polling while the stream
//! is down), and each page with news raises the [`InboxSignal`]. The handler turns
//! a signal into `notifications/resources/updated` for the inbox resource: on the
//! session of a client that subscribed (`resources/subscribe`, 2025 revisions), and
//! on each open `subscriptions/listen` stream (2026-07-28).
//!
//! The follower runs for the whole session, subscribed or not: its open SSE
//! subscription is what shows the agent online in the console.
//!
//! The session's client report (outbox counts, poison sends, the watch's mode)
//! goes to the console as `agent run`'s does, naming the client
//! `switchboard-mcp/<version> (MCP over stdio)`.
//!
//! Its cursor is this process's own (`mcp-watch:<agent>:<pid>`, set to the inbox's
//! head at start, so only new work raises the signal, and removed at the end): a cursor shared by several
//! sessions of the profile would let one of them read past an event before another
//! had told its client.

use std::time::Duration;

use switchboard_sdk::consumer::{ConsumerStatus, FollowerConfig, Mode};
use switchboard_sdk::report::Reporter;
use switchboard_sdk::{Client, Follower, LocalDb};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// The URI of the inbox resource.
pub(crate) const INBOX_URI: &str = "switchboard://inbox";

/// How the inbox is watched.
#[derive(Debug, Clone)]
pub(crate) struct WatchConfig {
    pub(crate) sse: bool,
    /// Adaptive polling (and the safety-net poll while SSE is up).
    pub(crate) poll: bool,
    pub(crate) max_poll: Duration,
}

/// "The inbox changed": raised by the watcher and by the tools that change it.
#[derive(Debug, Clone)]
pub(crate) struct InboxSignal {
    tx: broadcast::Sender<()>,
}

impl InboxSignal {
    pub(crate) fn new() -> Self {
        // A lagging listener loses only repeats of the same news.
        let (tx, _) = broadcast::channel(16);
        Self { tx }
    }

    pub(crate) fn raise(&self) {
        let _ = self.tx.send(());
    }

    pub(crate) fn listen(&self) -> broadcast::Receiver<()> {
        self.tx.subscribe()
    }
}

/// Without polling, the waits between looks are this long: only a wake-up (or a
/// reconnect of the stream) ends them.
const NO_POLL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Follows `agent`'s inbox until `cancel`, raising `signal` on news.
pub(crate) async fn run(
    client: Client,
    agent: String,
    db: LocalDb,
    config: WatchConfig,
    signal: InboxSignal,
    cancel: CancellationToken,
) {
    let mut follow = FollowerConfig::default();
    follow.sse = config.sse;
    if config.poll {
        follow.max_poll = config.max_poll;
        follow.min_poll = follow.min_poll.min(config.max_poll);
    } else {
        follow.min_poll = NO_POLL;
        follow.max_poll = NO_POLL;
    }
    let cursor_name = format!("mcp-watch:{agent}:{}", std::process::id());
    let follower = Follower::new(
        client.clone(),
        agent.clone(),
        db.clone(),
        cursor_name.clone(),
        follow,
    );
    let reporting = tokio::spawn(report(
        client.clone(),
        agent.clone(),
        db.clone(),
        follower.mode(),
        cancel.clone(),
    ));
    // Start at the head: what is already there is not news (look_at_inbox shows it).
    match client.snapshot(&agent).await {
        Ok(snapshot) => {
            if let Err(e) = follower.set_cursor(snapshot.head_cursor).await {
                tracing::warn!(error = %e, "cannot save the watch cursor");
            }
        }
        Err(e) => tracing::debug!(error = %e, "no snapshot yet; watching from the start"),
    }
    let on_event = |_: &switchboard_sdk::proto::InboxEvent| signal.raise();
    let on_resync = |_: &switchboard_sdk::proto::Snapshot| signal.raise();
    if let Err(e) = follower.run(on_event, on_resync, cancel.clone()).await {
        eprintln!(
            "switchboard mcp: watching the inbox of {agent} stopped: {e}; tools still work, \
             but no inbox notifications will come"
        );
    }
    let _ = reporting.await;
    // The cursor was this session's alone. (A killed session leaves its row: one
    // small row per crash, never read again.)
    if let Err(e) = db.forget_cursor(&cursor_name).await {
        tracing::debug!(error = %e, "the watch cursor stays in the state file");
    }
}

/// The client report, its inbox mode the follower's.
async fn report(
    client: Client,
    agent: String,
    db: LocalDb,
    mut mode: watch::Receiver<Mode>,
    cancel: CancellationToken,
) {
    let status = |mode: Mode| ConsumerStatus {
        mode,
        handled: 0,
        acked: 0,
        deduplicated: 0,
        claims: 0,
        poisoned: 0,
        settled: 0,
        last_error: None,
    };
    let (tx, rx) = watch::channel(status(*mode.borrow()));
    let forwarding = {
        let cancel = cancel.clone();
        async move {
            loop {
                tokio::select! {
                    () = cancel.cancelled() => break,
                    changed = mode.changed() => if changed.is_err() { break },
                }
                tx.send_replace(status(*mode.borrow_and_update()));
            }
        }
    };
    let reporter = Reporter::new(client, agent, db, Some(rx)).sdk(format!(
        "switchboard-mcp/{} (MCP over stdio)",
        env!("CARGO_PKG_VERSION")
    ));
    tokio::join!(forwarding, reporter.run(cancel));
}
