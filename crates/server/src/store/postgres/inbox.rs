//! The agent's inbox: poll by cursor, claim under a lease, ack, release, extend.
//!
//! Claim and ack are one statement each (a CTE writes the history rows too), so a
//! drain costs one commit per claim batch plus one per ack.

use super::{PgStore, background};
use crate::clock::{Millis, to_timestamp};
use crate::store::rows::*;
use crate::store::*;
use sqlx::{AssertSqlSafe, PgConnection, Row};
use switchboard_proto::EventStatus;

/// Reads see one snapshot: the low-water mark and the page agree.
const READ_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY";

/// The agent's head and low-water mark, for a cursor read.
async fn marks(conn: &mut PgConnection, agent: AgentId) -> StoreResult<(u64, u64)> {
    let row = sqlx::query("SELECT head_seq, low_water FROM agents WHERE id = $1")
        .bind(agent.to_string())
        .fetch_one(conn)
        .await?;
    Ok((
        row.try_get::<i64, _>(0)? as u64,
        row.try_get::<i64, _>(1)? as u64,
    ))
}

pub(super) async fn poll(
    store: &PgStore,
    agent: AgentId,
    after: u64,
    limit: u32,
) -> StoreResult<InboxPage> {
    let mut tx = store.pool().begin_with(READ_SNAPSHOT).await?;
    let (head, low_water) = marks(&mut tx, agent).await?;
    check_cursor(after, head, low_water)?;
    // Sequence numbers are allocated under the agent's row lock, so every event up
    // to `head` in this snapshot is committed: no gap can fill in behind the page.
    let rows = sqlx::query(AssertSqlSafe(format!(
        "SELECT {EVENT_COLS} FROM events WHERE agent_id = $1 AND seq > $2 AND seq <= $3 \
         ORDER BY seq LIMIT $4"
    )))
    .bind(agent.to_string())
    .bind(after as i64)
    .bind(head as i64)
    .bind(i64::from(limit) + 1)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    inbox_page(&rows, after, limit)
}

pub(super) async fn claim(
    store: &PgStore,
    agent: &AgentRecord,
    limit: u32,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<Claimed> {
    let mut tx = store.begin().await?;
    // Expired leases of this agent are claimable again now, not at the next scavenger
    // pass (as with SQS's visibility timeout).
    let reaped = background::reap_leases(&mut tx, now, Some(agent.id)).await?;
    // SKIP LOCKED: concurrent claimers (on any instance) take different rows
    // instead of waiting for each other. The tokens are random (v4).
    let rows = sqlx::query(AssertSqlSafe(format!(
        "WITH c AS ( \
           UPDATE events SET status = 'claimed', attempts = attempts + 1, \
             claim_token = gen_random_uuid()::text, lease_expires_at = $3, updated_at = $2 \
           WHERE id IN ( \
             SELECT id FROM events WHERE agent_id = $1 AND status = 'pending' \
               AND available_at <= $2 AND (expires_at IS NULL OR expires_at > $2) \
             ORDER BY priority DESC, seq LIMIT $4 FOR UPDATE SKIP LOCKED) \
           RETURNING {EVENT_COLS}), \
         h AS (INSERT INTO event_history (event_id, at, action, actor, detail) \
           SELECT id, $2, 'claimed', $5, 'attempt ' || attempts || ' of ' || max_attempts FROM c) \
         SELECT * FROM c ORDER BY priority DESC, seq"
    )))
    .bind(agent.id.to_string())
    .bind(now)
    .bind(now + lease_ms)
    .bind(i64::from(limit))
    .bind(agent.actor().to_string())
    .fetch_all(&mut *tx)
    .await?;
    // Last seen, at most once a second: a row rewrite per claim would be a dead
    // tuple per claim. In the claim's transaction, so it costs no commit of its own.
    sqlx::query(
        "UPDATE agents SET last_seen_at = $1 WHERE id = $2 \
         AND (last_seen_at IS NULL OR last_seen_at < $1 - 1000)",
    )
    .bind(now)
    .bind(agent.id.to_string())
    .execute(&mut *tx)
    .await?;
    let wakes = reaped.wakes.clone();
    store.commit(tx, &wakes).await?;
    let lease_expires_at = to_timestamp(now + lease_ms);
    let events = rows
        .iter()
        .map(|row| {
            Ok(ClaimedEvent {
                event: event_from_row(row)?,
                claim_token: parse_id(&row.try_get::<String, _>("claim_token")?)?,
                lease_expires_at,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(Claimed { events, reaped })
}

/// Explains why a token was refused: the event is gone (404) or the claim is stale.
async fn refuse(
    store: &PgStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreError {
    let row = sqlx::query(
        "SELECT status, claim_token, lease_expires_at FROM events WHERE id = $1 AND agent_id = $2",
    )
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .fetch_optional(store.pool())
    .await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => return StoreError::NotFound,
        Err(e) => return e.into(),
    };
    stale_claim(event, token, &row, now)
}

/// The condition that a claim token is current and its lease running: `$2` event,
/// `$3` agent, `$4` token, `$1` now.
const HOLDS: &str = "id = $2 AND agent_id = $3 AND claim_token = $4 AND status = 'claimed' \
     AND lease_expires_at > $1";

/// One ack: a batch of one (one statement, one commit). The claim token stays on a
/// completed event, so a retried ack of the same claim (its answer was lost)
/// succeeds again.
pub(super) async fn ack(
    store: &PgStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreResult<Acked> {
    ack_batch(store, agent, &[(event, token)], now)
        .await?
        .pop()
        .unwrap_or(Err(StoreError::NotFound))
}

/// Acks `entries` in one statement (one commit); entries it did not complete are
/// explained one by one, as a single ack would be (a repeat, or a refusal).
pub(super) async fn ack_batch(
    store: &PgStore,
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    now: Millis,
) -> StoreResult<Vec<StoreResult<Acked>>> {
    let ids: Vec<String> = entries.iter().map(|(e, _)| e.to_string()).collect();
    let tokens: Vec<String> = entries.iter().map(|(_, t)| t.to_string()).collect();
    let rows = sqlx::query(AssertSqlSafe(format!(
        "WITH a AS (UPDATE events e SET status = 'completed', payload = NULL, \
           lease_expires_at = NULL, updated_at = $1 \
           FROM UNNEST($2::text[], $3::text[]) AS x(id, token) \
           WHERE e.id = x.id AND e.agent_id = $4 AND e.claim_token = x.token \
             AND e.status = 'claimed' AND e.lease_expires_at > $1 \
           RETURNING e.id, e.status, e.attempts, e.lease_expires_at, e.available_at), \
         h AS (INSERT INTO event_history (event_id, at, action, actor) \
           SELECT id, $1, 'acked', $5 FROM a) \
         SELECT {STATE_COLS} FROM a"
    )))
    .bind(now)
    .bind(&ids)
    .bind(&tokens)
    .bind(agent.id.to_string())
    .bind(agent.actor().to_string())
    .fetch_all(store.pool())
    .await?;
    let mut done = std::collections::HashMap::with_capacity(rows.len());
    for row in &rows {
        let state = state_from_row(row)?;
        done.insert(state.event_id, state);
    }
    let mut results = Vec::with_capacity(entries.len());
    for &(event, token) in entries {
        results.push(match done.remove(&event) {
            Some(state) => {
                let latency_ms = now - crate::clock::from_timestamp(state.available_at);
                Ok(Acked {
                    state,
                    latency_ms: Some(latency_ms),
                })
            }
            None => match ack_missed(store, agent, event, token, now).await {
                Err(e @ (StoreError::Unavailable(_) | StoreError::Database(_))) => return Err(e),
                result => result,
            },
        });
    }
    Ok(results)
}

/// An ack that changed nothing: a repeat of one that completed the event (its
/// answer was lost), or a refusal.
async fn ack_missed(
    store: &PgStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreResult<Acked> {
    let repeat = sqlx::query(AssertSqlSafe(format!(
        "SELECT {STATE_COLS} FROM events WHERE id = $1 AND agent_id = $2 \
         AND claim_token = $3 AND status = 'completed'"
    )))
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .fetch_optional(store.pool())
    .await?;
    match repeat {
        Some(row) => Ok(Acked {
            state: state_from_row(&row)?,
            latency_ms: None,
        }),
        None => Err(refuse(store, agent, event, token, now).await),
    }
}

pub(super) async fn release(
    store: &PgStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    args: &ReleaseArgs,
    now: Millis,
) -> StoreResult<Committed<EventState>> {
    let mut tx = store.begin().await?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "WITH r AS (UPDATE events SET \
           status = CASE WHEN $5 OR attempts >= max_attempts THEN 'quarantined' ELSE 'pending' END, \
           claim_token = NULL, lease_expires_at = NULL, available_at = $6, \
           last_error = COALESCE($7, last_error), updated_at = $1 \
         WHERE {HOLDS} RETURNING {STATE_COLS}, seq), \
         h AS (INSERT INTO event_history (event_id, at, action, actor, detail) \
           SELECT id, $1, CASE WHEN status = 'quarantined' THEN 'quarantined' ELSE 'released' END, \
             $8, $9 FROM r) \
         SELECT * FROM r"
    )))
    .bind(now)
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .bind(args.terminal)
    .bind(now + args.delay_ms)
    .bind(&args.error)
    .bind(agent.actor().to_string())
    .bind(release_detail(&args.error, args.terminal))
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        drop(tx);
        return Err(refuse(store, agent, event, token, now).await);
    };
    let state = state_from_row(&row)?;
    let wakes = if state.status == EventStatus::Pending {
        vec![agent.wake(row.try_get::<i64, _>("seq")? as u64)]
    } else {
        Vec::new()
    };
    store.commit(tx, &wakes).await?;
    Ok(Committed {
        value: state,
        wakes,
    })
}

pub(super) async fn extend(
    store: &PgStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<EventState> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE events SET lease_expires_at = $5, updated_at = $1 WHERE {HOLDS} \
         RETURNING {STATE_COLS}"
    )))
    .bind(now)
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .bind(now + lease_ms)
    .fetch_optional(store.pool())
    .await?;
    match row {
        Some(row) => state_from_row(&row),
        None => Err(refuse(store, agent, event, token, now).await),
    }
}

pub(super) async fn snapshot(
    store: &PgStore,
    agent: &AgentRecord,
    now: Millis,
) -> StoreResult<Snapshot> {
    let mut tx = store.pool().begin_with(READ_SNAPSHOT).await?;
    let (head, low_water) = marks(&mut tx, agent.id).await?;
    let counts = crate::store::engine::directory::DirectoryStatements::status_counts(
        store, &mut tx, agent.id,
    )
    .await?;
    let first_open: Option<i64> = sqlx::query(AssertSqlSafe(format!(
        "SELECT MIN(seq) FROM events WHERE agent_id = $1 AND status IN {OPEN_STATUSES}"
    )))
    .bind(agent.id.to_string())
    .fetch_one(&mut *tx)
    .await?
    .try_get(0)?;
    tx.commit().await?;
    Ok(Snapshot {
        agent_id: agent.id,
        name: agent.name.clone(),
        head_cursor: head,
        oldest_cursor: low_water,
        resume_cursor: first_open.map_or(head, |s| (s as u64).saturating_sub(1).max(low_water)),
        counts,
        server_time: to_timestamp(now),
    })
}
