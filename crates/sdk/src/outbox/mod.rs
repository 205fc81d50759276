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
//! QUEUED / RETRYABLE ──▶ EXPIRED (past the server's idempotency window: see below;
//!                                 the reason is kept)
//! ```
//!
//! `SENT`, `POISON` and `EXPIRED` are terminal. Nothing open is ever deleted: an
//! entry leaves the file only from a terminal state, after that state's retention.
//!
//! On [`Outbox::open`], entries left `SENDING` by a process that died go back to
//! `QUEUED`; they are resent with their stored key, so the server stores each
//! message once.
//!
//! # The horizon
//!
//! A resend is safe only while the server still keeps the entry's idempotency key
//! (invariant I8): after that, a message whose earlier answer was lost would be
//! stored twice. So an entry is resent only while its first attempt that may have
//! reached the server is younger than the server's key TTL less
//! [`OutboxConfig::horizon_margin`]; past that it becomes `EXPIRED` with a reason
//! that says to inspect and resend by hand. The TTL is learned from
//! `/api/v1/capabilities` (cached in the local file; 24 h, the least a server keeps
//! keys, until learned). An entry none of whose attempts connected has no key on
//! the server and waits as long as it takes. See `horizon.rs`.
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

mod attempt;
mod entry;
mod horizon;
mod judge;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sqlx::{AssertSqlSafe, Row};
use switchboard_proto::SendMessage;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::local::{LocalDb, ms, now_ms};
use crate::privacy::Gate;
use crate::{Client, new_idempotency_key};

use entry::EXPIRED_REMOVED;
use entry::{ENTRY_COLUMNS, entry_of};
pub use entry::{
    Enqueued, Entry, EntryState, OutboxConfig, OutboxCounts, OutboxError, Pass, Target, counts,
    expired_entries, poison_entries,
};
use horizon::Horizon;
pub use horizon::{DEFAULT_KEY_TTL, KeyTtl, key_ttl};

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
    /// The server's idempotency key TTL, which bounds how long entries are resent.
    horizon: Horizon,
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
        let horizon = Horizon::load(&db, config.horizon_margin).await?;
        Ok(Self {
            inner: Arc::new(Inner {
                db,
                client: client.single_attempt(),
                gate,
                config,
                horizon,
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

    /// One delivery pass at time `now` (Unix ms): removes terminal entries past
    /// their retention, learns the server's key TTL when due (only when something
    /// is to be sent), marks entries past the horizon `EXPIRED`, then makes one
    /// attempt for the head of every lane that is due, lanes in parallel.
    pub async fn dispatch_due(&self, now: i64) -> Result<Pass, OutboxError> {
        let inner = &self.inner;
        self.prune(now).await?;
        let mut heads = self.due_heads(now).await?;
        if !heads.is_empty() && inner.horizon.due(now) {
            inner.horizon.learn(&inner.db, &inner.client, now).await;
        }
        let cutoff = inner.horizon.cutoff(now);
        let mut pass = Pass {
            expired: self.expire(now, cutoff).await?,
            ..Pass::default()
        };
        if pass.expired > 0 {
            heads = self.due_heads(now).await?;
        }
        let mut attempts = futures::stream::iter(heads)
            .map(|head| self.attempt(head, now, cutoff))
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
    /// entry as it is then (`None` if it is no longer in the file).
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

    /// The server's idempotency key TTL this outbox goes by.
    pub fn key_ttl(&self) -> KeyTtl {
        self.inner.horizon.known()
    }

    /// Marks open entries first tried at or before `cutoff` (past the horizon)
    /// `EXPIRED`, with the reason and the last error they had. Never deletes.
    async fn expire(&self, now: i64, cutoff: i64) -> Result<u64, OutboxError> {
        let db = &self.inner.db;
        let expired = sqlx::query(
            "UPDATE outbox SET state = 'expired', updated_at = ?, \
             last_error = ? || COALESCE(' (last error: ' || last_error || ')', '') \
             WHERE state IN ('queued', 'retryable') AND first_attempt_at <= ?",
        )
        .bind(now)
        .bind(self.inner.horizon.reason())
        .bind(cutoff)
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?
        .rows_affected();
        if expired > 0 {
            tracing::warn!(
                expired,
                "outbox entries not sent within the server's idempotency window are EXPIRED, \
                 not resent; see `switchboard agent status`"
            );
        }
        Ok(expired)
    }

    /// Removes terminal entries past their retention: sent, poison, and expired
    /// (whose removal is counted).
    async fn prune(&self, now: i64) -> Result<(), OutboxError> {
        let (db, config) = (&self.inner.db, &self.inner.config);
        sqlx::query(
            "DELETE FROM outbox WHERE (state = 'sent' AND updated_at <= ?) \
             OR (state = 'poison' AND updated_at <= ?)",
        )
        .bind(now - ms(config.sent_retention))
        .bind(now - ms(config.poison_retention))
        .execute(db.pool())
        .await
        .map_err(|e| db.error(e))?;
        let removed = sqlx::query("DELETE FROM outbox WHERE state = 'expired' AND updated_at <= ?")
            .bind(now - ms(config.expired_retention))
            .execute(db.pool())
            .await
            .map_err(|e| db.error(e))?
            .rows_affected();
        if removed > 0 {
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO counters (name, value) VALUES ('{EXPIRED_REMOVED}', ?) \
                 ON CONFLICT (name) DO UPDATE SET value = value + excluded.value"
            )))
            .bind(i64::try_from(removed).unwrap_or(i64::MAX))
            .execute(db.pool())
            .await
            .map_err(|e| db.error(e))?;
        }
        Ok(())
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
