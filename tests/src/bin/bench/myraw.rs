//! The MariaDB / MySQL W2 limit: the store's claim and ack SQL, run by a raw sqlx
//! loop with no HTTP, no auth and no row decoding beyond what the ack needs.
//!
//! Same transactions and statements as `MySqlStore` (the engine's portable shapes
//! over `store/statements/`, in their MySQL spelling): a claim is one transaction
//! (reap this agent's expired leases; select the claimable ids `FOR UPDATE SKIP
//! LOCKED`; per id the update and the read-back; the last-seen update); an ack of
//! a claim batch is one transaction (per entry the conditional update and the
//! read-back). A claim and an ack are steps in the event row, no history row. The pool has the store's size and
//! session settings, but skips the store's `test_before_acquire` ping.
//!
//! The statements are copied from `crates/store/src/statements/` (`inbox.rs`,
//! `maintenance.rs`) as `dialect.rs` renders them for MySQL, with
//! `store/rows.rs`'s column lists expanded; keep them in step when those change.

use crate::drain::Queues;
use crate::server::now_ms;
use anyhow::{Context, Result, ensure};
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Executor, MySqlPool};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Claim, step 1 (`expired_leases` for one agent): none expire here (60 s leases).
const REAP_LEASES: &str = "SELECT id, tenant_id, agent_id, seq, attempts, max_attempts, \
     last_error FROM events FORCE INDEX (events_claim) WHERE status = 'claimed' \
     AND lease_expires_at <= ? AND agent_id = ? ORDER BY lease_expires_at LIMIT ? \
     FOR UPDATE SKIP LOCKED";
const REAP_BATCH: i64 = 1_000;

/// Claim, step 2 (`claimable`).
const CLAIMABLE: &str = "SELECT id FROM events FORCE INDEX (events_claim) \
     WHERE agent_id = ? AND status = 'pending' AND available_at <= ? \
     AND (expires_at IS NULL OR expires_at > ?) ORDER BY priority DESC, seq LIMIT ? \
     FOR UPDATE SKIP LOCKED";

/// Claim, step 3 per id (`take_claim`).
const TAKE: &str = "UPDATE events SET status = 'claimed', attempts = attempts + 1, \
     claim_token = ?, lease_expires_at = ?, updated_at = ?, claimed_at = ?, claimed_by = ? \
     WHERE id = ?";
const READ_EVENT: &str = "SELECT id, agent_id, seq, sender_agent_id, sender_name, room_id, \
     room_seq, correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
     available_at, expires_at, last_error, lease_expires_at, claim_token FROM events WHERE id = ?";

/// Claim, step 4 (`note_seen`; MySQL writes it on every claim).
const NOTE_SEEN: &str = "UPDATE agents SET last_seen_at = ? WHERE id = ? \
     AND (last_seen_at IS NULL OR last_seen_at < ?)";

/// Ack, per entry (`complete_claim` and its read-back).
const COMPLETE: &str = "UPDATE events SET status = 'completed', payload = NULL, \
     lease_expires_at = NULL, updated_at = ?, completed_at = ? WHERE id = ? AND agent_id = ? \
     AND claim_token = ? AND status = 'claimed' AND lease_expires_at > ?";
const READ_STATE: &str =
    "SELECT id, status, attempts, lease_expires_at, available_at, seq FROM events WHERE id = ?";

const LEASE_MS: i64 = 60_000;

/// The store's session (`store/mysql/mod.rs::session`, MariaDB's limits).
const SESSION: [&str; 2] = [
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT,STRICT_ALL_TABLES,NO_ZERO_DATE,\
     NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', \
     time_zone = '+00:00', innodb_lock_wait_timeout = 5, max_statement_time = 15, \
     idle_transaction_timeout = 60",
];

/// The agents' inboxes of one database, queue `i` being agent `i`.
pub(crate) struct Inboxes {
    pub(crate) pool: MySqlPool,
    /// (agent id, history actor) per queue.
    agents: Vec<(String, String)>,
}

impl Inboxes {
    /// `agents`: (id, name) per queue.
    pub(crate) async fn open(url: &str, agents: &[(String, String)]) -> Result<Arc<Self>> {
        let opts = MySqlConnectOptions::from_str(url)?
            .pipes_as_concat(false)
            .no_engine_substitution(false)
            .timezone(None);
        let pool = MySqlPoolOptions::new()
            .max_connections(switchboard_server::Config::default().database_max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .after_connect(|conn, _| {
                Box::pin(async move {
                    for sql in SESSION {
                        conn.execute(sql).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(opts)
            .await
            .context("connecting the raw loop's pool")?;
        let agents = agents
            .iter()
            .map(|(id, name)| (id.clone(), format!("agent:{name}")))
            .collect();
        Ok(Arc::new(Self { pool, agents }))
    }
}

impl Queues for Inboxes {
    /// (event id, claim token).
    type Claimed = (String, String);

    fn count(&self) -> usize {
        self.agents.len()
    }

    async fn claim(&self, queue: usize, batch: u32) -> Result<Vec<Self::Claimed>> {
        let mut tx = self.pool.begin().await?;
        let claimed = self.claim_in(&mut tx, queue, batch).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    async fn ack(&self, queue: usize, claimed: Vec<Self::Claimed>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        self.ack_in(&mut tx, queue, &claimed).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The server's ack with a claim: both in one transaction.
    async fn ack_and_claim(
        &self,
        queue: usize,
        claimed: Vec<Self::Claimed>,
        batch: u32,
    ) -> Result<Vec<Self::Claimed>> {
        let mut tx = self.pool.begin().await?;
        self.ack_in(&mut tx, queue, &claimed).await?;
        let claimed = self.claim_in(&mut tx, queue, batch).await?;
        tx.commit().await?;
        Ok(claimed)
    }
}

impl Inboxes {
    /// A claim's statements in the caller's transaction.
    async fn claim_in(
        &self,
        tx: &mut sqlx::MySqlConnection,
        queue: usize,
        batch: u32,
    ) -> Result<Vec<(String, String)>> {
        let (agent, actor) = &self.agents[queue];
        let now = now_ms();
        let reaped = sqlx::query(REAP_LEASES)
            .bind(now)
            .bind(agent)
            .bind(REAP_BATCH)
            .fetch_all(&mut *tx)
            .await?;
        ensure!(reaped.is_empty(), "a 60 s lease expired during the bench");
        let ids: Vec<String> = sqlx::query_scalar(CLAIMABLE)
            .bind(agent)
            .bind(now)
            .bind(now)
            .bind(i64::from(batch))
            .fetch_all(&mut *tx)
            .await?;
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            let token = uuid::Uuid::new_v4().to_string();
            sqlx::query(TAKE)
                .bind(&token)
                .bind(now + LEASE_MS)
                .bind(now)
                .bind(now)
                .bind(actor)
                .bind(&id)
                .execute(&mut *tx)
                .await?;
            sqlx::query(READ_EVENT)
                .bind(&id)
                .fetch_one(&mut *tx)
                .await?;
            claimed.push((id, token));
        }
        sqlx::query(NOTE_SEEN)
            .bind(now)
            .bind(agent)
            .bind(i64::MAX)
            .execute(&mut *tx)
            .await?;
        Ok(claimed)
    }

    /// An ack batch's statements in the caller's transaction.
    async fn ack_in(
        &self,
        tx: &mut sqlx::MySqlConnection,
        queue: usize,
        claimed: &[(String, String)],
    ) -> Result<()> {
        let (agent, _) = &self.agents[queue];
        let now = now_ms();
        for (id, token) in claimed {
            let done = sqlx::query(COMPLETE)
                .bind(now)
                .bind(now)
                .bind(id)
                .bind(agent)
                .bind(token)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            ensure!(done.rows_affected() == 1, "an ack was refused");
            sqlx::query(READ_STATE).bind(id).fetch_one(&mut *tx).await?;
        }
        Ok(())
    }
}
