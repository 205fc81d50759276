//! The data plane's statements on SQLite ([`RecordDriver`]); the logic is the
//! engine's (`store/engine/records.rs`). Every write runs on the single writer, so
//! the memory's row needs no lock of its own.

use super::lease_audit::{self, Line};
use super::send::insert_event;
use super::{SqliteStore, parse_id};
use crate::clock::Millis;
use crate::store::engine::records::{Issued, RecordDriver, Rejection};
use crate::store::lease_common::*;
use crate::store::*;
use async_trait::async_trait;
use sqlx::{Sqlite, Transaction};
use switchboard_proto::{Delivery, FencingRejection, MemoryId, MemoryRecord};

type Tx = Transaction<'static, Sqlite>;

#[async_trait]
impl RecordDriver for SqliteStore {
    async fn lock_memory_fence(
        &self,
        tx: &mut Tx,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<i64>> {
        Ok(
            sqlx::query_scalar("SELECT fence FROM memories WHERE tenant_id = ? AND id = ?")
                .bind(tenant.to_string())
                .bind(memory.to_string())
                .fetch_optional(&mut **tx)
                .await?,
        )
    }

    async fn issued(
        &self,
        tx: &mut Tx,
        memory: MemoryId,
        token: u64,
    ) -> StoreResult<Option<Issued>> {
        let row: Option<(String, Option<String>)> = sqlx::query_as(
            "SELECT holder, owner_client FROM issued_tokens WHERE memory_id = ? AND fence = ?",
        )
        .bind(memory.to_string())
        .bind(token as i64)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(row.map(|(holder, owner_client)| Issued {
            holder,
            owner_client,
        }))
    }

    async fn lock_live_lease(
        &self,
        tx: &mut Tx,
        memory: MemoryId,
        token: u64,
        now: Millis,
    ) -> StoreResult<bool> {
        let live: Option<i64> = sqlx::query_scalar(
            "SELECT expires_at FROM leases WHERE memory_id = ? AND fence = ? AND expires_at > ?",
        )
        .bind(memory.to_string())
        .bind(token as i64)
        .bind(now)
        .fetch_optional(&mut **tx)
        .await?;
        Ok(live.is_some())
    }

    async fn see_fence(&self, tx: &mut Tx, memory: MemoryId, token: u64) -> StoreResult<()> {
        sqlx::query("UPDATE memories SET fence_seen = MAX(fence_seen, ?) WHERE id = ?")
            .bind(token as i64)
            .bind(memory.to_string())
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn insert_rejection(&self, tx: &mut Tx, r: &Rejection<'_>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO fencing_rejections (tenant_id, memory_id, presented, current, \
             owner_client, actor, operation, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(r.tenant.to_string())
        .bind(r.memory.to_string())
        .bind(r.presented)
        .bind(r.current)
        .bind(r.owner_client)
        .bind(r.actor)
        .bind(r.operation)
        .bind(r.at)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn lease_audit_line(
        &self,
        tx: &mut Tx,
        tenant: TenantId,
        line: Line<'_>,
        now: Millis,
    ) -> StoreResult<()> {
        lease_audit::write(tx, tenant, line, now).await
    }

    async fn load_record(
        &self,
        tx: &mut Tx,
        memory: MemoryId,
        key: &str,
    ) -> StoreResult<Option<MemoryRecord>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {RECORD_COLS} FROM memory_records WHERE memory_id = ? AND key = ?"
        )))
        .bind(memory.to_string())
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?;
        row.map(|r| record_from_row(&r, memory, key)).transpose()
    }

    async fn put_record(
        &self,
        tx: &mut Tx,
        memory: MemoryId,
        key: &str,
        value: &str,
        version: i64,
        token: u64,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO memory_records (memory_id, key, value, version, fencing_token, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (memory_id, key) DO UPDATE SET \
             value = ?3, version = ?4, fencing_token = ?5, updated_at = ?6",
        )
        .bind(memory.to_string())
        .bind(key)
        .bind(value)
        .bind(version)
        .bind(token as i64)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn delete_record(&self, tx: &mut Tx, memory: MemoryId, key: &str) -> StoreResult<()> {
        sqlx::query("DELETE FROM memory_records WHERE memory_id = ? AND key = ?")
            .bind(memory.to_string())
            .bind(key)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn subscribers(&self, tx: &mut Tx, memory: MemoryId) -> StoreResult<Vec<AgentId>> {
        let agents: Vec<String> = sqlx::query_scalar(
            "SELECT agent_id FROM memory_subscribers WHERE memory_id = ? ORDER BY agent_id",
        )
        .bind(memory.to_string())
        .fetch_all(&mut **tx)
        .await?;
        agents.iter().map(|a| parse_id(a)).collect()
    }

    async fn insert_event(
        &self,
        tx: &mut Tx,
        tenant: TenantId,
        to: AgentId,
        from: &Actor,
        msg: &NewMessage,
        now: Millis,
    ) -> StoreResult<Delivery> {
        insert_event(tx, tenant, to, from, None, msg, now).await
    }

    async fn memory_exists(
        &self,
        tx: &mut Tx,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<bool> {
        let found: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM memories WHERE tenant_id = ? AND id = ?")
                .bind(tenant.to_string())
                .bind(memory.to_string())
                .fetch_optional(&mut **tx)
                .await?;
        Ok(found.is_some())
    }

    async fn set_subscribed(
        &self,
        tx: &mut Tx,
        memory: MemoryId,
        agent: AgentId,
        on: bool,
    ) -> StoreResult<()> {
        let sql = if on {
            "INSERT OR IGNORE INTO memory_subscribers (memory_id, agent_id) VALUES (?, ?)"
        } else {
            "DELETE FROM memory_subscribers WHERE memory_id = ? AND agent_id = ?"
        };
        sqlx::query(sql)
            .bind(memory.to_string())
            .bind(agent.to_string())
            .execute(&mut **tx)
            .await?;
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
