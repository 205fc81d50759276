//! Row mapping shared by the SQLite modules.

use crate::clock::{Millis, to_timestamp};
use crate::store::{Actor, AgentRecord, StoreError, StoreResult};
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};
use std::str::FromStr;
use switchboard_proto::{EventStatus, InboxEvent, Sender};

/// The columns `event_from_row` reads, in a SELECT or a RETURNING clause.
pub(crate) const EVENT_COLS: &str = "id, agent_id, seq, sender_agent_id, sender_name, room_id, \
     room_seq, correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
     available_at, expires_at, last_error, lease_expires_at, claim_token";

pub(crate) fn parse_id<T: FromStr>(s: &str) -> StoreResult<T> {
    T::from_str(s).map_err(|_| {
        StoreError::Database(sqlx::Error::Decode(
            format!("stored id {s:?} is not a UUID").into(),
        ))
    })
}

pub(crate) fn agent_from_row(row: &SqliteRow) -> StoreResult<AgentRecord> {
    Ok(AgentRecord {
        id: parse_id(&row.try_get::<String, _>("id")?)?,
        tenant_id: parse_id(&row.try_get::<String, _>("tenant_id")?)?,
        name: row.try_get("name")?,
        head_seq: row.try_get::<i64, _>("head_seq")? as u64,
        low_water: row.try_get::<i64, _>("low_water")? as u64,
        created_at: row.try_get("created_at")?,
        last_seen_at: row.try_get("last_seen_at")?,
    })
}

pub(crate) fn status_from(s: &str) -> StoreResult<EventStatus> {
    EventStatus::parse(s).ok_or_else(|| {
        StoreError::Database(sqlx::Error::Decode(format!("unknown status {s:?}").into()))
    })
}

pub(crate) fn event_from_row(row: &SqliteRow) -> StoreResult<InboxEvent> {
    let sender_id: Option<String> = row.try_get("sender_agent_id")?;
    let sender = match sender_id {
        Some(id) => Sender::Agent {
            agent_id: parse_id(&id)?,
            name: row
                .try_get::<Option<String>, _>("sender_name")?
                .unwrap_or_default(),
        },
        None => Sender::Operator,
    };
    let payload: Option<String> = row.try_get("payload")?;
    let payload = payload
        .map(|p| serde_json::from_str(&p))
        .transpose()
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
    let room_id: Option<String> = row.try_get("room_id")?;
    Ok(InboxEvent {
        event_id: parse_id(&row.try_get::<String, _>("id")?)?,
        agent_id: parse_id(&row.try_get::<String, _>("agent_id")?)?,
        seq: row.try_get::<i64, _>("seq")? as u64,
        sender,
        room_id: room_id.as_deref().map(parse_id).transpose()?,
        room_seq: row.try_get::<Option<i64>, _>("room_seq")?.map(|s| s as u64),
        correlation_id: row.try_get("correlation_id")?,
        priority: row.try_get::<i64, _>("priority")? as i32,
        status: status_from(&row.try_get::<String, _>("status")?)?,
        payload,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts")? as u32,
        created_at: to_timestamp(row.try_get("created_at")?),
        available_at: to_timestamp(row.try_get("available_at")?),
        expires_at: row
            .try_get::<Option<i64>, _>("expires_at")?
            .map(to_timestamp),
        last_error: row.try_get("last_error")?,
    })
}

/// Appends one step to an event's history.
pub(crate) async fn history(
    conn: &mut SqliteConnection,
    event_id: &str,
    at: Millis,
    action: &str,
    actor: &Actor,
    detail: Option<String>,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO event_history (event_id, at, action, actor, detail) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(event_id)
    .bind(at)
    .bind(action)
    .bind(actor.to_string())
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}
