//! Memory instances, once for every backend: registered, branched from a parent at
//! a token the parent has reached, and read with their lineage. A memory's `fence`
//! is its current fencing token and `quiet_until` the end of its lock delay; only
//! the lease transactions move them (`leases.rs`), and only upwards.

use super::Driver;
use crate::clock::Millis;
use crate::lease_rules::check_branch;
use crate::{StoreError, StoreResult};
use async_trait::async_trait;
use switchboard_proto::{Lineage, Memory, MemoryId, TenantId};

/// A memory row to insert.
pub(crate) struct NewMemory<'a> {
    pub(crate) id: MemoryId,
    pub(crate) tenant: TenantId,
    pub(crate) label: Option<&'a str>,
    /// The parent and the parent's token the branch starts at.
    pub(crate) parent: Option<(MemoryId, u64)>,
    pub(crate) now: Millis,
}

/// The statements on memory rows (`store/statements/memories.rs`). Each is one
/// statement, in `tx`, except the `read_…` ones (the read pool, no transaction).
#[async_trait]
pub(crate) trait MemoryStatements: Driver {
    async fn insert_memory(&self, tx: &mut Self::Tx, m: &NewMemory<'_>) -> StoreResult<()>;
    /// `None`: no such memory in `tenant`. With `lock`, the row locked until the
    /// transaction ends (the second lock of the lease lock order).
    async fn load_memory(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        id: MemoryId,
        lock: bool,
    ) -> StoreResult<Option<Memory>>;
    /// The end of the memory's lock delay (`NotFound`: no such memory).
    async fn memory_quiet(&self, tx: &mut Self::Tx, id: MemoryId) -> StoreResult<Millis>;
    /// Raises the memory's fence to at least `fence` and its lock delay to at least
    /// `quiet_until`.
    async fn raise_memory_fence(
        &self,
        tx: &mut Self::Tx,
        id: MemoryId,
        fence: i64,
        quiet_until: Millis,
    ) -> StoreResult<()>;
    /// The memories branched from `parent`, in id order.
    async fn child_memories(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        parent: MemoryId,
    ) -> StoreResult<Vec<Memory>>;
    /// One memory, read outside any transaction.
    async fn read_memory(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Option<Memory>>;
}

/// A new memory; with `parent`, a branch of it at a token the parent has reached (a
/// memory's token only grows, so a token it has reached stays reached).
pub(crate) async fn register<D: MemoryStatements>(
    d: &D,
    tenant: TenantId,
    label: Option<&str>,
    parent: Option<(MemoryId, u64)>,
    now: Millis,
) -> StoreResult<Memory> {
    let mut tx = d.begin_write().await?;
    if let Some((parent, token)) = parent {
        let parent = d
            .load_memory(&mut tx, tenant, parent, false)
            .await?
            .ok_or(StoreError::NotFound)?;
        check_branch(&parent, token)?;
    }
    let id = MemoryId::new();
    let memory = insert(d, &mut tx, id, tenant, label, parent, now).await?;
    d.commit(tx, &[]).await?;
    Ok(memory)
}

/// Registers the memory `id` that the client holds already (the names-and-leases
/// seed's "Create/Register Memory"): the new memory and `true`; the tenant's own
/// memory of that id and `false` when it is registered already (a retry); a
/// `Conflict` when another tenant has it, the same whichever tenant that is.
pub(crate) async fn register_as<D: MemoryStatements>(
    d: &D,
    tenant: TenantId,
    id: MemoryId,
    label: Option<&str>,
    now: Millis,
) -> StoreResult<(Memory, bool)> {
    let mut tx = d.begin_write().await?;
    if let Some(existing) = d.load_memory(&mut tx, tenant, id, false).await? {
        d.commit(tx, &[]).await?;
        return Ok((existing, false));
    }
    let memory = insert(d, &mut tx, id, tenant, label, None, now)
        .await
        .map_err(|e| match &e {
            StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                StoreError::Conflict(format!(
                    "memory_instance_id {id} is registered already, and not by a retry of \
                     this tenant's; mint a new UUIDv7, or leave memory_instance_id out and \
                     the server mints one"
                ))
            }
            _ => e,
        })?;
    d.commit(tx, &[]).await?;
    Ok((memory, true))
}

async fn insert<D: MemoryStatements>(
    d: &D,
    tx: &mut D::Tx,
    id: MemoryId,
    tenant: TenantId,
    label: Option<&str>,
    parent: Option<(MemoryId, u64)>,
    now: Millis,
) -> StoreResult<Memory> {
    let row = NewMemory {
        id,
        tenant,
        label,
        parent,
        now,
    };
    d.insert_memory(tx, &row).await?;
    d.load_memory(tx, tenant, id, false)
        .await?
        .ok_or(StoreError::NotFound)
}

/// The memory, its ancestors (parent first) and its descendants (breadth first),
/// all from one snapshot.
pub(crate) async fn lineage<D: MemoryStatements>(
    d: &D,
    tenant: TenantId,
    id: MemoryId,
) -> StoreResult<Lineage> {
    let mut tx = d.begin_read().await?;
    let memory = d
        .load_memory(&mut tx, tenant, id, false)
        .await?
        .ok_or(StoreError::NotFound)?;
    let mut ancestors = Vec::new();
    let mut next = memory.parent_memory_instance_id;
    while let Some(p) = next {
        let m = d
            .load_memory(&mut tx, tenant, p, false)
            .await?
            .ok_or(StoreError::NotFound)?;
        next = m.parent_memory_instance_id;
        ancestors.push(m);
    }
    let mut descendants: Vec<Memory> = Vec::new();
    let mut frontier = vec![id];
    while !frontier.is_empty() {
        let mut found = Vec::new();
        for parent in &frontier {
            found.extend(d.child_memories(&mut tx, tenant, *parent).await?);
        }
        frontier = found.iter().map(|m| m.memory_instance_id).collect();
        descendants.extend(found);
    }
    d.commit(tx, &[]).await?;
    Ok(Lineage {
        memory,
        ancestors,
        descendants,
    })
}
