//! The PostgreSQL W2 limit: the store's claim and ack SQL, run by a raw sqlx loop
//! with no HTTP, no auth and no row decoding beyond what the ack needs.
//!
//! Same transactions as `PgStore`: a claim is one transaction (reap this agent's
//! expired leases, then the claiming CTE) followed by the autocommitted last-seen
//! update; an ack is one autocommitted statement. The pool has the store's size
//! (`Config::default().database_max_connections`) and session settings, but skips
//! the store's `test_before_acquire` ping.
//!
//! The statements are copied verbatim from `crates/store/src/postgres/`
//! (`inbox.rs` claim and ack; `maintenance.rs` return_expired_leases, with
//! `engine/maintenance.rs`'s BATCH and scavenger's actor and `engine/inbox.rs`'s
//! QUARANTINES; `store/rows.rs` EVENT_COLS and STATE_COLS expanded); keep them in
//! step when those change.

use crate::drain::Queues;
use crate::server::now_ms;
use anyhow::{Context, Result, ensure};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Claim, step 1 (`return_expired_leases` for one agent): expired leases go back
/// to pending (none expire here: leases are 60 s), their claim steps moved into
/// history rows before their own (`postgres/timeline.rs` `moved_then` expanded). `$1`
/// now, `$2` the agent.
const REAP_LEASES: &str = "WITH o AS (SELECT id, claimed_at, claimed_by, attempts, \
         max_attempts, completed_at FROM events \
       WHERE status = 'claimed' AND lease_expires_at <= $1 \
         AND ($2::text IS NULL OR agent_id = $2) ORDER BY lease_expires_at LIMIT $3 \
         FOR UPDATE SKIP LOCKED), \
     r AS ( \
       UPDATE events SET \
         status = CASE WHEN attempts >= max_attempts THEN 'quarantined' ELSE 'pending' END, \
         available_at = lease_expires_at, \
         claim_token = NULL, lease_expires_at = NULL, updated_at = $1, \
         claimed_at = NULL, completed_at = NULL, \
         last_error = 'lease expired on attempt ' || attempts || ' of ' || max_attempts \
           || COALESCE(' (last error: ' || last_error || ')', '') \
       WHERE id IN (SELECT id FROM o) \
       RETURNING id, tenant_id, agent_id, seq, status, attempts), \
     h AS (INSERT INTO event_history (event_id, at, action, actor, detail) \
       SELECT event_id, at, action, actor, detail FROM ( \
         SELECT id AS event_id, claimed_at AS at, 'claimed' AS action, claimed_by AS actor, \
           'attempt ' || attempts || ' of ' || max_attempts AS detail, 1 AS k FROM o \
           WHERE claimed_at IS NOT NULL \
         UNION ALL SELECT id, completed_at, 'acked', claimed_by, NULL, 2 FROM o \
           WHERE completed_at IS NOT NULL \
         UNION ALL SELECT event_id, at, action, actor, detail, 3 FROM ( \
           SELECT id AS event_id, $1 AS at, \
             CASE WHEN status = 'quarantined' THEN 'quarantined' ELSE 'lease_expired' END \
               AS action, \
             $4 AS actor, CASE WHEN status = 'quarantined' \
               THEN 'lease expired on attempt ' || attempts || '; attempts exhausted' \
               ELSE 'attempt ' || attempts END AS detail FROM r) AS own \
       ) AS s ORDER BY k) \
     SELECT tenant_id, agent_id, seq, status FROM r";
const REAP_BATCH: i64 = 1_000;
const SCAVENGER: &str = "system:scavenger";

/// Claim, step 2: take up to `$4` pending events under new tokens and a lease until
/// `$3`, the claim a step in each row. `$1` agent, `$2` now, `$5` actor.
const CLAIM: &str = "WITH c AS ( \
       UPDATE events SET status = 'claimed', attempts = attempts + 1, \
         claim_token = gen_random_uuid()::text, lease_expires_at = $3, updated_at = $2, \
         claimed_at = $2, claimed_by = $5 \
       WHERE id IN ( \
         SELECT id FROM events WHERE agent_id = $1 AND status = 'pending' \
           AND available_at <= $2 AND (expires_at IS NULL OR expires_at > $2) \
         ORDER BY priority DESC, seq LIMIT $4 FOR UPDATE SKIP LOCKED) \
       RETURNING id, agent_id, seq, sender_agent_id, sender_name, room_id, room_seq, \
         correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
         available_at, expires_at, last_error, lease_expires_at, claim_token) \
     SELECT * FROM c ORDER BY priority DESC, seq";

/// Claim, in its transaction: last seen, at most once a second.
const TOUCH_AGENT: &str = "UPDATE agents SET last_seen_at = $1 WHERE id = $2 \
     AND (last_seen_at IS NULL OR last_seen_at < $1 - 1000)";

/// Ack a claim batch: complete each event whose token is current and lease running,
/// the ack a step in its row. `$1` now, `$2` event ids, `$3` tokens, `$4` agent.
const ACK: &str = "UPDATE events e SET status = 'completed', payload = NULL, \
       lease_expires_at = NULL, updated_at = $1, completed_at = $1 \
       FROM UNNEST($2::text[], $3::text[]) AS x(id, token) \
       WHERE e.id = x.id AND e.agent_id = $4 AND e.claim_token = x.token \
         AND e.status = 'claimed' AND e.lease_expires_at > $1 \
       RETURNING e.id, e.status, e.attempts, e.lease_expires_at, e.available_at";

const LEASE_MS: i64 = 60_000;

/// The store's session settings (`PgStore::open`).
const SESSION: [(&str, &str); 2] = [
    ("statement_timeout", "15s"),
    ("idle_in_transaction_session_timeout", "60s"),
];

/// The agents' inboxes of one database, queue `i` being agent `i`.
pub(crate) struct Inboxes {
    pub(crate) pool: PgPool,
    /// (agent id, history actor) per queue.
    agents: Vec<(String, String)>,
}

impl Inboxes {
    /// `agents`: (id, name) per queue.
    pub(crate) async fn open(url: &str, agents: &[(String, String)]) -> Result<Arc<Self>> {
        let pool = pool(url).await?;
        let agents = agents
            .iter()
            .map(|(id, name)| (id.clone(), format!("agent:{name}")))
            .collect();
        Ok(Arc::new(Self { pool, agents }))
    }
}

/// A pool with the store's size and session settings.
pub(crate) async fn pool(url: &str) -> Result<PgPool> {
    let opts = PgConnectOptions::from_str(url)?
        .application_name("switchboard-bench")
        .options(SESSION);
    PgPoolOptions::new()
        .max_connections(switchboard_server::Config::default().database_max_connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(opts)
        .await
        .context("connecting the raw loop's pool")
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
        let mut conn = self.pool.acquire().await?;
        self.ack_in(&mut conn, queue, claimed).await
    }

    /// The server's ack with a claim: both in one transaction.
    async fn ack_and_claim(
        &self,
        queue: usize,
        claimed: Vec<Self::Claimed>,
        batch: u32,
    ) -> Result<Vec<Self::Claimed>> {
        let mut tx = self.pool.begin().await?;
        self.ack_in(&mut tx, queue, claimed).await?;
        let claimed = self.claim_in(&mut tx, queue, batch).await?;
        tx.commit().await?;
        Ok(claimed)
    }
}

impl Inboxes {
    /// A claim's statements on `conn` (in the caller's transaction).
    async fn claim_in(
        &self,
        conn: &mut sqlx::PgConnection,
        queue: usize,
        batch: u32,
    ) -> Result<Vec<(String, String)>> {
        let (agent, actor) = &self.agents[queue];
        let now = now_ms();
        let reaped = sqlx::query(REAP_LEASES)
            .bind(now)
            .bind(agent)
            .bind(REAP_BATCH)
            .bind(SCAVENGER)
            .fetch_all(&mut *conn)
            .await?;
        ensure!(reaped.is_empty(), "a 60 s lease expired during the bench");
        let rows = sqlx::query(CLAIM)
            .bind(agent)
            .bind(now)
            .bind(now + LEASE_MS)
            .bind(i64::from(batch))
            .bind(actor)
            .fetch_all(&mut *conn)
            .await?;
        sqlx::query(TOUCH_AGENT)
            .bind(now)
            .bind(agent)
            .execute(&mut *conn)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("id")?, row.try_get("claim_token")?)))
            .collect()
    }

    /// The ack statement on `conn` (autocommitted, or in the caller's transaction).
    async fn ack_in(
        &self,
        conn: &mut sqlx::PgConnection,
        queue: usize,
        claimed: Vec<(String, String)>,
    ) -> Result<()> {
        let (agent, _) = &self.agents[queue];
        let (ids, tokens): (Vec<String>, Vec<String>) = claimed.into_iter().unzip();
        let rows = sqlx::query(ACK)
            .bind(now_ms())
            .bind(&ids)
            .bind(&tokens)
            .bind(agent)
            .fetch_all(&mut *conn)
            .await?;
        ensure!(
            rows.len() == ids.len(),
            "{} of {} acks were refused",
            ids.len() - rows.len(),
            ids.len()
        );
        Ok(())
    }
}
