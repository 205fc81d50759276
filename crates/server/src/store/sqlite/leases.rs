//! Memory instances and name + memory leases with fencing tokens (I7). Every change
//! is one `BEGIN IMMEDIATE` transaction on the single writer, so "check both, then
//! claim both" cannot interleave with another acquisition: there is exactly one
//! winner, and a refusal rolls everything back.

use super::SqliteStore;
use crate::clock::Millis;
use crate::store::engine::idempotency;
use crate::store::engine::lease_audit::{self, LeaseAuditStatements};
use crate::store::lease_common::Line;
use crate::store::*;
use async_trait::async_trait;
use switchboard_proto::{Lease, LeaseId, Lineage, Memory, MemoryId, OpsLease};

use super::lease_rows::*;

#[async_trait]
impl LeaseStore for SqliteStore {
    async fn register_memory(
        &self,
        tenant: TenantId,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        let mut tx = self.begin_write().await?;
        let memory = insert_memory(&mut tx, tenant, label, None, now).await?;
        tx.commit().await?;
        Ok(memory)
    }

    async fn branch_memory(
        &self,
        tenant: TenantId,
        parent: MemoryId,
        parent_token: u64,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        let mut tx = self.begin_write().await?;
        let p = load_memory(&mut tx, tenant, parent).await?;
        check_branch(&p, parent_token)?;
        let memory =
            insert_memory(&mut tx, tenant, label, Some((parent, parent_token)), now).await?;
        tx.commit().await?;
        Ok(memory)
    }

    async fn memory(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Memory> {
        let mut conn = self.read().acquire().await?;
        load_memory(&mut conn, tenant, id).await
    }

    async fn lineage(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Lineage> {
        let mut tx = self.read().begin().await?;
        let memory = load_memory(&mut tx, tenant, id).await?;
        let mut ancestors = Vec::new();
        let mut next = memory.parent_memory_instance_id;
        while let Some(p) = next {
            let m = load_memory(&mut tx, tenant, p).await?;
            next = m.parent_memory_instance_id;
            ancestors.push(m);
        }
        let mut descendants: Vec<Memory> = Vec::new();
        let mut frontier = vec![id];
        while !frontier.is_empty() {
            let mut found = Vec::new();
            for parent in &frontier {
                let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT {MEMORY_COLS} FROM memories WHERE tenant_id = ? AND parent_id = ? ORDER BY id"
                )))
                .bind(tenant.to_string())
                .bind(parent.to_string())
                .fetch_all(&mut *tx)
                .await?;
                for r in &rows {
                    found.push(memory_from_row(r)?);
                }
            }
            frontier = found.iter().map(|m| m.memory_instance_id).collect();
            descendants.extend(found);
        }
        tx.commit().await?;
        Ok(Lineage {
            memory,
            ancestors,
            descendants,
        })
    }

    async fn acquire_lease(
        &self,
        new: &NewLease,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Lease> {
        let mut tx = self.begin_write().await?;
        let checked = check(&mut tx, new, now).await?;
        let fence = checked.next_fence();
        let memory_id = new.memory.to_string();
        // Expired leases in the way are taken over (their lock delay has passed).
        for held in &checked.expired {
            sqlx::query("DELETE FROM leases WHERE id = ?")
                .bind(held.lease.lease_id.to_string())
                .execute(&mut *tx)
                .await?;
            let memory = held.lease.memory_instance_id.to_string();
            for (event, actor) in [
                ("expired", "system:leases"),
                ("taken_over", new.holder.as_str()),
            ] {
                let line = Line {
                    event,
                    name: Some(&held.lease.name),
                    memory: &memory,
                    token: held.lease.fencing_token as i64,
                    actor,
                };
                lease_audit::write(self, &mut tx, new.tenant, line, now).await?;
            }
        }
        set_fences(&mut tx, &new.skeleton, &memory_id, fence, 0).await?;
        let id = LeaseId::new();
        sqlx::query(
            "INSERT INTO leases (id, tenant_id, name, skeleton, memory_id, fence, holder, \
             owner_client, ttl_ms, lock_delay_ms, acquired_at, expires_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.to_string())
        .bind(new.tenant.to_string())
        .bind(&new.name)
        .bind(&new.skeleton)
        .bind(&memory_id)
        .bind(fence)
        .bind(&new.holder)
        .bind(&new.owner_client)
        .bind(new.ttl_ms)
        .bind(new.lock_delay_ms)
        .bind(now)
        .bind(now + new.ttl_ms)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO issued_tokens (memory_id, fence, lease_id, owner_client, holder, issued_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(&memory_id)
        .bind(fence)
        .bind(id.to_string())
        .bind(&new.owner_client)
        .bind(&new.holder)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let lease = load_lease(&mut tx, new.tenant, id)
            .await?
            .ok_or(StoreError::NotFound)?
            .lease;
        let line = Line {
            event: "acquired",
            name: Some(&new.name),
            memory: &memory_id,
            token: fence,
            actor: &new.holder,
        };
        lease_audit::write(self, &mut tx, new.tenant, line, now).await?;
        idempotency::finish(self, &mut tx, idem, 201, &lease).await?;
        tx.commit().await?;
        Ok(lease)
    }

    async fn lease_on_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<Lease>> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = ? AND memory_id = ?"
        )))
        .bind(tenant.to_string())
        .bind(memory.to_string())
        .fetch_optional(self.read())
        .await?
        .as_ref()
        .map(|r| Ok(lease_from_row(r)?.lease))
        .transpose()
    }

    async fn renew_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        ttl_ms: Option<Millis>,
        actor: &str,
        now: Millis,
    ) -> StoreResult<Lease> {
        let mut tx = self.begin_write().await?;
        let held = check_renewal(
            load_lease(&mut tx, tenant, id).await?,
            id,
            token,
            actor,
            now,
        )?;
        let ttl = renewal_ttl(&held, ttl_ms);
        sqlx::query("UPDATE leases SET ttl_ms = ?, expires_at = ? WHERE id = ?")
            .bind(ttl)
            .bind(now + ttl)
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        let lease = load_lease(&mut tx, tenant, id)
            .await?
            .ok_or(StoreError::NotFound)?
            .lease;
        let memory = lease.memory_instance_id.to_string();
        let line = Line {
            event: "renewed",
            name: Some(&lease.name),
            memory: &memory,
            token: token as i64,
            actor,
        };
        lease_audit::write(self, &mut tx, tenant, line, now).await?;
        tx.commit().await?;
        Ok(lease)
    }

    async fn release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        actor: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        // Already gone (released before, forced out, taken over): the holder wants it
        // ended, and it is. Releasing twice is not an error.
        if let Some(held) = load_lease(&mut tx, tenant, id).await? {
            check_release(&held, id, token, actor)?;
            // A clean release: the holder says it is done, so no lock delay.
            sqlx::query("DELETE FROM leases WHERE id = ?")
                .bind(id.to_string())
                .execute(&mut *tx)
                .await?;
            let memory = held.lease.memory_instance_id.to_string();
            let line = Line {
                event: "released",
                name: Some(&held.lease.name),
                memory: &memory,
                token: token as i64,
                actor,
            };
            lease_audit::write(self, &mut tx, tenant, line, now).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn force_release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        actor: &str,
        now: Millis,
    ) -> StoreResult<OpsLease> {
        let mut tx = self.begin_write().await?;
        let held = load_lease(&mut tx, tenant, id)
            .await?
            .ok_or(StoreError::NotFound)?;
        sqlx::query("DELETE FROM leases WHERE id = ?")
            .bind(id.to_string())
            .execute(&mut *tx)
            .await?;
        let bumped = held.lease.fencing_token as i64 + 1;
        set_fences(
            &mut tx,
            &held.skeleton,
            &held.lease.memory_instance_id.to_string(),
            bumped,
            now + held.lock_delay_ms,
        )
        .await?;
        let memory = held.lease.memory_instance_id.to_string();
        let line = Line {
            event: "force_released",
            name: Some(&held.lease.name),
            memory: &memory,
            token: bumped,
            actor,
        };
        lease_audit::write(self, &mut tx, tenant, line, now).await?;
        tx.commit().await?;
        Ok(held.ops(now))
    }

    async fn leases(&self, tenant: TenantId, now: Millis) -> StoreResult<Vec<OpsLease>> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {LEASE_COLS} FROM leases WHERE tenant_id = ? ORDER BY expires_at"
        )))
        .bind(tenant.to_string())
        .fetch_all(self.read())
        .await?;
        rows.iter()
            .map(|r| Ok(lease_from_row(r)?.ops(now)))
            .collect()
    }

    async fn lease_audit(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::LeaseAuditEntry>> {
        self.audit_lines(tenant, limit).await
    }

    async fn registered_names(
        &self,
        skeletons: &[String],
    ) -> StoreResult<crate::names_import::Taken> {
        let json = serde_json::to_string(skeletons).unwrap_or_else(|_| "[]".to_owned());
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT skeleton, name, original FROM registered_names WHERE skeleton IN (SELECT value FROM json_each(?))",
        )
        .bind(json)
        .fetch_all(self.read())
        .await?;
        Ok(rows.into_iter().map(|(s, n, o)| (s, (n, o))).collect())
    }

    async fn register_names(
        &self,
        tenant: TenantId,
        names: &[crate::names_import::Planned],
    ) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        for n in names {
            let done = sqlx::query(
                "INSERT INTO registered_names (skeleton, name, original, tenant_id, created_at) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(&n.skeleton)
            .bind(&n.name)
            .bind(&n.original)
            .bind(tenant.to_string())
            .bind(n.created_at)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                return Err(StoreError::Conflict(format!(
                    "the name {:?} was registered while the import was planned; nothing was \
                     imported, run it again",
                    n.name
                )));
            }
        }
        tx.commit().await?;
        Ok(())
    }
    async fn lease_precheck(&self, new: &NewLease, key: &IdemKey, now: Millis) -> StoreResult<()> {
        let mut tx = self.read().begin().await?;
        let known: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM idempotency_keys WHERE tenant_id = ? AND principal = ? \
             AND key_hash = ? AND expires_at > ?",
        )
        .bind(key.tenant_id.to_string())
        .bind(&key.principal)
        .bind(&key.key_hash)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        // A known key is the idempotency layer's to answer (replay, 409, 422).
        let outcome = match known {
            Some(_) => Ok(()),
            None => check(&mut tx, new, now).await.map(drop),
        };
        tx.commit().await?;
        outcome
    }
}
