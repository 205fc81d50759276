//! The fenced data plane: records of a memory, read and written only with the
//! memory's current fencing token, checked in the same transaction as the write.
//! A refusal is recorded (and committed) before it is answered.

use super::lease_audit::{self, Line};
use super::send::insert_event;
use super::{SqliteStore, parse_id};
use crate::clock::Millis;
use crate::store::lease_common::*;
use crate::store::*;
use async_trait::async_trait;
use sqlx::SqliteConnection;
use switchboard_proto::{FencingRejection, MemoryId, MemoryRecord};

/// Checks `token` against the memory's current fence and its live lease.
async fn check_fence(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    memory: MemoryId,
    token: u64,
    who: &Actor,
    now: Millis,
) -> StoreResult<Result<(), (Refusal, i64)>> {
    let fence: i64 =
        sqlx::query_scalar("SELECT fence FROM memories WHERE tenant_id = ? AND id = ?")
            .bind(tenant.to_string())
            .bind(memory.to_string())
            .fetch_optional(&mut *conn)
            .await?
            .ok_or(StoreError::NotFound)?;
    let issued_to: Option<String> =
        sqlx::query_scalar("SELECT holder FROM issued_tokens WHERE memory_id = ? AND fence = ?")
            .bind(memory.to_string())
            .bind(token as i64)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some(refusal) = holder_refusal(memory, token, issued_to.as_deref(), who) {
        return Ok(Err((refusal, fence)));
    }
    if let Some(refusal) = fence_refusal(memory, token, fence) {
        return Ok(Err((refusal, fence)));
    }
    let token_i = token as i64;
    let live: Option<i64> = sqlx::query_scalar(
        "SELECT expires_at FROM leases WHERE memory_id = ? AND fence = ? AND expires_at > ?",
    )
    .bind(memory.to_string())
    .bind(token_i)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    if live.is_none() {
        return Ok(Err((expired_refusal(memory, token), fence)));
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
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {RECORD_COLS} FROM memory_records WHERE memory_id = ? AND key = ?"
    )))
    .bind(memory.to_string())
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| record_from_row(&r, memory, key)).transpose()
}

/// `msg` (a `memory_updated`) into the inbox of every agent subscribed to `memory`.
async fn notify(
    conn: &mut SqliteConnection,
    tenant: TenantId,
    memory: MemoryId,
    msg: &NewMessage,
    who: &Actor,
    now: Millis,
) -> StoreResult<Vec<Wake>> {
    let agents: Vec<String> =
        sqlx::query_scalar("SELECT agent_id FROM memory_subscribers WHERE memory_id = ?")
            .bind(memory.to_string())
            .fetch_all(&mut *conn)
            .await?;
    let mut wakes = Vec::with_capacity(agents.len());
    for agent in agents {
        let d = insert_event(conn, tenant, parse_id(&agent)?, who, None, msg, now).await?;
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
            check_fence(&mut tx, call.tenant, call.memory, call.token, call.who, now).await?
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
            return Err(refusal.into_error());
        }
        let existing = load_record(&mut tx, call.memory, call.key).await?;
        let (done, change) = match plan_record(call, existing)? {
            RecordPlan::Read(record) => (RecordDone::Read(record), None),
            RecordPlan::Put {
                value,
                version,
                created,
            } => {
                sqlx::query(
                    "INSERT INTO memory_records (memory_id, key, value, version, fencing_token, updated_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (memory_id, key) DO UPDATE SET \
                     value = ?3, version = ?4, fencing_token = ?5, updated_at = ?6",
                )
                .bind(call.memory.to_string())
                .bind(call.key)
                .bind(value)
                .bind(version)
                .bind(call.token as i64)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let record = load_record(&mut tx, call.memory, call.key)
                    .await?
                    .ok_or(StoreError::NotFound)?;
                let change = (record.version, false);
                (RecordDone::Written { record, created }, Some(change))
            }
            RecordPlan::Delete { version } => {
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
                let msg = memory_updated(call, version, deleted, now);
                notify(&mut tx, call.tenant, call.memory, &msg, call.who, now).await?
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
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {REJECTION_COLS} FROM fencing_rejections WHERE tenant_id = ? \
             ORDER BY id DESC LIMIT ?"
        )))
        .bind(tenant.to_string())
        .bind(i64::from(limit))
        .fetch_all(self.read())
        .await?;
        rows.iter().map(rejection_from_row).collect()
    }
}
