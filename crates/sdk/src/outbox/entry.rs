//! The outbox's data: targets, entry states, settings, errors, and reading entries
//! back from the state file (also for a process that only reads it, like
//! `switchboard agent status`).

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use sqlx::{AssertSqlSafe, Row};

use crate::local::{LocalDb, LocalError};
use crate::privacy::Blocked;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Target {
    /// An agent's inbox (name or id).
    Agent(String),
    /// A room (name or id): one event per member.
    Room(String),
}

impl Target {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Self::Agent(_) => "agent",
            Self::Room(_) => "room",
        }
    }

    pub(super) fn name(&self) -> &str {
        match self {
            Self::Agent(name) | Self::Room(name) => name,
        }
    }

    /// The ordering lane: `agent:<name>` or `room:<name>`.
    pub fn lane(&self) -> String {
        format!("{}:{}", self.kind(), self.name())
    }

    pub(super) fn from_row(kind: &str, name: String) -> Self {
        if kind == "room" {
            Self::Room(name)
        } else {
            Self::Agent(name)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lane())
    }
}

/// The state of an outbox entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Waiting for its turn.
    Queued,
    /// An attempt is in flight.
    Sending,
    /// The last attempt failed transiently; the next is due at `next_attempt_at`.
    Retryable,
    /// The server stored it (terminal).
    Sent,
    /// The server refused it for good (terminal); `last_error` says why.
    Poison,
    /// Not sent within the server's idempotency window (terminal): an attempt may
    /// have reached the server, and the server may have forgotten the key since, so
    /// a resend could be stored twice. `last_error` says so; inspect and resend by
    /// hand.
    Expired,
}

impl EntryState {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Sending => "sending",
            Self::Retryable => "retryable",
            Self::Sent => "sent",
            Self::Poison => "poison",
            Self::Expired => "expired",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "sending" => Self::Sending,
            "retryable" => Self::Retryable,
            "sent" => Self::Sent,
            "poison" => Self::Poison,
            "expired" => Self::Expired,
            _ => Self::Queued,
        }
    }

    /// `SENT`, `POISON` or `EXPIRED`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Sent | Self::Poison | Self::Expired)
    }
}

impl fmt::Display for EntryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str().to_ascii_uppercase())
    }
}

/// One outbox entry, as stored. The idempotency key is not exposed.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: i64,
    pub target: Target,
    pub message_type: String,
    pub state: EntryState,
    /// Attempts made so far.
    pub attempts: u32,
    /// Unix ms when the next attempt is due (for `QUEUED`/`RETRYABLE`).
    pub next_attempt_at: i64,
    /// Why the last attempt failed (a problem's code and detail, or the transport
    /// error), or why it is poison or expired.
    pub last_error: Option<String>,
    /// Unix ms when the first attempt that may have reached the server started
    /// (`None` while every attempt failed to connect): the clock of the server's
    /// idempotency window.
    pub first_attempt_at: Option<i64>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last state change.
    pub updated_at: i64,
    /// The server's receipt, once sent.
    pub receipt: Option<serde_json::Value>,
}

/// Entries by state, and how many expired entries are gone from the file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutboxCounts {
    pub queued: u64,
    pub sending: u64,
    pub retryable: u64,
    /// Sent entries still kept ([`OutboxConfig::sent_retention`]).
    pub sent: u64,
    pub poison: u64,
    /// `EXPIRED` entries in the file: not sent within the server's idempotency
    /// window, kept with their reason ([`OutboxConfig::expired_retention`]).
    pub expired: u64,
    /// Expired entries no longer in the file, ever: removed after
    /// [`OutboxConfig::expired_retention`], or (before the outbox had a horizon)
    /// deleted unsent after its old 7-day TTL.
    pub expired_removed: u64,
}

impl OutboxCounts {
    /// Entries not yet sent nor poison: what [`OutboxConfig::capacity`] bounds.
    pub fn open(&self) -> u64 {
        self.queued + self.sending + self.retryable
    }
}

/// Outbox settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OutboxConfig {
    /// Open (unsent, not poison) entries allowed at once (default 10,000).
    pub capacity: u64,
    /// Taken off the server's idempotency key TTL before an entry counts as too
    /// old to resend (1 h): room for the clocks of both sides to jump, and for
    /// the resend itself to travel.
    pub horizon_margin: Duration,
    /// The smallest delay between attempts of one entry (1 s).
    pub base_delay: Duration,
    /// The largest jittered delay between attempts of one entry (5 min).
    pub max_delay: Duration,
    /// How long sent entries stay in the file for `status` (1 h).
    pub sent_retention: Duration,
    /// How long poison entries stay for the operator to see (7 days).
    pub poison_retention: Duration,
    /// How long expired entries stay for the operator to see (30 days); their
    /// removal is counted in [`OutboxCounts::expired_removed`].
    pub expired_retention: Duration,
    /// Lanes sending at once (8).
    pub max_lanes_in_flight: usize,
    /// The largest request body (5 MiB, the server's default limit).
    pub max_body_bytes: usize,
    /// The jitter's uniform source (tests fix it).
    pub uniform: fn() -> f64,
}

impl Default for OutboxConfig {
    fn default() -> Self {
        Self {
            capacity: 10_000,
            horizon_margin: Duration::from_secs(3600),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            sent_retention: Duration::from_secs(3600),
            poison_retention: Duration::from_secs(7 * 24 * 3600),
            expired_retention: Duration::from_secs(30 * 24 * 3600),
            max_lanes_in_flight: 8,
            max_body_bytes: 5 * 1024 * 1024,
            uniform: crate::retry::uniform_random,
        }
    }
}

/// Why an entry was not enqueued, or the outbox could not work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutboxError {
    /// The privacy gate refused the payload (rules and paths only, never the data).
    #[error(transparent)]
    Blocked(#[from] Blocked),
    /// The request body would be larger than the server accepts.
    #[error(
        "the message is {size} bytes, over the {limit}-byte limit; send a reference \
         to the data instead of the data"
    )]
    TooLarge { size: usize, limit: usize },
    /// `capacity` entries are still waiting to be sent.
    #[error(
        "the outbox is full ({capacity} unsent entries); is the server reachable? \
         see `switchboard agent status`"
    )]
    Full { capacity: u64 },
    /// The message cannot be serialized.
    #[error("invalid message: {0}")]
    Invalid(String),
    /// The local file failed.
    #[error(transparent)]
    Local(#[from] LocalError),
}

/// What one [`Outbox::dispatch_due`](super::Outbox::dispatch_due) pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub sent: usize,
    pub retryable: usize,
    pub poisoned: usize,
    /// Entries this pass found past the server's idempotency window (now `EXPIRED`).
    pub expired: u64,
    /// When the next head is due (Unix ms), if any lane is waiting.
    pub next_due: Option<i64>,
}

/// Entries by state in `db` (also for a process that only reads the file).
pub async fn counts(db: &LocalDb) -> Result<OutboxCounts, OutboxError> {
    let rows = sqlx::query("SELECT state, COUNT(*) FROM outbox GROUP BY state")
        .fetch_all(db.pool())
        .await
        .map_err(|e| db.error(e))?;
    let mut counts = OutboxCounts::default();
    for row in &rows {
        let n = u64::try_from(row.get::<i64, _>(1)).unwrap_or(0);
        match EntryState::parse(row.get(0)) {
            EntryState::Queued => counts.queued = n,
            EntryState::Sending => counts.sending = n,
            EntryState::Retryable => counts.retryable = n,
            EntryState::Sent => counts.sent = n,
            EntryState::Poison => counts.poison = n,
            EntryState::Expired => counts.expired = n,
        }
    }
    // The name predates the EXPIRED state: it counted entries the old TTL deleted
    // unsent, and now counts expired entries removed after their retention.
    let removed = sqlx::query(AssertSqlSafe(format!(
        "SELECT value FROM counters WHERE name = '{EXPIRED_REMOVED}'"
    )))
    .fetch_optional(db.pool())
    .await
    .map_err(|e| db.error(e))?;
    counts.expired_removed = removed.map_or(0, |r| u64::try_from(r.get::<i64, _>(0)).unwrap_or(0));
    Ok(counts)
}

/// The counter of expired entries no longer in the file.
pub(super) const EXPIRED_REMOVED: &str = "outbox_expired";

/// Poison entries in `db`, newest first, at most `limit`.
pub async fn poison_entries(db: &LocalDb, limit: u32) -> Result<Vec<Entry>, OutboxError> {
    entries_in(db, EntryState::Poison, limit).await
}

/// Expired entries in `db` (not sent within the server's idempotency window),
/// newest first, at most `limit`.
pub async fn expired_entries(db: &LocalDb, limit: u32) -> Result<Vec<Entry>, OutboxError> {
    entries_in(db, EntryState::Expired, limit).await
}

async fn entries_in(
    db: &LocalDb,
    state: EntryState,
    limit: u32,
) -> Result<Vec<Entry>, OutboxError> {
    let rows = sqlx::query(AssertSqlSafe(format!(
        "{ENTRY_COLUMNS} WHERE state = ? ORDER BY updated_at DESC, id DESC LIMIT ?"
    )))
    .bind(state.as_str())
    .bind(limit)
    .fetch_all(db.pool())
    .await
    .map_err(|e| db.error(e))?;
    Ok(rows.iter().map(entry_of).collect())
}

/// The result of a successful [`Outbox::try_enqueue`](super::Outbox::try_enqueue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The entry id.
    pub id: i64,
    /// Paths the privacy gate stripped (fields the schema does not allow).
    pub stripped: Vec<String>,
}

pub(super) const ENTRY_COLUMNS: &str = "SELECT id, target_kind, target, message_type, state, attempts, \
     next_attempt_at, last_error, created_at, updated_at, receipt, first_attempt_at FROM outbox";

pub(super) fn entry_of(row: &sqlx::sqlite::SqliteRow) -> Entry {
    Entry {
        id: row.get(0),
        target: Target::from_row(row.get::<&str, _>(1), row.get(2)),
        message_type: row.get(3),
        state: EntryState::parse(row.get(4)),
        attempts: u32::try_from(row.get::<i64, _>(5)).unwrap_or(0),
        next_attempt_at: row.get(6),
        last_error: row.get(7),
        created_at: row.get(8),
        updated_at: row.get(9),
        receipt: row
            .get::<Option<String>, _>(10)
            .and_then(|r| serde_json::from_str(&r).ok()),
        first_attempt_at: row.get(11),
    }
}
