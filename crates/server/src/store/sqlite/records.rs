//! The fenced data plane: records of a memory, read and written only with the
//! memory's current fencing token, checked in the same transaction as the write.
//! A refusal is recorded (and committed) before it is answered.

use super::lease_audit::{self, Line};
use super::send::insert_event;
use super::{SqliteStore, parse_id};
use crate::clock::{Millis, to_timestamp};
use crate::store::*;
use async_trait::async_trait;
use sqlx::{Row, SqliteConnection};
use switchboard_proto::{FencingRejection, MemoryId, MemoryRecord, MemoryUpdated};

/// Why a call was refused, before it is recorded.
enum Refusal {
    Stale(String),
    Expired(String),
}

/// Checks `token` against the memory's current fence and its live lease.
async fn check_fence(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    memory: MemoryId,
    token: u64,
    now: Millis,
) -> StoreResult<Result<(), (Refusal, i64)>> {
    let fence: i64 =
        sqlx::query_scalar("SELECT fence FROM memories WHERE tenant_id = ? AND id = ?")
            .bind(tenant.to_string())
            .bind(memory.to_string())
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(StoreError::NotFound)?;
    let token_i = token as i64;
    if token_i < fence {
        return Ok(Err((
            Refusal::Stale(format!(
                "fencing token {token} is stale: memory {memory} is at token {fence}; \
                 this holder lost its lease and must stop writing"
            )),
            fence,
        )));
    }
    if token_i > fence {
        return Ok(Err((
            Refusal::Stale(format!(
                "fencing token {token} was never issued for memory {memory} (its current \
                 token is {fence}); use the token of your lease"
            )),
            fence,
        )));
    }
    let live: Option<i64> = sqlx::query_scalar(
        "SELECT expires_at FROM leases WHERE memory_id = ? AND fence = ? AND expires_at > ?",
    )
    .bind(memory.to_string())
    .bind(token_i)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    if live.is_none() {
        return Ok(Err((
            Refusal::Expired(format!(
                "the lease with fencing token {token} on memory {memory} has expired or was \
                 released; acquire it again"
            )),
            fence,
        )));
    }
    sqlx::query("UPDATE memories SET fence_seen = MAX(fence_seen, ?) WHERE id = ?")
        .bind(token_i)
        .bind(memory.to_string())
        .execute(&mut *conn)
        .await?;
    Ok(Ok(()))
}

async fn load_record(
    conn: &mut SqliteConnection,
    memory: MemoryId,
    key: &str,
) -> StoreResult<Option<MemoryRecord>> {
    let row = sqlx::query(
        "SELECT value, version, fencing_token, updated_at FROM memory_records WHERE memory_id = ? AND key = ?",
    )
    .bind(memory.to_string())
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| {
        let value: String = r.try_get(0)?;
        Ok(MemoryRecord {
            memory_instance_id: memory,
            key: key.to_owned(),
            value: serde_json::from_str(&value).unwrap_or(serde_json::Value::Null),
            version: r.try_get::<i64, _>(1)? as u64,
            fencing_token: r.try_get::<i64, _>(2)? as u64,
            updated_at: to_timestamp(r.try_get(3)?),
        })
    })
    .transpose()
}

/// `memory_updated` into the inbox of every agent subscribed to `memory`.
async fn notify(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    change: &MemoryUpdated,
    who: &Actor,
    now: Millis,
) -> StoreResult<Vec<Wake>> {
    let agents: Vec<String> =
        sqlx::query_scalar("SELECT agent_id FROM memory_subscribers WHERE memory_id = ?")
            .bind(change.memory_instance_id.to_string())
            .fetch_all(&mut *conn)
            .await?;
    let msg = NewMessage {
        payload: serde_json::to_string(change).unwrap_or_default(),
        correlation_id: Some(change.memory_instance_id.to_string()),
        priority: 0,
        available_at: now,
        expires_at: None,
        max_attempts: 5,
    };
    let mut wakes = Vec::with_capacity(agents.len());
    for agent in agents {
        let d = insert_event(conn, tenant, parse_id(&agent)?, who, None, &msg, now).await?;
        wakes.push(Wake {
            tenant_id: tenant,
            agent_id: d.agent_id,
            cursor_hint: d.seq,
        });
    }
    Ok(wakes)
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn record(
        &self,
        call: &RecordCall<'_>,
        now: Millis,
    ) -> StoreResult<Committed<RecordDone>> {
        let mut tx = self.begin_write().await?;
        if let Err((refusal, current)) =
            check_fence(&mut tx, call.tenant, call.memory, call.token, now).await?
        {
            let owner: Option<String> = sqlx::query_scalar(
                "SELECT owner_client FROM issued_tokens WHERE memory_id = ? AND fence = ?",
            )
            .bind(call.memory.to_string())
            .bind(call.token as i64)
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
            sqlx::query(
                "INSERT INTO fencing_rejections (tenant_id, memory_id, presented, current, owner_client, actor, operation, at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(call.tenant.to_string())
            .bind(call.memory.to_string())
            .bind(call.token as i64)
            .bind(current)
            .bind(owner)
            .bind(call.who.to_string())
            .bind(format!("{} {}", call.op.verb(), call.key))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let memory = call.memory.to_string();
            let actor = call.who.to_string();
            let line = Line {
                event: "fence_rejected",
                name: None,
                memory: &memory,
                token: call.token as i64,
                actor: &actor,
            };
            lease_audit::write(&mut tx, call.tenant, line, now).await?;
            tx.commit().await?;
            return Err(match refusal {
                Refusal::Stale(why) => StoreError::StaleFence(why),
                Refusal::Expired(why) => StoreError::LeaseExpired(why),
            });
        }
        let existing = load_record(&mut tx, call.memory, call.key).await?;
        let version = existing.as_ref().map_or(0, |r| r.version);
        let precondition = |if_match: Option<u64>| match if_match {
            Some(v) if v != version => Err(StoreError::PreconditionFailed(format!(
                "record {} is at version {version} (ETag {}), not {v}; read it again and \
                 retry with its ETag",
                call.key,
                MemoryRecord::etag(version)
            ))),
            _ => Ok(()),
        };
        let (done, change) = match &call.op {
            RecordOp::Get => (
                RecordDone::Read(existing.ok_or(StoreError::NotFound)?),
                None,
            ),
            RecordOp::Put {
                value,
                if_match,
                if_none_match,
            } => {
                if existing.is_some() && *if_none_match {
                    return Err(StoreError::PreconditionFailed(format!(
                        "record {} exists (If-None-Match: *); update it with If-Match",
                        call.key
                    )));
                }
                if existing.is_some() && if_match.is_none() {
                    return Err(StoreError::PreconditionRequired(format!(
                        "record {} exists: send If-Match with its ETag ({}), so a concurrent \
                         update is not lost",
                        call.key,
                        MemoryRecord::etag(version)
                    )));
                }
                precondition(*if_match)?;
                sqlx::query(
                    "INSERT INTO memory_records (memory_id, key, value, version, fencing_token, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (memory_id, key) DO UPDATE SET \
                     value = ?3, version = ?4, fencing_token = ?5, updated_at = ?6",
                )
                .bind(call.memory.to_string())
                .bind(call.key)
                .bind(value)
                .bind(version as i64 + 1)
                .bind(call.token as i64)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let record = load_record(&mut tx, call.memory, call.key)
                    .await?
                    .ok_or(StoreError::NotFound)?;
                let change = (record.version, false);
                (
                    RecordDone::Written {
                        record,
                        created: existing.is_none(),
                    },
                    Some(change),
                )
            }
            RecordOp::Delete { if_match } => {
                if existing.is_none() {
                    return Err(StoreError::NotFound);
                }
                precondition(*if_match)?;
                sqlx::query("DELETE FROM memory_records WHERE memory_id = ? AND key = ?")
                    .bind(call.memory.to_string())
                    .bind(call.key)
                    .execute(&mut *tx)
                    .await?;
                (RecordDone::Deleted, Some((version, true)))
            }
        };
        let wakes = match change {
            Some((version, deleted)) => {
                let change = MemoryUpdated {
                    kind: "memory_updated".to_owned(),
                    memory_instance_id: call.memory,
                    key: call.key.to_owned(),
                    version,
                    deleted,
                    fencing_token: call.token,
                };
                notify(&mut tx, call.tenant, &change, call.who, now).await?
            }
            None => Vec::new(),
        };
        tx.commit().await?;
        Ok(Committed { value: done, wakes })
    }

    async fn subscribe_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
        agent: AgentId,
        on: bool,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        let found: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM memories WHERE tenant_id = ? AND id = ?")
                .bind(tenant.to_string())
                .bind(memory.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        found.ok_or(StoreError::NotFound)?;
        let sql = if on {
            "INSERT OR IGNORE INTO memory_subscribers (memory_id, agent_id) VALUES (?, ?)"
        } else {
            "DELETE FROM memory_subscribers WHERE memory_id = ? AND agent_id = ?"
        };
        sqlx::query(sql)
            .bind(memory.to_string())
            .bind(agent.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn fencing_rejections(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<FencingRejection>> {
        let rows = sqlx::query(
            "SELECT id, memory_id, presented, current, owner_client, actor, operation, at \
             FROM fencing_rejections WHERE tenant_id = ? ORDER BY id DESC LIMIT ?",
        )
        .bind(tenant.to_string())
        .bind(i64::from(limit))
        .fetch_all(self.read())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(FencingRejection {
                    id: r.try_get(0)?,
                    memory_instance_id: parse_id(&r.try_get::<String, _>(1)?)?,
                    presented_token: r.try_get::<i64, _>(2)? as u64,
                    current_token: r.try_get::<i64, _>(3)? as u64,
                    owner_client: r.try_get(4)?,
                    actor: r.try_get(5)?,
                    operation: r.try_get(6)?,
                    at: to_timestamp(r.try_get(7)?),
                })
            })
            .collect()
    }
}
