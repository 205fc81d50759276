//! The client report: what this agent's SDK tells the server about its own side,
//! so operators see it in the console (the Agents page): outbox counts, poison and
//! expired entries, the consumer's connection mode, counters and local quarantine.
//!
//! [`Reporter::run`] builds the report from the local state file (and the live
//! consumer status, when there is one) and sends it at most every
//! [`Reporter::interval`] (10 s), and only when it changed, or once a minute as a
//! sign of life. It carries counts, modes and reasons only: no payloads. While an
//! operator has paused client reports (remote client settings, see
//! [`Client::client_settings`]) it sends none, not even the last one at a stop.

use std::time::Duration;

use switchboard_proto::{
    ClientPoison, ClientReport, InboxSummary, MAX_REPORT_TEXT, MAX_REPORTED_POISON, OutboxSummary,
};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Client;
use crate::consumer::{self, ConsumerStatus, Mode};
use crate::local::{LocalDb, clip};
use crate::outbox::{self, OutboxError};

/// Sends the report while the agent runs.
#[derive(Debug)]
pub struct Reporter {
    client: Client,
    agent: String,
    db: LocalDb,
    status: Option<watch::Receiver<ConsumerStatus>>,
    interval: Duration,
    paused_check: Duration,
    /// What the report names as the client (`sdk`), when not the SDK itself.
    sdk: Option<String>,
}

/// At least this often a report goes out even when nothing changed.
const SIGN_OF_LIFE: Duration = Duration::from_secs(60);

impl Reporter {
    /// A reporter for `agent` reading `db`, and the consumer's status if it runs.
    pub fn new(
        client: Client,
        agent: impl Into<String>,
        db: LocalDb,
        status: Option<watch::Receiver<ConsumerStatus>>,
    ) -> Self {
        Self {
            client,
            agent: agent.into(),
            db,
            status,
            interval: Duration::from_secs(10),
            paused_check: SIGN_OF_LIFE,
            sdk: None,
        }
    }

    /// Names the client in the report (its `sdk` member; default
    /// `switchboard-sdk/<version>`): a front built on the SDK, such as `switchboard
    /// mcp`, says what it is and how its agent is connected.
    pub fn sdk(mut self, name: impl Into<String>) -> Self {
        self.sdk = Some(clip(&name.into(), MAX_REPORT_TEXT));
        self
    }

    /// The shortest time between two reports (default 10 s).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// How often a reporter whose reports an operator paused reads its settings
    /// to learn that they resumed (default 60 s), in case the agent makes no other
    /// call that would bring the news.
    pub fn paused_check(mut self, every: Duration) -> Self {
        self.paused_check = every;
        self
    }

    /// Builds the report now.
    pub async fn build(&self) -> Result<ClientReport, OutboxError> {
        let status = self.status.as_ref().map(|s| s.borrow().clone());
        let mut report = build(&self.db, &self.agent, status.as_ref()).await?;
        if let Some(sdk) = &self.sdk {
            report.sdk.clone_from(sdk);
        }
        Ok(report)
    }

    /// Sends a report whenever it changed (at most every interval) and at least
    /// once a minute, until `cancel`; then one last report. Failures are logged and
    /// tried again next time.
    pub async fn run(self, cancel: CancellationToken) {
        let mut last: Option<(ClientReport, tokio::time::Instant)> = None;
        let mut paused_since: Option<tokio::time::Instant> = None;
        loop {
            let stopping = cancel.is_cancelled();
            match self.build().await {
                Ok(mut report) => {
                    if stopping {
                        report.inbox.mode = "stopped".into();
                    }
                    let due = match &last {
                        None => true,
                        Some((previous, at)) => *previous != report || at.elapsed() >= SIGN_OF_LIFE,
                    };
                    if self.client.client_settings().reports_paused {
                        // Paused by an operator (remote client settings): nothing is
                        // sent. The agent's other calls bring the resume; a sign of
                        // life reads the settings in case there are none.
                        if paused_since
                            .get_or_insert_with(tokio::time::Instant::now)
                            .elapsed()
                            >= self.paused_check
                        {
                            paused_since = Some(tokio::time::Instant::now());
                            if let Err(error) = self.client.own_client_settings(&self.agent).await {
                                tracing::debug!(%error, "client settings not read");
                            }
                        }
                    } else {
                        paused_since = None;
                        if due {
                            match self.client.put_client_report(&self.agent, &report).await {
                                Ok(()) => last = Some((report, tokio::time::Instant::now())),
                                Err(error) => tracing::debug!(%error, "client report not sent"),
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot build the client report"),
            }
            if stopping {
                return;
            }
            tokio::select! {
                () = cancel.cancelled() => {}
                () = tokio::time::sleep(self.interval) => {}
            }
        }
    }
}

/// The report from the state file `db` of `agent` and a consumer's `status`.
pub async fn build(
    db: &LocalDb,
    agent: &str,
    status: Option<&ConsumerStatus>,
) -> Result<ClientReport, OutboxError> {
    let counts = outbox::counts(db).await?;
    let limit = u32::try_from(MAX_REPORTED_POISON).unwrap_or(20);
    let reported = |entry: outbox::Entry, default: &str| ClientPoison {
        id: entry.id.to_string(),
        target: Some(entry.target.lane()),
        reason: clip(
            entry.last_error.as_deref().unwrap_or(default),
            MAX_REPORT_TEXT,
        ),
        at: timestamp(entry.updated_at),
    };
    let outbox_poison = outbox::poison_entries(db, limit)
        .await?
        .into_iter()
        .map(|entry| reported(entry, "poison"))
        .collect();
    let outbox_expired = outbox::expired_entries(db, limit)
        .await?
        .into_iter()
        .map(|entry| reported(entry, "not sent within the server's idempotency window"))
        .collect();
    let inbox_poison = consumer::local_poison(db, limit)
        .await?
        .into_iter()
        .map(|p| ClientPoison {
            id: p.event_id,
            target: None,
            reason: clip(
                p.reason.as_deref().unwrap_or("quarantined locally"),
                MAX_REPORT_TEXT,
            ),
            at: timestamp(p.at),
        })
        .collect();
    let cursor = db.cursor(&format!("claimed:{agent}")).await?;
    let mut inbox = InboxSummary {
        mode: "stopped".into(),
        cursor,
        ..InboxSummary::default()
    };
    if let Some(status) = status {
        (inbox.mode, inbox.poll_interval_seconds) = match status.mode {
            Mode::Starting => ("starting".into(), None),
            Mode::Sse => ("sse".into(), None),
            Mode::Stopped => ("stopped".into(), None),
            Mode::Polling { interval_ms } => ("polling".into(), Some(interval_ms as f64 / 1000.0)),
        };
        inbox.handled = status.handled;
        inbox.acked = status.acked;
        inbox.deduplicated = status.deduplicated;
        inbox.poisoned = status.poisoned;
    }
    Ok(ClientReport {
        sdk: concat!("switchboard-sdk/", env!("CARGO_PKG_VERSION")).into(),
        outbox: OutboxSummary {
            queued: counts.queued,
            sending: counts.sending,
            retryable: counts.retryable,
            sent: counts.sent,
            poison: counts.poison,
            expired: counts.expired,
            expired_removed: counts.expired_removed,
        },
        outbox_poison,
        outbox_expired,
        inbox,
        inbox_poison,
    })
}

fn timestamp(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}
