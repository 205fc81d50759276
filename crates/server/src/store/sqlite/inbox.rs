//! The agent's inbox: poll by cursor, claim under a lease, ack, release, extend.

use super::{SqliteStore, background, history};
use crate::clock::{Millis, to_timestamp};
use crate::store::rows::*;
use crate::store::*;
use sqlx::AssertSqlSafe;
use sqlx::Row;
use switchboard_proto::EventStatus;

pub(super) async fn poll(
    store: &SqliteStore,
    agent: AgentId,
    after: u64,
    limit: u32,
) -> StoreResult<InboxPage> {
    // One read transaction: the low-water mark and the page come from one snapshot.
    let mut tx = store.read().begin().await?;
    let row = sqlx::query("SELECT head_seq, low_water FROM agents WHERE id = ?")
        .bind(agent.to_string())
        .fetch_one(&mut *tx)
        .await?;
    let head = row.try_get::<i64, _>(0)? as u64;
    let low_water = row.try_get::<i64, _>(1)? as u64;
    check_cursor(after, head, low_water)?;
    let rows = sqlx::query(AssertSqlSafe(format!(
        "SELECT {EVENT_COLS} FROM events WHERE agent_id = ? AND seq > ? ORDER BY seq LIMIT ?"
    )))
    .bind(agent.to_string())
    .bind(after as i64)
    .bind(i64::from(limit) + 1)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    inbox_page(&rows, after, limit)
}

pub(super) async fn claim(
    store: &SqliteStore,
    agent: &AgentRecord,
    limit: u32,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<Claimed> {
    let mut tx = store.begin_write().await?;
    // Expired leases of this agent are claimable again now, not at the next scavenger
    // pass (as with SQS's visibility timeout).
    let reaped = background::reap_leases(&mut tx, now, Some(agent.id)).await?;
    let ids: Vec<String> = sqlx::query(
        "SELECT id FROM events WHERE agent_id = ? AND status = 'pending' AND available_at <= ? \
         AND (expires_at IS NULL OR expires_at > ?) ORDER BY priority DESC, seq LIMIT ?",
    )
    .bind(agent.id.to_string())
    .bind(now)
    .bind(now)
    .bind(i64::from(limit))
    .fetch_all(&mut *tx)
    .await?
    .iter()
    .map(|r| r.try_get(0))
    .collect::<Result<_, _>>()?;
    let actor = agent.actor();
    let lease_until = now + lease_ms;
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        let token = ClaimToken::new();
        let row = sqlx::query(AssertSqlSafe(format!(
            "UPDATE events SET status = 'claimed', attempts = attempts + 1, claim_token = ?, \
             lease_expires_at = ?, updated_at = ? WHERE id = ? RETURNING {EVENT_COLS}"
        )))
        .bind(token.to_string())
        .bind(lease_until)
        .bind(now)
        .bind(&id)
        .fetch_one(&mut *tx)
        .await?;
        let event = event_from_row(&row)?;
        history(
            &mut tx,
            &id,
            now,
            "claimed",
            &actor,
            Some(format!(
                "attempt {} of {}",
                event.attempts, event.max_attempts
            )),
        )
        .await?;
        claimed.push(ClaimedEvent {
            event,
            claim_token: token,
            lease_expires_at: to_timestamp(lease_until),
        });
    }
    sqlx::query("UPDATE agents SET last_seen_at = ? WHERE id = ?")
        .bind(now)
        .bind(agent.id.to_string())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Claimed {
        events: claimed,
        reaped,
    })
}

/// Explains why a token was refused: the event is gone (404) or the claim is stale.
async fn refuse(
    conn: &mut sqlx::SqliteConnection,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreError {
    let row = sqlx::query(
        "SELECT status, claim_token, lease_expires_at FROM events WHERE id = ? AND agent_id = ?",
    )
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .fetch_optional(conn)
    .await;
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => return StoreError::NotFound,
        Err(e) => return e.into(),
    };
    stale_claim(event, token, &row, now)
}

pub(super) async fn ack(
    store: &SqliteStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreResult<Acked> {
    let mut tx = store.begin_write().await?;
    let acked = ack_in(&mut tx, agent, event, token, now).await?;
    tx.commit().await?;
    Ok(acked)
}

/// Acks a batch in one transaction (one commit, one fsync): each entry's result as
/// [`ack`] would give it. A database error fails the whole batch, and nothing of it
/// is kept; acks are idempotent, so the caller may send the batch again.
pub(super) async fn ack_batch(
    store: &SqliteStore,
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    now: Millis,
) -> StoreResult<Vec<StoreResult<Acked>>> {
    let mut tx = store.begin_write().await?;
    let mut results = Vec::with_capacity(entries.len());
    for &(event, token) in entries {
        match ack_in(&mut tx, agent, event, token, now).await {
            Err(e @ (StoreError::Unavailable(_) | StoreError::Database(_))) => return Err(e),
            result => results.push(result),
        }
    }
    tx.commit().await?;
    Ok(results)
}

/// One ack inside the caller's write transaction. A refusal writes nothing.
async fn ack_in(
    conn: &mut sqlx::SqliteConnection,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreResult<Acked> {
    // The claim token stays on a completed event, so a retried ack of the same claim
    // (its answer was lost) succeeds again instead of reporting a stale claim.
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE events SET status = 'completed', payload = NULL, lease_expires_at = NULL, \
         updated_at = ? WHERE id = ? AND agent_id = ? AND claim_token = ? \
         AND status = 'claimed' AND lease_expires_at > ? RETURNING {STATE_COLS}"
    )))
    .bind(now)
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        let repeat = sqlx::query(AssertSqlSafe(format!(
            "SELECT {STATE_COLS} FROM events WHERE id = ? AND agent_id = ? AND claim_token = ? \
             AND status = 'completed'"
        )))
        .bind(event.to_string())
        .bind(agent.id.to_string())
        .bind(token.to_string())
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(row) = repeat {
            return Ok(Acked {
                state: state_from_row(&row)?,
                latency_ms: None,
            });
        }
        return Err(refuse(conn, agent, event, token, now).await);
    };
    let state = state_from_row(&row)?;
    history(conn, &event.to_string(), now, "acked", &agent.actor(), None).await?;
    let latency_ms = now - crate::clock::from_timestamp(state.available_at);
    Ok(Acked {
        state,
        latency_ms: Some(latency_ms),
    })
}

pub(super) async fn release(
    store: &SqliteStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    args: &ReleaseArgs,
    now: Millis,
) -> StoreResult<Committed<EventState>> {
    let mut tx = store.begin_write().await?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE events SET \
           status = CASE WHEN ? OR attempts >= max_attempts THEN 'quarantined' ELSE 'pending' END, \
           claim_token = NULL, lease_expires_at = NULL, available_at = ?, \
           last_error = COALESCE(?, last_error), updated_at = ? \
         WHERE id = ? AND agent_id = ? AND claim_token = ? AND status = 'claimed' \
           AND lease_expires_at > ? RETURNING {STATE_COLS}, seq"
    )))
    .bind(args.terminal)
    .bind(now + args.delay_ms)
    .bind(&args.error)
    .bind(now)
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(refuse(&mut tx, agent, event, token, now).await);
    };
    let state = state_from_row(&row)?;
    let seq = row.try_get::<i64, _>("seq")? as u64;
    let action = if state.status == EventStatus::Quarantined {
        "quarantined"
    } else {
        "released"
    };
    let detail = release_detail(&args.error, args.terminal);
    history(
        &mut tx,
        &event.to_string(),
        now,
        action,
        &agent.actor(),
        detail,
    )
    .await?;
    tx.commit().await?;
    let wakes = if state.status == EventStatus::Pending {
        vec![agent.wake(seq)]
    } else {
        Vec::new()
    };
    Ok(Committed {
        value: state,
        wakes,
    })
}

pub(super) async fn extend(
    store: &SqliteStore,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<EventState> {
    let mut tx = store.begin_write().await?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "UPDATE events SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND agent_id = ? \
         AND claim_token = ? AND status = 'claimed' AND lease_expires_at > ? RETURNING {STATE_COLS}"
    )))
    .bind(now + lease_ms)
    .bind(now)
    .bind(event.to_string())
    .bind(agent.id.to_string())
    .bind(token.to_string())
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(refuse(&mut tx, agent, event, token, now).await);
    };
    tx.commit().await?;
    state_from_row(&row)
}

pub(super) async fn snapshot(
    store: &SqliteStore,
    agent: &AgentRecord,
    now: Millis,
) -> StoreResult<Snapshot> {
    let mut tx = store.read().begin().await?;
    let row = sqlx::query("SELECT head_seq, low_water FROM agents WHERE id = ?")
        .bind(agent.id.to_string())
        .fetch_one(&mut *tx)
        .await?;
    let head = row.try_get::<i64, _>(0)? as u64;
    let low_water = row.try_get::<i64, _>(1)? as u64;
    let counts = crate::store::engine::directory::DirectoryStatements::status_counts(
        store, &mut tx, agent.id,
    )
    .await?;
    let first_open: Option<i64> = sqlx::query(AssertSqlSafe(format!(
        "SELECT MIN(seq) FROM events WHERE agent_id = ? AND status IN {OPEN_STATUSES}"
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
