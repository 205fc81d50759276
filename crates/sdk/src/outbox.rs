//! [`Outbox`]: the durable local outbox. A message is written to the agent's local
//! SQLite file before any network I/O (invariant I10), then delivered with the same
//! idempotency key however many times it takes, across crashes and restarts.
//!
//! # States
//!
//! ```text
//! QUEUED ──▶ SENDING ──▶ SENT
//!              │  ▲
//!              ▼  │
//!           RETRYABLE            (transient failure: connect error, timeout, 408,
//!                                 429, 5xx, 409 request_in_progress, 401)
//! SENDING ──▶ POISON             (a final answer: 400, 403, 404, 413, 422, …; the
//!                                 reason is kept)
//! QUEUED / RETRYABLE ──▶ EXPIRED (older than the TTL, 7 days by default: the row
//!                                 is removed and counted)
//! ```
//!
//! On [`Outbox::open`], entries left `SENDING` by a process that died go back to
//! `QUEUED`; they are resent with their stored key, so the server stores each
//! message once.
//!
//! # Order and lanes
//!
//! Each entry belongs to a *lane*: its target (`agent:<name>` or `room:<name>`).
//! Within a lane entries go strictly one after another in the order they were
//! enqueued: the next is sent only when the one before it is `SENT` or `POISON`.
//! A `RETRYABLE` head blocks only its own lane; other lanes flow concurrently (up to
//! [`OutboxConfig::max_lanes_in_flight`] at once).
//!
//! # Before anything is stored
//!
//! [`Outbox::try_enqueue`] runs the privacy [`Gate`] on the payload (refused
//! payloads never reach the file), refuses a body over
//! [`OutboxConfig::max_body_bytes`] (5 MiB, the server's limit), and refuses with
//! [`OutboxError::Full`] when [`OutboxConfig::capacity`] entries are still open.
//! [`Outbox::enqueue`] waits for room instead (backpressure).
//!
//! # Retries
//!
//! Each attempt is one HTTP call (the client's own retry loop is off here: the
//! schedule lives in the file, so it survives restarts). After a transient failure
//! the next attempt is due after the server's `Retry-After`, honored exactly, or
//! else a decorrelated-jitter delay between [`OutboxConfig::base_delay`] (1 s) and
//! [`OutboxConfig::max_delay`] (5 min), whose state is kept per entry. A 401 is
//! treated as transient (the token may be renewed by logging in again); the entry
//! waits the longest delay and says why in `last_error`.
//!
//! Time: [`Outbox::dispatch_due`] takes the current time as an argument, so tests
//! drive the schedule by hand; [`Outbox::run`] passes the wall clock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use sqlx::{AssertSqlSafe, Row};
use switchboard_proto::SendMessage;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::local::{LocalDb, LocalError, ms, now_ms};
use crate::privacy::{Blocked, Gate};
use crate::retry::{DecorrelatedJitter, is_transient};
use crate::{Client, Error, new_idempotency_key};

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
    fn kind(&self) -> &'static str {
        match self {
            Self::Agent(_) => "agent",
            Self::Room(_) => "room",
        }
    }

    fn name(&self) -> &str {
        match self {
            Self::Agent(name) | Self::Room(name) => name,
        }
    }

    /// The ordering lane: `agent:<name>` or `room:<name>`.
    pub fn lane(&self) -> String {
        format!("{}:{}", self.kind(), self.name())
    }

    fn from_row(kind: &str, name: String) -> Self {
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
}

impl EntryState {
    fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Sending => "sending",
            Self::Retryable => "retryable",
            Self::Sent => "sent",
            Self::Poison => "poison",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "sending" => Self::Sending,
            "retryable" => Self::Retryable,
            "sent" => Self::Sent,
            "poison" => Self::Poison,
            _ => Self::Queued,
        }
    }

    /// `SENT` or `POISON`.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Sent | Self::Poison)
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
    /// error), or why it is poison.
    pub last_error: Option<String>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last state change.
    pub updated_at: i64,
    /// The server's receipt, once sent.
    pub receipt: Option<serde_json::Value>,
}

/// Entries by state, and how many expired unsent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutboxCounts {
    pub queued: u64,
    pub sending: u64,
    pub retryable: u64,
    /// Sent entries still kept ([`OutboxConfig::sent_retention`]).
    pub sent: u64,
    pub poison: u64,
    /// Removed unsent after the TTL, ever.
    pub expired: u64,
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
    /// Age after which an unsent entry is removed and counted as expired (7 days).
    pub ttl: Duration,
    /// The smallest delay between attempts of one entry (1 s).
    pub base_delay: Duration,
    /// The largest jittered delay between attempts of one entry (5 min).
    pub max_delay: Duration,
    /// How long sent entries stay in the file for `status` (1 h).
    pub sent_retention: Duration,
    /// How long poison entries stay for the operator to see (7 days).
    pub poison_retention: Duration,
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
            ttl: Duration::from_secs(7 * 24 * 3600),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            sent_retention: Duration::from_secs(3600),
            poison_retention: Duration::from_secs(7 * 24 * 3600),
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

/// What one [`Outbox::dispatch_due`] pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    pub sent: usize,
    pub retryable: usize,
    pub poisoned: usize,
    pub expired: u64,
    /// When the next head is due (Unix ms), if any lane is waiting.
    pub next_due: Option<i64>,
}

/// The durable outbox. Cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    inner: Arc<Inner>,
}

struct Inner {
    db: LocalDb,
    client: Client,
    gate: Gate,
    config: OutboxConfig,
    /// New work was enqueued.
    work: Notify,
    /// Entries left the open states.
    space: Notify,
}

impl fmt::Debug for Outbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outbox")
            .field("db", &self.inner.db.path())
            .finish_non_exhaustive()
    }
}

const OPEN: &str = "('queued', 'sending', 'retryable')";
/// How long `run` waits when nothing is due, before looking again (other processes
/// may share the file).
const IDLE_RECHECK: Duration = Duration::from_secs(5);

impl Outbox {
    /// Opens the outbox in `db`, sending through `client` with `gate` in front.
    /// Entries a dead process left `SENDING` go back to `QUEUED`.
    pub async fn open(
        db: LocalDb,
        client: &Client,
        gate: Gate,
        config: OutboxConfig,
    ) -> Result<Self, OutboxError> {
        sqlx::query("UPDATE outbox SET state = 'queued', updated_at = ? WHERE state = 'sending'")
            .bind(now_ms())
            .execute(db.pool())
            .await
            .map_err(|e| db.error(e))?;
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                client: client.single_attempt(),
                gate,
                config,
                work: Notify::new(),
                space: Notify::new(),
            }),
        })
    }

    /// The privacy gate in front of this outbox.
    pub fn gate(&self) -> &Gate {
        &self.inner.gate
    }

    /// Checks and stores a message for `target`, or refuses it: the privacy gate
    /// (as `message_type`), the size limit, the capacity. Nothing touches the network.
    /// Returns the entry id and the paths the gate stripped.
    pub async fn try_enqueue(
        &self,
        target: Target,
        message_type: &str,
        mut message: SendMessage,
    ) -> Result<Enqueued, OutboxError> {
        let inner = &self.inner;
        let cleared = inner.gate.check(message_type, message.payload.take())?;
        message.payload = cleared.payload;
        let body = serde_json::to_vec(&message).map_err(|e| OutboxError::Invalid(e.to_string()))?;
        if body.len() > inner.config.max_body_bytes {
            return Err(OutboxError::TooLarge {
                size: body.len(),
                limit: inner.config.max_body_bytes,
            });
        }
        let now = now_ms();
        // The capacity check and the insert are one statement: two processes cannot
        // both take the last place.
        let id = sqlx::query(AssertSqlSafe(format!(
            "INSERT INTO outbox (lane, target_kind, target, message_type, body, \
             idempotency_key, state, next_attempt_at, created_at, updated_at) \
             SELECT ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ? \
             WHERE (SELECT COUNT(*) FROM outbox WHERE state IN {OPEN}) < ? \
             RETURNING id"
        )))
        .bind(target.lane())
        .bind(target.kind())
        .bind(target.name())
        .bind(message_type)
        .bind(body)
        .bind(new_idempotency_key())
        .bind(now)
        .bind(now)
        .bind(now)
        .bind(i64::try_from(inner.config.capacity).unwrap_or(i64::MAX))
        .fetch_optional(inner.db.pool())
        .await
        .map_err(|e| inner.db.error(e))?
        .map(|row| row.get::<i64, _>(0))
        .ok_or(OutboxError::Full {
            capacity: inner.config.capacity,
        })?;
        inner.work.notify_one();
        Ok(Enqueued {
            id,
            stripped: cleared.stripped,
        })
    }

    /// [`Outbox::try_enqueue`], waiting for room while the outbox is full
    /// (backpressure). Other refusals return at once.
    pub async fn enqueue(
        &self,
        target: Target,
        message_type: &str,
        message: SendMessage,
    ) -> Result<Enqueued, OutboxError> {
        loop {
            let space = self.inner.space.notified();
            match self
                .try_enqueue(target.clone(), message_type, message.clone())
                .await
            {
                Err(OutboxError::Full { .. }) => {
                    // Another process may free room without notifying us.
                    let _ = tokio::time::timeout(Duration::from_secs(1), space).await;
                }
                other => return other,
            }
        }
    }

    /// One delivery pass at time `now` (Unix ms): removes expired and old entries,
    /// then makes one attempt for the head of every lane that is due, lanes in
    /// parallel.
    pub async fn dispatch_due(&self, now: i64) -> Result<Pass, OutboxError> {
        let inner = &self.inner;
        let mut pass = Pass {
            expired: self.expire(now).await?,
            ..Pass::default()
        };
        let heads = self.due_heads(now).await?;
        let mut attempts = futures::stream::iter(heads)
            .map(|head| self.attempt(head, now))
            .buffer_unordered(inner.config.max_lanes_in_flight.max(1));
        while let Some(outcome) = attempts.next().await {
            match outcome? {
                Some(EntryState::Sent) => pass.sent += 1,
                Some(EntryState::Poison) => pass.poisoned += 1,
                Some(_) => pass.retryable += 1,
                None => {}
            }
        }
        if pass.sent + pass.poisoned > 0 || pass.expired > 0 {
            inner.space.notify_waiters();
        }
        pass.next_due = self.next_due().await?;
        Ok(pass)
    }

    /// Delivers until `cancel` fires: a pass whenever something is due or enqueued.
    /// Entries in flight when it is cancelled go back to `QUEUED`.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(), OutboxError> {
        let result = loop {
            let work = self.inner.work.notified();
            let pass = tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                pass = self.dispatch_due(now_ms()) => pass,
            };
            let wait = match pass {
                Ok(pass) if pass.sent + pass.poisoned > 0 => continue,
                Ok(pass) => pass
                    .next_due
                    .map_or(IDLE_RECHECK, |due| {
                        Duration::from_millis(u64::try_from(due - now_ms()).unwrap_or(0))
                    })
                    .min(IDLE_RECHECK),
                Err(error) => {
                    tracing::warn!(%error, "outbox pass failed; trying again in 1 s");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                () = cancel.cancelled() => break Ok(()),
                () = work => {}
                () = tokio::time::sleep(wait) => {}
            }
        };
        self.requeue_sending().await?;
        result
    }

    /// Makes passes until entry `id` is terminal or `timeout` passes; returns the
    /// entry as it is then (`None` if it expired).
    pub async fn deliver(&self, id: i64, timeout: Duration) -> Result<Option<Entry>, OutboxError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let pass = self.dispatch_due(now_ms()).await?;
            let entry = self.entry(id).await?;
            match &entry {
                Some(e) if !e.state.is_terminal() => {}
                _ => return Ok(entry),
            }
            let due = pass.next_due.map_or(IDLE_RECHECK, |due| {
                Duration::from_millis(u64::try_from(due - now_ms()).unwrap_or(0))
            });
            let wake = (tokio::time::Instant::now() + due.min(IDLE_RECHECK)).min(deadline);
            // Each pass finished its attempts, so nothing of ours is in flight here.
            if tokio::time::Instant::now() >= deadline {
                return Ok(entry);
            }
            tokio::time::sleep_until(wake).await;
        }
    }

    /// One entry.
    pub async fn entry(&self, id: i64) -> Result<Option<Entry>, OutboxError> {
        let db = &self.inner.db;
        let row = sqlx::query(AssertSqlSafe(format!("{ENTRY_COLUMNS} WHERE id = ?")))
            .bind(id)
            .fetch_optional(db.pool())
            .await
            .map_err(|e| db.error(e))?;
        Ok(row.as_ref().map(entry_of))
    }

    /// Entries in `state` (all when `None`), oldest first, at most `limit`.
    pub async fn entries(
        &self,
        state: Option<EntryState>,
        limit: u32,
    ) -> Result<Vec<Entry>, OutboxError> {
        let db = &self.inner.db;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "{ENTRY_COLUMNS} WHERE (?1 IS NULL OR state = ?1) ORDER BY id LIMIT ?2"
        )))
        .bind(state.map(EntryState::as_str))
        .bind(limit)
        .fetch_all(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(rows.iter().map(entry_of).collect())
    }

    /// Entries by state.
    pub async fn counts(&self) -> Result<OutboxCounts, OutboxError> {
        counts(&self.inner.db).await
    }

    /// Removes unsent entries past the TTL (counting them), sent entries past
    /// their retention and poison entries past theirs.
    async fn expire(&self, now: i64) -> Result<u64, OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        let expired = sqlx::query(
            "DELETE FROM outbox WHERE state IN ('queued', 'retryable') AND created_at <= ?",
        )
        .bind(now - ms(config.ttl))
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?
        .rows_affected();
        if expired > 0 {
            sqlx::query(
                "INSERT INTO counters (name, value) VALUES ('outbox_expired', ?) \
                 ON CONFLICT (name) DO UPDATE SET value = value + excluded.value",
            )
            .bind(i64::try_from(expired).unwrap_or(i64::MAX))
            .execute(db.pool())
            .await
            .map_err(|e| db.error(e))?;
            tracing::warn!(expired, "outbox entries expired unsent");
        }
        sqlx::query(
            "DELETE FROM outbox WHERE (state = 'sent' AND updated_at <= ?) \
             OR (state = 'poison' AND updated_at <= ?)",
        )
        .bind(now - ms(config.sent_retention))
        .bind(now - ms(config.poison_retention))
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(expired)
    }

    /// The head of every lane that is due: the oldest open entry of the lane, when
    /// it is not in flight and its time has come.
    async fn due_heads(&self, now: i64) -> Result<Vec<Head>, OutboxError> {
        let db = &self.inner.db;
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT id, target_kind, target, body, idempotency_key, last_delay_ms FROM outbox \
             WHERE id IN (SELECT MIN(id) FROM outbox WHERE state IN {OPEN} GROUP BY lane) \
             AND state IN ('queued', 'retryable') AND next_attempt_at <= ? ORDER BY id"
        )))
        .bind(now)
        .fetch_all(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(rows
            .iter()
            .map(|row| Head {
                id: row.get(0),
                target: Target::from_row(row.get::<&str, _>(1), row.get(2)),
                body: row.get(3),
                key: row.get(4),
                last_delay: row
                    .get::<Option<i64>, _>(5)
                    .map(|d| Duration::from_millis(u64::try_from(d).unwrap_or(0))),
            })
            .collect())
    }

    /// When the next lane head is due.
    async fn next_due(&self) -> Result<Option<i64>, OutboxError> {
        let db = &self.inner.db;
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT MIN(next_attempt_at) FROM outbox \
             WHERE id IN (SELECT MIN(id) FROM outbox WHERE state IN {OPEN} GROUP BY lane) \
             AND state IN ('queued', 'retryable')"
        )))
        .fetch_one(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(row.get(0))
    }

    /// One attempt for a lane head; the state it ended in (`None` when another
    /// process took it first).
    async fn attempt(&self, head: Head, now: i64) -> Result<Option<EntryState>, OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        let taken = sqlx::query(
            "UPDATE outbox SET state = 'sending', attempts = attempts + 1, updated_at = ? \
             WHERE id = ? AND state IN ('queued', 'retryable')",
        )
        .bind(now)
        .bind(head.id)
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?
        .rows_affected();
        if taken == 0 {
            return Ok(None);
        }
        let result = self.send(&head).await;
        let outcome = judge(result);
        let after = now_ms().max(now);
        let state = match outcome {
            Judged::Sent(receipt) => {
                sqlx::query(
                    "UPDATE outbox SET state = 'sent', receipt = ?, last_error = NULL, \
                     updated_at = ? WHERE id = ?",
                )
                .bind(receipt.to_string())
                .bind(after)
                .bind(head.id)
                .execute(db.pool())
                .await
                .map_err(|e| db.error(e))?;
                EntryState::Sent
            }
            Judged::Poison(reason) => {
                tracing::warn!(entry = head.id, %reason, "outbox entry is poison");
                sqlx::query(
                    "UPDATE outbox SET state = 'poison', last_error = ?, updated_at = ? \
                     WHERE id = ?",
                )
                .bind(reason)
                .bind(after)
                .bind(head.id)
                .execute(db.pool())
                .await
                .map_err(|e| db.error(e))?;
                EntryState::Poison
            }
            Judged::Retry {
                retry_after,
                reason,
            } => self.schedule(&head, now, retry_after, reason).await?,
            Judged::Unauthorized(reason) => {
                self.schedule(&head, now, Some(config.max_delay), reason)
                    .await?
            }
        };
        Ok(Some(state))
    }

    /// Makes a head `RETRYABLE`, due after `retry_after` (exactly) or else the next
    /// jittered delay. The schedule counts from `now`, when the attempt started, so
    /// a `Retry-After: 30` answer means 30 s after `now`.
    async fn schedule(
        &self,
        head: &Head,
        now: i64,
        retry_after: Option<Duration>,
        reason: String,
    ) -> Result<EntryState, OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        let jitter =
            DecorrelatedJitter::with_uniform(config.base_delay, config.max_delay, config.uniform);
        let jittered = match head.last_delay {
            Some(previous) => jitter.after(previous),
            None => jitter,
        }
        .next_delay();
        let delay = retry_after.unwrap_or(jittered);
        sqlx::query(
            "UPDATE outbox SET state = 'retryable', last_error = ?, next_attempt_at = ?, \
             last_delay_ms = ?, updated_at = ? WHERE id = ?",
        )
        .bind(reason)
        .bind(now.saturating_add(ms(delay)))
        .bind(ms(jittered))
        .bind(now_ms().max(now))
        .bind(head.id)
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        Ok(EntryState::Retryable)
    }

    /// Sends a head once; the receipt as JSON.
    async fn send(&self, head: &Head) -> Result<serde_json::Value, Error> {
        let message: SendMessage = serde_json::from_slice(&head.body)
            .map_err(|e| Error::InvalidInput(format!("stored message is unreadable: {e}")))?;
        let client = &self.inner.client;
        let receipt = match &head.target {
            Target::Agent(agent) => {
                serde_json::to_value(client.send_message(agent, &message, &head.key).await?)
            }
            Target::Room(room) => {
                serde_json::to_value(client.send_room_message(room, &message, &head.key).await?)
            }
        };
        receipt.map_err(|e| Error::Decode(e.to_string()))
    }

    /// Puts entries left in flight back to `QUEUED`.
    async fn requeue_sending(&self) -> Result<(), OutboxError> {
        let db = &self.inner.db;
        sqlx::query("UPDATE outbox SET state = 'queued', updated_at = ? WHERE state = 'sending'")
            .bind(now_ms())
            .execute(db.pool())
            .await
            .map_err(|e| db.error(e))?;
        Ok(())
    }
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
        }
    }
    let expired = sqlx::query("SELECT value FROM counters WHERE name = 'outbox_expired'")
        .fetch_optional(db.pool())
        .await
        .map_err(|e| db.error(e))?;
    counts.expired = expired.map_or(0, |r| u64::try_from(r.get::<i64, _>(0)).unwrap_or(0));
    Ok(counts)
}

/// Poison entries in `db`, newest first, at most `limit`.
pub async fn poison_entries(db: &LocalDb, limit: u32) -> Result<Vec<Entry>, OutboxError> {
    let rows = sqlx::query(AssertSqlSafe(format!(
        "{ENTRY_COLUMNS} WHERE state = 'poison' ORDER BY updated_at DESC LIMIT ?"
    )))
    .bind(limit)
    .fetch_all(db.pool())
    .await
    .map_err(|e| db.error(e))?;
    Ok(rows.iter().map(entry_of).collect())
}

/// The result of a successful [`Outbox::try_enqueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The entry id.
    pub id: i64,
    /// Paths the privacy gate stripped (fields the schema does not allow).
    pub stripped: Vec<String>,
}

/// A lane head about to be attempted.
struct Head {
    id: i64,
    target: Target,
    body: Vec<u8>,
    key: String,
    last_delay: Option<Duration>,
}

const ENTRY_COLUMNS: &str = "SELECT id, target_kind, target, message_type, state, attempts, \
     next_attempt_at, last_error, created_at, updated_at, receipt FROM outbox";

fn entry_of(row: &sqlx::sqlite::SqliteRow) -> Entry {
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
    }
}

/// What an attempt's result means for the entry.
#[derive(Debug, PartialEq)]
enum Judged {
    Sent(serde_json::Value),
    Retry {
        retry_after: Option<Duration>,
        reason: String,
    },
    /// The token was refused: wait the longest delay.
    Unauthorized(String),
    Poison(String),
}

/// The error and its sources on one line ("transport error: …: operation timed
/// out"): what an operator needs to see in `last_error`.
fn describe(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn judge(result: Result<serde_json::Value, Error>) -> Judged {
    match result {
        Ok(receipt) => Judged::Sent(receipt),
        // A 2xx whose body is not a receipt: the server took the message.
        Err(Error::Decode(reason)) => {
            tracing::warn!(%reason, "outbox entry sent, but the receipt was unreadable");
            Judged::Sent(serde_json::Value::Null)
        }
        // An expired or revoked token: logging in again fixes it, so the message
        // waits instead of being thrown away.
        Err(error) if error.status() == Some(401) => Judged::Unauthorized(format!(
            "{}; log in again (`switchboard agent login`)",
            describe(&error)
        )),
        Err(error) if is_transient(&error) => Judged::Retry {
            retry_after: error.retry_after(),
            reason: describe(&error),
        },
        Err(error) => Judged::Poison(describe(&error)),
    }
}
