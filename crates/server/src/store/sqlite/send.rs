//! Business writes that fan out into inboxes (I1), idempotency records (I8), rooms.

use super::{SqliteStore, history, parse_id};
use crate::clock::{Millis, to_timestamp};
use crate::store::rows::{abandoned, by_id_or_name, room_from_rows, room_sender};
use crate::store::*;
use sqlx::{AssertSqlSafe, Row, SqliteConnection};
use switchboard_proto::{Delivery, EventId, Room};

pub(super) async fn idem_begin(
    store: &SqliteStore,
    key: &IdemKey,
    now: Millis,
    lock_ms: Millis,
    ttl_ms: Millis,
) -> StoreResult<IdemBegin> {
    let mut tx = store.begin_write().await?;
    let row = sqlx::query(
        "SELECT fingerprint, state, status_code, response, locked_until, expires_at, owner \
         FROM idempotency_keys WHERE tenant_id = ? AND principal = ? AND key_hash = ?",
    )
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let outcome = match row {
        Some(row) if row.try_get::<i64, _>("expires_at")? > now => {
            let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
            let state: String = row.try_get("state")?;
            if fingerprint != key.fingerprint {
                IdemBegin::Mismatch
            } else if state == "done" {
                IdemBegin::Replay(StoredResponse {
                    status: row.try_get::<i64, _>("status_code")? as u16,
                    body: row.try_get("response")?,
                })
            } else if !abandoned(&row, key, now)? {
                IdemBegin::InFlight
            } else {
                sqlx::query(
                    "UPDATE idempotency_keys SET locked_until = ?, owner = ? \
                     WHERE tenant_id = ? AND principal = ? AND key_hash = ?",
                )
                .bind(now + lock_ms)
                .bind(&key.owner)
                .bind(key.tenant_id.to_string())
                .bind(&key.principal)
                .bind(&key.key_hash)
                .execute(&mut *tx)
                .await?;
                IdemBegin::Fresh
            }
        }
        _ => {
            sqlx::query(
                "INSERT OR REPLACE INTO idempotency_keys (tenant_id, principal, key_hash, \
                 fingerprint, state, created_at, locked_until, expires_at, owner) \
                 VALUES (?, ?, ?, ?, 'in_flight', ?, ?, ?, ?)",
            )
            .bind(key.tenant_id.to_string())
            .bind(&key.principal)
            .bind(&key.key_hash)
            .bind(&key.fingerprint)
            .bind(now)
            .bind(now + lock_ms)
            .bind(now + ttl_ms)
            .bind(&key.owner)
            .execute(&mut *tx)
            .await?;
            IdemBegin::Fresh
        }
    };
    tx.commit().await?;
    Ok(outcome)
}

pub(super) async fn idem_abort(store: &SqliteStore, key: &IdemKey) -> StoreResult<()> {
    sqlx::query(
        "DELETE FROM idempotency_keys WHERE tenant_id = ? AND principal = ? AND key_hash = ? \
         AND state = 'in_flight' AND owner = ?",
    )
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .bind(&key.owner)
    .execute(&store.write)
    .await?;
    Ok(())
}

/// Stores the response with the business change, in the same transaction.
pub(super) async fn idem_finish(
    conn: &mut SqliteConnection,
    key: Option<&IdemKey>,
    status: u16,
    body: &impl serde::Serialize,
) -> StoreResult<()> {
    let Some(key) = key else { return Ok(()) };
    let body = serde_json::to_string(body)
        .map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))?;
    idem_store(conn, key, &StoredResponse { status, body }).await
}

/// Stores the response, only while this attempt still owns the in-flight key (see
/// the PostgreSQL backend: one process owns a SQLite file, so there it always does,
/// unless the key was forgotten meanwhile).
pub(super) async fn idem_store(
    conn: &mut SqliteConnection,
    key: &IdemKey,
    response: &StoredResponse,
) -> StoreResult<()> {
    let stored = sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', status_code = ?, response = ? \
         WHERE tenant_id = ? AND principal = ? AND key_hash = ? AND state = 'in_flight' \
         AND owner = ? AND fingerprint = ?",
    )
    .bind(i64::from(response.status))
    .bind(&response.body)
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .bind(&key.owner)
    .bind(&key.fingerprint)
    .execute(conn)
    .await?
    .rows_affected();
    if stored == 1 {
        Ok(())
    } else {
        Err(StoreError::KeyTakenOver)
    }
}

/// Allocates the agent's next sequence number inside the write transaction. Writes
/// are serialized, so sequence order is commit order (I2).
async fn next_seq(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    agent: AgentId,
) -> StoreResult<u64> {
    let row = sqlx::query(
        "UPDATE agents SET head_seq = head_seq + 1 WHERE id = ? AND tenant_id = ? RETURNING head_seq",
    )
    .bind(agent.to_string())
    .bind(tenant.to_string())
    .fetch_one(conn)
    .await?;
    Ok(row.try_get::<i64, _>(0)? as u64)
}

/// Writes one inbox event (with its first history step).
pub(super) async fn insert_event(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    to: AgentId,
    from: &Actor,
    room: Option<(RoomId, u64)>,
    msg: &NewMessage,
    now: Millis,
) -> StoreResult<Delivery> {
    let seq = next_seq(conn, tenant, to).await?;
    let event_id = EventId::new();
    let (sender_id, sender_name) = match from {
        Actor::Agent { id, name } => (Some(id.to_string()), Some(name.clone())),
        _ => (None, None),
    };
    sqlx::query(
        "INSERT INTO events (id, tenant_id, agent_id, seq, sender_agent_id, sender_name, room_id, \
         room_seq, correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
         available_at, expires_at, updated_at) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, 0, ?, ?, ?, ?, ?)",
    )
    .bind(event_id.to_string())
    .bind(tenant.to_string())
    .bind(to.to_string())
    .bind(seq as i64)
    .bind(sender_id)
    .bind(sender_name)
    .bind(room.map(|(r, _)| r.to_string()))
    .bind(room.map(|(_, s)| s as i64))
    .bind(&msg.correlation_id)
    .bind(i64::from(msg.priority))
    .bind(&msg.payload)
    .bind(i64::from(msg.max_attempts))
    .bind(now)
    .bind(msg.available_at)
    .bind(msg.expires_at)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    history(conn, &event_id.to_string(), now, "created", from, None).await?;
    Ok(Delivery {
        agent_id: to,
        event_id,
        seq,
    })
}

pub(super) async fn send_direct(
    store: &SqliteStore,
    tenant: TenantId,
    to: AgentId,
    from: &Actor,
    msg: &NewMessage,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Committed<SendReceipt>> {
    let mut tx = store.begin_write().await?;
    let d = insert_event(&mut tx, tenant, to, from, None, msg, now).await?;
    let receipt = SendReceipt {
        event_id: d.event_id,
        agent_id: d.agent_id,
        seq: d.seq,
    };
    idem_finish(&mut tx, idem, 201, &receipt).await?;
    store.hooks.before_send_commit().await?;
    tx.commit().await?;
    Ok(Committed {
        wakes: vec![Wake {
            tenant_id: tenant,
            agent_id: to,
            cursor_hint: d.seq,
        }],
        value: receipt,
    })
}

pub(super) async fn send_room(
    store: &SqliteStore,
    tenant: TenantId,
    room: RoomId,
    from: &Actor,
    msg: &NewMessage,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Committed<RoomReceipt>> {
    let mut tx = store.begin_write().await?;
    let members: Vec<AgentId> =
        sqlx::query("SELECT agent_id FROM room_members WHERE room_id = ? ORDER BY agent_id")
            .bind(room.to_string())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| parse_id(&r.try_get::<String, _>(0)?))
            .collect::<StoreResult<_>>()?;
    let sender = room_sender(from, &members)?;
    let row = sqlx::query(
        "UPDATE rooms SET head_seq = head_seq + 1 WHERE id = ? AND tenant_id = ? RETURNING head_seq",
    )
    .bind(room.to_string())
    .bind(tenant.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let room_seq = row.try_get::<i64, _>(0)? as u64;
    sqlx::query(
        "INSERT INTO room_messages (room_id, seq, sender_agent_id, payload, correlation_id, created_at) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(room.to_string())
    .bind(room_seq as i64)
    .bind(sender.map(|s| s.to_string()))
    .bind(&msg.payload)
    .bind(&msg.correlation_id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    let mut deliveries = Vec::with_capacity(members.len());
    for member in members.into_iter().filter(|m| Some(*m) != sender) {
        deliveries.push(
            insert_event(
                &mut tx,
                tenant,
                member,
                from,
                Some((room, room_seq)),
                msg,
                now,
            )
            .await?,
        );
    }
    let receipt = RoomReceipt {
        room_id: room,
        room_seq,
        deliveries,
    };
    idem_finish(&mut tx, idem, 201, &receipt).await?;
    store.hooks.before_send_commit().await?;
    tx.commit().await?;
    let wakes = receipt
        .deliveries
        .iter()
        .map(|d| Wake {
            tenant_id: tenant,
            agent_id: d.agent_id,
            cursor_hint: d.seq,
        })
        .collect();
    Ok(Committed {
        value: receipt,
        wakes,
    })
}

pub(super) async fn create_room(
    store: &SqliteStore,
    tenant: TenantId,
    name: &str,
    now: Millis,
) -> StoreResult<Room> {
    let id = RoomId::new();
    let res =
        sqlx::query("INSERT INTO rooms (id, tenant_id, name, created_at) VALUES (?, ?, ?, ?)")
            .bind(id.to_string())
            .bind(tenant.to_string())
            .bind(name)
            .bind(now)
            .execute(&store.write)
            .await;
    match res {
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(StoreError::Conflict(
            format!("a room named {name:?} already exists in this tenant; pick another name"),
        )),
        Err(e) => Err(e.into()),
        Ok(_) => Ok(Room {
            room_id: id,
            name: name.to_owned(),
            head_seq: 0,
            members: Vec::new(),
            created_at: to_timestamp(now),
        }),
    }
}

pub(super) async fn room(store: &SqliteStore, tenant: TenantId, key: &str) -> StoreResult<Room> {
    let mut conn = store.read().acquire().await?;
    load_room(&mut conn, tenant, key).await
}

async fn load_room(conn: &mut SqliteConnection, tenant: TenantId, key: &str) -> StoreResult<Room> {
    let (column, key) = by_id_or_name::<RoomId>(key);
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT * FROM rooms WHERE tenant_id = ? AND {column} = ?"
    )))
    .bind(tenant.to_string())
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    let members = sqlx::query(
        "SELECT a.id, a.name FROM room_members m JOIN agents a ON a.id = m.agent_id \
         WHERE m.room_id = ? ORDER BY a.name",
    )
    .bind(row.try_get::<String, _>("id")?)
    .fetch_all(&mut *conn)
    .await?;
    room_from_rows(&row, &members)
}

pub(super) async fn set_member(
    store: &SqliteStore,
    tenant: TenantId,
    room: RoomId,
    agent: AgentId,
    member: bool,
    now: Millis,
) -> StoreResult<Room> {
    let mut tx = store.begin_write().await?;
    // Both must belong to the tenant (I9).
    sqlx::query("SELECT 1 FROM rooms WHERE id = ? AND tenant_id = ?")
        .bind(room.to_string())
        .bind(tenant.to_string())
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("SELECT 1 FROM agents WHERE id = ? AND tenant_id = ?")
        .bind(agent.to_string())
        .bind(tenant.to_string())
        .fetch_one(&mut *tx)
        .await?;
    if member {
        sqlx::query(
            "INSERT OR IGNORE INTO room_members (room_id, agent_id, joined_at) VALUES (?, ?, ?)",
        )
        .bind(room.to_string())
        .bind(agent.to_string())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    } else {
        sqlx::query("DELETE FROM room_members WHERE room_id = ? AND agent_id = ?")
            .bind(room.to_string())
            .bind(agent.to_string())
            .execute(&mut *tx)
            .await?;
    }
    let room = load_room(&mut tx, tenant, &room.to_string()).await;
    tx.commit().await?;
    room
}
