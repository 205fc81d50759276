//! The fenced data plane: records of a memory, read and written only with the
//! memory's current fencing token, checked in the same transaction as the write.
//! A refusal is recorded (and committed) before it is answered.
//!
//! A call locks the memory's row before it reads the fence (`FOR UPDATE`), and the
//! live lease with that token (`FOR SHARE`), in the acquisition's lock order: an
//! acquisition or forced release that moves the fence waits for the call's commit,
//! and the call, for theirs; a release or renewal of the lease waits for the call.
//! So the fence a write was checked against is the current one when it commits,
//! and calls on one memory (and their record versions) are serialized.

use super::lease_audit::{self, Line};
use super::send::insert_event;
use super::*;
use crate::store::lease_common::*;
use sqlx::PgConnection;
use switchboard_proto::{FencingRejection, MemoryId, MemoryRecord};

/// Checks `token` against the memory's current fence and its live lease, locking
/// both until the transaction ends.
async fn check_fence(
    conn: &mut PgConnection,
    tenant: TenantId,
    memory: MemoryId,
    token: u64,
    who: &Actor,
    now: Millis,
) -> StoreResult<Result<(), (Refusal, i64)>> {
    let fence: i64 = sqlx::query_scalar(
        "SELECT fence FROM memories WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(tenant.to_string())
    .bind(memory.to_string())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    let issued_to: Option<String> =
        sqlx::query_scalar("SELECT holder FROM issued_tokens WHERE memory_id = $1 AND fence = $2")
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
        "SELECT expires_at FROM leases WHERE memory_id = $1 AND fence = $2 AND expires_at > $3 \
         FOR SHARE",
    )
    .bind(memory.to_string())
    .bind(token_i)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    if live.is_none() {
        return Ok(Err((expired_refusal(memory, token), fence)));
    }
    sqlx::query("UPDATE memories SET fence_seen = GREATEST(fence_seen, $1) WHERE id = $2")
        .bind(token_i)
        .bind(memory.to_string())
        .execute(&mut *conn)
        .await?;
    Ok(Ok(()))
}

async fn load_record(
    conn: &mut PgConnection,
    memory: MemoryId,
    key: &str,
) -> StoreResult<Option<MemoryRecord>> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {RECORD_COLS} FROM memory_records WHERE memory_id = $1 AND key = $2"
    )))
    .bind(memory.to_string())
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| record_from_row(&r, memory, key)).transpose()
}

/// `msg` (a `memory_updated`) into the inbox of every agent subscribed to `memory`.
async fn notify(
    conn: &mut PgConnection,
    tenant: TenantId,
    memory: MemoryId,
    msg: &NewMessage,
    who: &Actor,
    now: Millis,
) -> StoreResult<Vec<Wake>> {
    // In a fixed order: two calls notifying the same agents number them alike.
    let agents: Vec<String> = sqlx::query_scalar(
        "SELECT agent_id FROM memory_subscribers WHERE memory_id = $1 ORDER BY agent_id",
    )
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

/// Records a refused call (rejection row and audit line) in `conn`'s transaction.
async fn reject(
    conn: &mut PgConnection,
    call: &RecordCall<'_>,
    current: i64,
    now: Millis,
) -> StoreResult<()> {
    let owner: Option<String> = sqlx::query_scalar(
        "SELECT owner_client FROM issued_tokens WHERE memory_id = $1 AND fence = $2",
    )
    .bind(call.memory.to_string())
    .bind(call.token as i64)
    .fetch_optional(&mut *conn)
    .await?
    .flatten();
    sqlx::query(
        "INSERT INTO fencing_rejections (tenant_id, memory_id, presented, current, owner_client, \
         actor, operation, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(call.tenant.to_string())
    .bind(call.memory.to_string())
    .bind(call.token as i64)
    .bind(current)
    .bind(owner)
    .bind(call.who.to_string())
    .bind(format!("{} {}", call.op.verb(), call.key))
    .bind(now)
    .execute(&mut *conn)
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
    lease_audit::write(conn, call.tenant, line, now).await
}

async fn record(
    store: &PgStore,
    call: &RecordCall<'_>,
    now: Millis,
) -> StoreResult<Committed<RecordDone>> {
    let mut tx = store.begin().await?;
    if let Err((refusal, current)) =
        check_fence(&mut tx, call.tenant, call.memory, call.token, call.who, now).await?
    {
        reject(&mut tx, call, current, now).await?;
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
                "INSERT INTO memory_records (memory_id, key, value, version, fencing_token, \
                 updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (memory_id, key) DO UPDATE SET value = EXCLUDED.value, \
                 version = EXCLUDED.version, fencing_token = EXCLUDED.fencing_token, \
                 updated_at = EXCLUDED.updated_at",
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
            sqlx::query("DELETE FROM memory_records WHERE memory_id = $1 AND key = $2")
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
    store.commit(tx, &wakes).await?;
    Ok(Committed { value: done, wakes })
}

#[async_trait]
impl RecordStore for PgStore {
    async fn record(
        &self,
        call: &RecordCall<'_>,
        now: Millis,
    ) -> StoreResult<Committed<RecordDone>> {
        retrying(|| record(self, call, now)).await
    }

    async fn subscribe_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
        agent: AgentId,
        on: bool,
    ) -> StoreResult<()> {
        let mut tx = self.begin().await?;
        let found: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM memories WHERE tenant_id = $1 AND id = $2")
                .bind(tenant.to_string())
                .bind(memory.to_string())
                .fetch_optional(&mut *tx)
                .await?;
        found.ok_or(StoreError::NotFound)?;
        let sql = if on {
            "INSERT INTO memory_subscribers (memory_id, agent_id) VALUES ($1, $2) \
             ON CONFLICT DO NOTHING"
        } else {
            "DELETE FROM memory_subscribers WHERE memory_id = $1 AND agent_id = $2"
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
            "SELECT {REJECTION_COLS} FROM fencing_rejections WHERE tenant_id = $1 \
             ORDER BY id DESC LIMIT $2"
        )))
        .bind(tenant.to_string())
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(rejection_from_row).collect()
    }
}
