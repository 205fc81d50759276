//! Business writes that fan out into inboxes (I1), idempotency records (I8), rooms.

use super::{PgStore, parse_id};
use crate::clock::{Millis, to_timestamp};
use crate::store::rows::{abandoned, by_id_or_name, room_from_rows, room_sender};
use crate::store::*;
use sqlx::{AssertSqlSafe, PgConnection, Row};
use switchboard_proto::{Delivery, EventId, Room};

const KEY_WHERE: &str = "tenant_id = $1 AND principal = $2 AND key_hash = $3";

pub(super) async fn idem_begin(
    store: &PgStore,
    key: &IdemKey,
    now: Millis,
    lock_ms: Millis,
    ttl_ms: Millis,
) -> StoreResult<Option<IdemBegin>> {
    let mut tx = store.begin().await?;
    // Insert first: of two requests with the same key, exactly one inserts, and the
    // other waits on the row and then reads it.
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (tenant_id, principal, key_hash, fingerprint, state, \
         created_at, locked_until, expires_at, owner) \
         VALUES ($1, $2, $3, $4, 'in_flight', $5, $6, $7, $8) ON CONFLICT (tenant_id, principal, key_hash) DO NOTHING",
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
    .await?
    .rows_affected();
    if inserted == 1 {
        tx.commit().await?;
        return Ok(Some(IdemBegin::Fresh));
    }
    let Some(row) = sqlx::query(AssertSqlSafe(format!(
        "SELECT fingerprint, state, status_code, response, locked_until, expires_at, owner \
         FROM idempotency_keys WHERE {KEY_WHERE} FOR UPDATE"
    )))
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .fetch_optional(&mut *tx)
    .await?
    else {
        // Forgotten (a failed attempt's release) between the INSERT and this read:
        // the key is free again, and the caller starts over.
        return Ok(None);
    };
    let take_over = |fingerprint: bool| {
        let sql = if fingerprint {
            format!(
                "UPDATE idempotency_keys SET fingerprint = $4, state = 'in_flight', \
                 status_code = NULL, response = NULL, created_at = $5, locked_until = $6, \
                 expires_at = $7, owner = $8 WHERE {KEY_WHERE}"
            )
        } else {
            format!("UPDATE idempotency_keys SET locked_until = $6, owner = $8 WHERE {KEY_WHERE}")
        };
        sqlx::query(AssertSqlSafe(sql))
            .bind(key.tenant_id.to_string())
            .bind(&key.principal)
            .bind(&key.key_hash)
            .bind(&key.fingerprint)
            .bind(now)
            .bind(now + lock_ms)
            .bind(now + ttl_ms)
            .bind(&key.owner)
    };
    let outcome = if row.try_get::<i64, _>("expires_at")? <= now {
        // Expired (retention has not removed it yet): the key is new again.
        take_over(true).execute(&mut *tx).await?;
        IdemBegin::Fresh
    } else if row.try_get::<Vec<u8>, _>("fingerprint")? != key.fingerprint {
        IdemBegin::Mismatch
    } else if row.try_get::<String, _>("state")? == "done" {
        IdemBegin::Replay(StoredResponse {
            status: row.try_get::<i64, _>("status_code")? as u16,
            body: row.try_get("response")?,
        })
    } else if !abandoned(&row, key, now)? {
        IdemBegin::InFlight
    } else {
        take_over(false).execute(&mut *tx).await?;
        IdemBegin::Fresh
    };
    tx.commit().await?;
    Ok(Some(outcome))
}

pub(super) async fn idem_abort(store: &PgStore, key: &IdemKey) -> StoreResult<()> {
    sqlx::query(AssertSqlSafe(format!(
        "DELETE FROM idempotency_keys WHERE {KEY_WHERE} AND state = 'in_flight' AND owner = $4"
    )))
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .bind(&key.owner)
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Stores the response with the business change, in the same transaction.
pub(super) async fn idem_finish(
    conn: &mut PgConnection,
    key: Option<&IdemKey>,
    status: u16,
    body: &impl serde::Serialize,
) -> StoreResult<()> {
    let Some(key) = key else { return Ok(()) };
    let body = serde_json::to_string(body)
        .map_err(|e| StoreError::Database(sqlx::Error::Encode(Box::new(e))))?;
    idem_store(conn, key, &StoredResponse { status, body }).await
}

/// Stores the response, only while this attempt still owns the in-flight key: an
/// attempt whose lock ran out and was taken over by another instance must not commit
/// its business change beside the one that took over (I8). The caller's transaction
/// then rolls back on [`StoreError::KeyTakenOver`].
pub(super) async fn idem_store(
    conn: &mut PgConnection,
    key: &IdemKey,
    response: &StoredResponse,
) -> StoreResult<()> {
    let stored = sqlx::query(AssertSqlSafe(format!(
        "UPDATE idempotency_keys SET state = 'done', status_code = $4, response = $5 \
         WHERE {KEY_WHERE} AND state = 'in_flight' AND owner = $6 AND fingerprint = $7"
    )))
    .bind(key.tenant_id.to_string())
    .bind(&key.principal)
    .bind(&key.key_hash)
    .bind(i64::from(response.status))
    .bind(&response.body)
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

/// Allocates the agent's next sequence number. The UPDATE locks the agent's row
/// until commit, so a concurrent sender to the same agent (on any instance) waits
/// and numbers after this one: sequence order is commit order (I2).
async fn next_seq(conn: &mut PgConnection, tenant: TenantId, agent: AgentId) -> StoreResult<u64> {
    let row = sqlx::query(
        "UPDATE agents SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2 \
         RETURNING head_seq",
    )
    .bind(agent.to_string())
    .bind(tenant.to_string())
    .fetch_one(conn)
    .await?;
    Ok(row.try_get::<i64, _>(0)? as u64)
}

/// Writes one inbox event (with its first history step).
pub(super) async fn insert_event(
    conn: &mut PgConnection,
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
    // The event and its first history step in one statement (one round trip).
    sqlx::query(
        "WITH e AS (INSERT INTO events (id, tenant_id, agent_id, seq, sender_agent_id, \
         sender_name, room_id, room_seq, correlation_id, priority, status, payload, attempts, \
         max_attempts, created_at, available_at, expires_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, 0, $12, $13, $14, $15, $13) \
         RETURNING id) \
         INSERT INTO event_history (event_id, at, action, actor) \
         SELECT id, $13, 'created', $16 FROM e",
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
    .bind(from.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(Delivery {
        agent_id: to,
        event_id,
        seq,
    })
}

fn wakes_of(tenant: TenantId, deliveries: &[Delivery]) -> Vec<Wake> {
    deliveries
        .iter()
        .map(|d| Wake {
            tenant_id: tenant,
            agent_id: d.agent_id,
            cursor_hint: d.seq,
        })
        .collect()
}

pub(super) async fn send_direct(
    store: &PgStore,
    tenant: TenantId,
    to: AgentId,
    from: &Actor,
    msg: &NewMessage,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Committed<SendReceipt>> {
    let mut tx = store.begin().await?;
    let d = insert_event(&mut tx, tenant, to, from, None, msg, now).await?;
    let receipt = SendReceipt {
        event_id: d.event_id,
        agent_id: d.agent_id,
        seq: d.seq,
    };
    idem_finish(&mut tx, idem, 201, &receipt).await?;
    store.hooks.before_send_commit().await?;
    let wakes = wakes_of(tenant, &[d]);
    store.commit(tx, &wakes).await?;
    Ok(Committed {
        wakes,
        value: receipt,
    })
}

pub(super) async fn send_room(
    store: &PgStore,
    tenant: TenantId,
    room: RoomId,
    from: &Actor,
    msg: &NewMessage,
    idem: Option<&IdemKey>,
    now: Millis,
) -> StoreResult<Committed<RoomReceipt>> {
    let mut tx = store.begin().await?;
    // The room's row first: it orders room messages, and holding it keeps the
    // member list fixed (set_member takes it too) for this send.
    let row = sqlx::query(
        "UPDATE rooms SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2 \
         RETURNING head_seq",
    )
    .bind(room.to_string())
    .bind(tenant.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let room_seq = row.try_get::<i64, _>(0)? as u64;
    // Sorted by agent id, so two room sends lock shared members in the same order.
    let members: Vec<AgentId> =
        sqlx::query("SELECT agent_id FROM room_members WHERE room_id = $1 ORDER BY agent_id")
            .bind(room.to_string())
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| parse_id(&r.try_get::<String, _>(0)?))
            .collect::<StoreResult<_>>()?;
    let sender = room_sender(from, &members)?;
    sqlx::query(
        "INSERT INTO room_messages (room_id, seq, sender_agent_id, payload, correlation_id, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6)",
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
    let wakes = wakes_of(tenant, &receipt.deliveries);
    store.commit(tx, &wakes).await?;
    Ok(Committed {
        value: receipt,
        wakes,
    })
}

pub(super) async fn create_room(
    store: &PgStore,
    tenant: TenantId,
    name: &str,
    now: Millis,
) -> StoreResult<Room> {
    let id = RoomId::new();
    let res = sqlx::query(
        "INSERT INTO rooms (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (tenant_id, name) DO NOTHING",
    )
    .bind(id.to_string())
    .bind(tenant.to_string())
    .bind(name)
    .bind(now)
    .execute(store.pool())
    .await?;
    if res.rows_affected() == 0 {
        return Err(StoreError::Conflict(format!(
            "a room named {name:?} already exists in this tenant; pick another name"
        )));
    }
    Ok(Room {
        room_id: id,
        name: name.to_owned(),
        head_seq: 0,
        members: Vec::new(),
        created_at: to_timestamp(now),
    })
}

pub(super) async fn room(store: &PgStore, tenant: TenantId, key: &str) -> StoreResult<Room> {
    let mut conn = store.pool().acquire().await?;
    load_room(&mut conn, tenant, key).await
}

async fn load_room(conn: &mut PgConnection, tenant: TenantId, key: &str) -> StoreResult<Room> {
    let (column, key) = by_id_or_name::<RoomId>(key);
    let row = sqlx::query(AssertSqlSafe(format!(
        "SELECT * FROM rooms WHERE tenant_id = $1 AND {column} = $2"
    )))
    .bind(tenant.to_string())
    .bind(key)
    .fetch_one(&mut *conn)
    .await?;
    let members = sqlx::query(
        "SELECT a.id, a.name FROM room_members m JOIN agents a ON a.id = m.agent_id \
         WHERE m.room_id = $1 ORDER BY a.name",
    )
    .bind(row.try_get::<String, _>("id")?)
    .fetch_all(&mut *conn)
    .await?;
    room_from_rows(&row, &members)
}

pub(super) async fn set_member(
    store: &PgStore,
    tenant: TenantId,
    room: RoomId,
    agent: AgentId,
    member: bool,
    now: Millis,
) -> StoreResult<Room> {
    let mut tx = store.begin().await?;
    // Both must belong to the tenant (I9). The room's row lock orders this change
    // against room sends.
    sqlx::query("SELECT 1 FROM rooms WHERE id = $1 AND tenant_id = $2 FOR UPDATE")
        .bind(room.to_string())
        .bind(tenant.to_string())
        .fetch_one(&mut *tx)
        .await?;
    sqlx::query("SELECT 1 FROM agents WHERE id = $1 AND tenant_id = $2")
        .bind(agent.to_string())
        .bind(tenant.to_string())
        .fetch_one(&mut *tx)
        .await?;
    if member {
        sqlx::query(
            "INSERT INTO room_members (room_id, agent_id, joined_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
        )
        .bind(room.to_string())
        .bind(agent.to_string())
        .bind(now)
        .execute(&mut *tx)
        .await?;
    } else {
        sqlx::query("DELETE FROM room_members WHERE room_id = $1 AND agent_id = $2")
            .bind(room.to_string())
            .bind(agent.to_string())
            .execute(&mut *tx)
            .await?;
    }
    let room = load_room(&mut tx, tenant, &room.to_string()).await;
    tx.commit().await?;
    room
}
