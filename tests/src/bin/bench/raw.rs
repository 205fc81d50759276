//! The W2 baseline: the store's claim and ack SQL, run by a raw sqlx loop with no
//! HTTP, no auth and no row decoding beyond what the next statement needs.
//!
//! It drains a copy of the same pre-loaded database as the server side, through a
//! pool of exactly one connection with the server's pragmas: WAL, synchronous FULL,
//! foreign keys on, busy timeout 10 s. Each claim, and the ack of what it claimed,
//! is one `BEGIN IMMEDIATE` transaction.
//!
//! The statements are the SQLite renderings of `crates/store/src/statements/`
//! (`inbox.rs` claimable, take_claim and complete_claim;
//! `maintenance.rs` expired_leases; `rows.rs` EVENT_COLS); keep them in step when
//! those change. A claim and an ack write no history row: their steps are columns of
//! the event row (`engine/timeline.rs`).

use crate::drain::{Drain, Queues};
use crate::server::{DB_FILE, now_ms};
use crate::w2::AGENT;
use anyhow::{Context, Result, ensure};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use switchboard_sdk::proto::AgentId;

/// Claim, step 1: the agent's expired leases, which the store then gives back one
/// by one (none expire here: leases are 60 s). `?1` now, `?2` the agent, `?3` the
/// batch.
const REAP_LEASES: &str = "SELECT id, tenant_id, agent_id, seq, attempts, max_attempts, \
    last_error FROM events WHERE status = 'claimed' AND lease_expires_at <= ?1 \
    AND agent_id = ?2 ORDER BY lease_expires_at LIMIT ?3";

/// Claim, step 2: the claimable ids, in claim order.
const SELECT_CLAIMABLE: &str = "SELECT id FROM events WHERE agent_id = ? \
    AND status = 'pending' AND available_at <= ? \
    AND (expires_at IS NULL OR expires_at > ?) ORDER BY priority DESC, seq LIMIT ?";

/// Claim, step 3, per id: take it under a new token and lease.
const CLAIM_ONE: &str = "UPDATE events SET status = 'claimed', \
    attempts = attempts + 1, claim_token = ?, lease_expires_at = ?, updated_at = ?, \
    claimed_at = ?, claimed_by = ? WHERE id = ? RETURNING id, agent_id, seq, sender_agent_id, sender_name, room_id, \
    room_seq, correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
    available_at, expires_at, last_error, lease_expires_at, claim_token";

/// Claim, last step: the agent was seen.
const TOUCH_AGENT: &str = "UPDATE agents SET last_seen_at = ? WHERE id = ?";

/// Ack: complete the event if the token is current and the lease unexpired.
const ACK: &str = "UPDATE events SET status = 'completed', payload = NULL, \
    lease_expires_at = NULL, updated_at = ?, completed_at = ? WHERE id = ? AND agent_id = ? \
    AND claim_token = ? AND status = 'claimed' AND lease_expires_at > ? \
    RETURNING id, status, attempts, lease_expires_at, available_at";

const LEASE_MS: i64 = 60_000;

/// The agent whose inbox is drained, and the writer connection.
struct Agent {
    pool: SqlitePool,
    id: String,
    /// Its history actor, as the server writes it.
    actor: String,
}

impl Queues for Agent {
    /// (event id, claim token).
    type Claimed = (String, String);

    fn count(&self) -> usize {
        1
    }

    async fn claim(&self, _queue: usize, batch: u32) -> Result<Vec<Self::Claimed>> {
        claim(&self.pool, self, batch).await
    }

    /// All of a claim's events in one transaction, as the SQLite server's batch
    /// ack does.
    async fn ack(&self, _queue: usize, claimed: Vec<Self::Claimed>) -> Result<()> {
        ack(&self.pool, self, &claimed).await
    }

    /// The server's ack with a claim: both in one transaction.
    async fn ack_and_claim(
        &self,
        _queue: usize,
        claimed: Vec<Self::Claimed>,
        batch: u32,
    ) -> Result<Vec<Self::Claimed>> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        ack_in(&mut tx, self, &claimed).await?;
        let claimed = claim_in(&mut tx, self, batch).await?;
        tx.commit().await?;
        Ok(claimed)
    }
}

/// Drains the database `DB_FILE` in `dir` (a copy of the pre-loaded template) with
/// `consumers` concurrent loops over the single writer connection.
pub(crate) async fn drain(
    dir: &Path,
    agent: AgentId,
    batch: u32,
    consumers: usize,
    expected: usize,
) -> Result<Drain> {
    let url = format!("sqlite://{}", dir.join(DB_FILE).display());
    let pool = writer(&url).await?;
    let agent = Arc::new(Agent {
        pool: pool.clone(),
        id: agent.to_string(),
        actor: format!("agent:{AGENT}"),
    });
    let drain = crate::drain::run(agent, consumers, batch, expected).await;
    pool.close().await;
    drain
}

/// One connection with the server's pragmas (see `SqliteStore::open`).
pub(crate) async fn writer(url: &str) -> Result<SqlitePool> {
    let opts = SqliteConnectOptions::from_str(url)?
        .create_if_missing(false)
        .foreign_keys(true)
        .busy_timeout(Duration::from_secs(10))
        .synchronous(SqliteSynchronous::Full)
        .journal_mode(SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(opts)
        .await
        .context("opening the raw writer connection")?;
    Ok(pool)
}

/// One claim transaction: up to `limit` (id, claim token) pairs.
async fn claim(pool: &SqlitePool, agent: &Agent, limit: u32) -> Result<Vec<(String, String)>> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let claimed = claim_in(&mut tx, agent, limit).await?;
    tx.commit().await?;
    Ok(claimed)
}

/// A claim's statements in the caller's transaction.
async fn claim_in(
    tx: &mut sqlx::SqliteConnection,
    agent: &Agent,
    limit: u32,
) -> Result<Vec<(String, String)>> {
    let now = now_ms();
    let reaped = sqlx::query(REAP_LEASES)
        .bind(now)
        .bind(&agent.id)
        .bind(1_000_i64)
        .fetch_all(&mut *tx)
        .await?;
    ensure!(reaped.is_empty(), "a 60 s lease expired during the bench");
    let ids: Vec<String> = sqlx::query_scalar(SELECT_CLAIMABLE)
        .bind(&agent.id)
        .bind(now)
        .bind(now)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        let token = uuid::Uuid::now_v7().to_string();
        sqlx::query(CLAIM_ONE)
            .bind(&token)
            .bind(now + LEASE_MS)
            .bind(now)
            .bind(now)
            .bind(&agent.actor)
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
        claimed.push((id, token));
    }
    sqlx::query(TOUCH_AGENT)
        .bind(now)
        .bind(&agent.id)
        .execute(&mut *tx)
        .await?;
    Ok(claimed)
}

/// One ack transaction for `claimed` (id, claim token) events.
async fn ack(pool: &SqlitePool, agent: &Agent, claimed: &[(String, String)]) -> Result<()> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    ack_in(&mut tx, agent, claimed).await?;
    tx.commit().await?;
    Ok(())
}

/// An ack batch's statements in the caller's transaction.
async fn ack_in(
    tx: &mut sqlx::SqliteConnection,
    agent: &Agent,
    claimed: &[(String, String)],
) -> Result<()> {
    let now = now_ms();
    for (id, token) in claimed {
        let row = sqlx::query(ACK)
            .bind(now)
            .bind(now)
            .bind(id)
            .bind(&agent.id)
            .bind(token)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        ensure!(row.is_some(), "ack of {id} was refused");
    }
    Ok(())
}
