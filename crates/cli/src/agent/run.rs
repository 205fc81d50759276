//! `switchboard agent run --name X -- CMD ARGS…`: the inbox consumer with a command
//! as the handler, plus the outbox's delivery and the client report.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use clap::Args;
use switchboard_sdk::consumer::{ConsumerConfig, Delivery, Outcome};
use switchboard_sdk::outbox::OutboxConfig;
use switchboard_sdk::proto::Sender;
use switchboard_sdk::report::Reporter;
use switchboard_sdk::{Consumer, Outbox};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use super::Common;

/// The exit status that asks for a retry later (sysexits.h `EX_TEMPFAIL`).
const EX_TEMPFAIL: i32 = 75;

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// The agent whose inbox to consume (name or id).
    #[arg(long, env = "SWITCHBOARD_AGENT")]
    name: String,
    /// Lease per claim, in seconds; extended while the command runs.
    #[arg(long, default_value_t = 60)]
    lease_seconds: u64,
    /// Poll only (no SSE wake-up stream).
    #[arg(long)]
    no_sse: bool,
    /// Longest polling interval, in seconds.
    #[arg(long, default_value_t = 300)]
    max_poll_seconds: u64,
    /// The handler command and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

pub(crate) async fn run(common: &Common, args: RunArgs) -> anyhow::Result<u8> {
    let client = common.connected_client().await?;
    let db = common.db().await?;
    let cancel = CancellationToken::new();
    stop_on_signals(cancel.clone())?;

    let outbox = Outbox::open(db.clone(), &client, common.gate()?, OutboxConfig::default()).await?;
    let delivering = tokio::spawn({
        let (outbox, cancel) = (outbox.clone(), cancel.clone());
        async move { outbox.run(cancel).await }
    });

    let mut config = ConsumerConfig::default();
    config.lease = Duration::from_secs(args.lease_seconds.max(1));
    config.sse = !args.no_sse;
    config.max_poll = Duration::from_secs(args.max_poll_seconds.max(1));
    let consumer = Consumer::new(client.clone(), args.name.clone(), db.clone(), config);
    let status = consumer.status();
    let reporting = tokio::spawn(
        Reporter::new(client, args.name.clone(), db.clone(), Some(status.clone()))
            .run(cancel.clone()),
    );
    eprintln!(
        "switchboard agent: consuming {}'s inbox with `{}` (state {}); Ctrl-C stops",
        args.name,
        args.command.join(" "),
        db.path().display()
    );
    let (agent, command) = (args.name.clone(), args.command);
    let handler = move |delivery: Delivery| {
        let (agent, command) = (agent.clone(), command.clone());
        async move { run_command(&command, &agent, delivery).await }
    };
    let consumed = consumer.run(handler, cancel.clone()).await;
    cancel.cancel();
    let delivered = delivering.await?;
    reporting.await?;
    let status = status.borrow().clone();
    eprintln!(
        "switchboard agent: stopped; handled {}, acked {}, deduplicated {}, quarantined {}",
        status.handled, status.acked, status.deduplicated, status.poisoned
    );
    consumed?;
    delivered?;
    Ok(0)
}

/// Cancels on SIGINT or SIGTERM.
fn stop_on_signals(cancel: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        eprintln!("switchboard agent: stopping (finishing the event in flight)");
        cancel.cancel();
    });
    Ok(())
}

/// Runs the handler command for one event: the payload as JSON on stdin, the
/// metadata in `SWITCHBOARD_*` variables.
async fn run_command(command: &[String], agent: &str, delivery: Delivery) -> Outcome {
    let Some((program, rest)) = command.split_first() else {
        return Outcome::Poison("no handler command".into());
    };
    let event = &delivery.event;
    let mut child = tokio::process::Command::new(program);
    child
        .args(rest)
        .stdin(Stdio::piped())
        .kill_on_drop(true)
        // The handler gets the event, not the agent's credentials.
        .env_remove("SWITCHBOARD_TOKEN")
        .env("SWITCHBOARD_AGENT", agent)
        .env("SWITCHBOARD_EVENT_ID", event.event_id.to_string())
        .env("SWITCHBOARD_SEQ", event.seq.to_string())
        .env("SWITCHBOARD_ATTEMPT", event.attempts.to_string())
        .env(
            "SWITCHBOARD_LOCAL_FAILURES",
            delivery.local_failures.to_string(),
        )
        .env("SWITCHBOARD_PRIORITY", event.priority.to_string())
        .env(
            "SWITCHBOARD_CORRELATION_ID",
            event.correlation_id.as_deref().unwrap_or(""),
        )
        .env(
            "SWITCHBOARD_ROOM_ID",
            event.room_id.map(|r| r.to_string()).unwrap_or_default(),
        )
        .env(
            "SWITCHBOARD_SENDER",
            match &event.sender {
                Sender::Agent { name, .. } => name.as_str(),
                Sender::Operator => "operator",
            },
        );
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(e) => return Outcome::Failed(format!("cannot start {program}: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let payload = serde_json::to_vec(&event.payload).unwrap_or_default();
        // A handler that does not read its stdin is fine.
        let _ = stdin.write_all(&payload).await;
        drop(stdin);
    }
    match child.wait().await {
        Ok(status) if status.success() => Outcome::Ack,
        Ok(status) if status.code() == Some(EX_TEMPFAIL) => Outcome::RetryLater(None),
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Outcome::Failed(format!("{program} exited with status {code}")),
            (None, Some(signal)) => {
                Outcome::Failed(format!("{program} was killed by signal {signal}"))
            }
            (None, None) => Outcome::Failed(format!("{program} ended abnormally")),
        },
        Err(e) => Outcome::Failed(format!("waiting for {program} failed: {e}")),
    }
}
