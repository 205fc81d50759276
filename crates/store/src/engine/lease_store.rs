//! Memories and leases as the store serves them: every backend with the lease
//! statements (and its driver's few methods) has them, over the transactions of
//! `leases.rs` and `memories.rs`.

use super::audit::AuditStatements;
use super::leases::{self, LeaseDriver};
use super::memories;
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::{
    Lease, LeaseAuditEntry, LeaseId, Lineage, Memory, MemoryId, OpsLease, TenantId,
};

/// Each write is one transaction, run again where the backend says a retry may cure
/// its failure.
#[async_trait]
impl<D: LeaseDriver + AuditStatements> LeaseStore for Engine<D> {
    async fn register_memory(
        &self,
        tenant: TenantId,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        self.0
            .retrying(|| memories::register(&self.0, tenant, label, None, now))
            .await
    }

    async fn branch_memory(
        &self,
        tenant: TenantId,
        parent: MemoryId,
        parent_token: u64,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<Memory> {
        let parent = Some((parent, parent_token));
        self.0
            .retrying(|| memories::register(&self.0, tenant, label, parent, now))
            .await
    }

    async fn memory(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Memory> {
        self.0
            .read_memory(tenant, id)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn lineage(&self, tenant: TenantId, id: MemoryId) -> StoreResult<Lineage> {
        memories::lineage(&self.0, tenant, id).await
    }

    async fn acquire_lease(
        &self,
        new: &NewLease,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Lease> {
        self.0
            .retrying(|| leases::acquire(&self.0, new, idem, now))
            .await
    }

    async fn lease_precheck(&self, new: &NewLease, key: &IdemKey, now: Millis) -> StoreResult<()> {
        leases::precheck(&self.0, new, key, now).await
    }

    async fn lease_on_memory(
        &self,
        tenant: TenantId,
        memory: MemoryId,
    ) -> StoreResult<Option<Lease>> {
        Ok(self
            .0
            .read_lease_on_memory(tenant, memory)
            .await?
            .map(|held| held.lease))
    }

    async fn renew_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        ttl_ms: Option<Millis>,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Lease> {
        self.0
            .retrying(|| leases::renew(&self.0, tenant, id, token, ttl_ms, actor, now))
            .await
    }

    async fn release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        token: u64,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<()> {
        self.0
            .retrying(|| leases::release(&self.0, tenant, id, token, actor, now))
            .await
    }

    async fn force_release_lease(
        &self,
        tenant: TenantId,
        id: LeaseId,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<OpsLease> {
        self.0
            .retrying(|| leases::force_release(&self.0, tenant, id, note, now))
            .await
    }

    async fn leases(&self, tenant: TenantId, now: Millis) -> StoreResult<Vec<OpsLease>> {
        Ok(self
            .0
            .read_leases(tenant)
            .await?
            .into_iter()
            .map(|held| held.ops(now))
            .collect())
    }

    async fn registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken> {
        self.0.read_registered_names(skeletons).await
    }

    async fn register_names(
        &self,
        tenant: TenantId,
        names: &[crate::Planned],
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<()> {
        self.0
            .retrying(|| leases::register_names(&self.0, tenant, names, note, now))
            .await
    }

    async fn lease_audit(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<LeaseAuditEntry>> {
        self.0.audit_lines(tenant, limit).await
    }
}
