//! Memories and leases as the store serves them: every backend with the lease
//! statements (and its driver's few methods) has them, over the transactions of
//! `leases.rs` and `memories.rs`.

use super::area::store_area;
use super::audit::AuditStatements;
use super::leases::{self, LeaseDriver};
use super::memories;
use crate::clock::Millis;
use crate::lease_rules::{check_release, check_renewal, renewal_ttl};
use crate::*;
use switchboard_proto::{
    Lease, LeaseAuditEntry, LeaseId, Lineage, Memory, MemoryId, OpsLease, TenantId,
};

// Each write is one transaction, run again where the backend says a retry may cure
// its failure.
store_area! {
    /// Memory instances and their leases. Time is the server's clock (`now`): with
    /// SQLite the server is the database's only client, so its clock is the database
    /// clock; a client's clock is never used.
    pub trait LeaseStore for Engine<D: LeaseDriver + AuditStatements> {
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

        /// Registers the memory `id` the client minted: (the memory, whether it is new).
        /// A retry in the same tenant gets the memory it registered; another tenant
        /// gets `Conflict`, the same whichever tenant has it.
        async fn register_memory_as(
            &self,
            tenant: TenantId,
            id: MemoryId,
            label: Option<&str>,
            now: Millis,
        ) -> StoreResult<(Memory, bool)> {
            self.0
                .retrying(|| memories::register_as(&self.0, tenant, id, label, now))
                .await
        }

        /// A new memory recording `parent` and `parent_token` (which must not be above
        /// the parent's current token).
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

        /// Claims the name and the memory together, in one transaction (I7), or neither:
        /// `LeaseHeld` when either has another live lease or is in its lock delay,
        /// `Confusable` when the skeleton is leased under another canonical name.
        /// An expired lease in the way is taken over. The new fencing token is one above
        /// both the name's and the memory's last.
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

        /// The acquisition's checks, read-only, for a key this principal has not used:
        /// a refusal (`LeaseHeld`, `Confusable`, `NotFound`) costs no write. The
        /// acquisition checks again in its own transaction.
        async fn lease_precheck(
            &self,
            new: &NewLease,
            key: &IdemKey,
            now: Millis,
        ) -> StoreResult<()> {
            leases::precheck(&self.0, new, key, now).await
        }

        /// The lease on `memory`, live or expired, if any (a memory has at most one).
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

        /// The id of the lease `fields` name: `None` when it is over, `StaleFence` when
        /// they name no lease that was issued (the rules: `lease_rules::match_fields`).
        /// A lease's id, name, memory, token and owner never change, so acting on the id
        /// in a later transaction acts on the lease the fields named, or finds it gone.
        default async fn find_lease(
            &self,
            tenant: TenantId,
            fields: &LeaseFields,
        ) -> StoreResult<Option<switchboard_proto::LeaseId>> {
            let held = self.lease_on_memory(tenant, fields.memory).await?;
            crate::lease_rules::match_fields(held.as_ref(), fields)
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
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                // Locked: an acquisition waiting on it sees the renewed expiry.
                let held = d.load_lease(&mut tx, tenant, id, true).await?;
                let held = check_renewal(held, id, token, actor, now)?;
                let ttl = renewal_ttl(&held, ttl_ms);
                d.set_lease_expiry(&mut tx, id, ttl, now + ttl).await?;
                let lease = d
                    .load_lease(&mut tx, tenant, id, false)
                    .await?
                    .ok_or(StoreError::NotFound)?
                    .lease;
                leases::audit(
                    d,
                    &mut tx,
                    leases::LeaseEvent {
                        tenant,
                        event: "renewed",
                        lease: &lease,
                        token: token as i64,
                        actor: &actor.to_string(),
                    },
                    now,
                )
                .await?;
                d.commit(tx, &[]).await?;
                Ok(lease)
            })
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
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                // Already gone (released before, forced out, taken over): the holder wants it
                // ended, and it is. Releasing twice is not an error.
                if let Some(held) = d.load_lease(&mut tx, tenant, id, true).await? {
                    check_release(&held, id, token, actor)?;
                    // A clean release: the holder says it is done, so no lock delay.
                    d.delete_lease(&mut tx, id).await?;
                    leases::audit(
                        d,
                        &mut tx,
                        leases::LeaseEvent {
                            tenant,
                            event: "released",
                            lease: &held.lease,
                            token: token as i64,
                            actor: &actor.to_string(),
                        },
                        now,
                    )
                    .await?;
                }
                d.commit(tx, &[]).await?;
                Ok(())
            })
            .await
        }

        /// Ends a lease now and bumps both fences past its token, so its holder is
        /// refused from then on; the lock delay starts now.
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

        /// Registered names among `skeletons`: skeleton → (name, original).
        async fn registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken> {
            self.0.read_registered_names(skeletons).await
        }

        /// Registers planned names in one transaction (all or none); `Conflict` when a
        /// skeleton was registered meanwhile.
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

        /// The lease audit trail, newest first (names and memories as salted hashes).
        async fn lease_audit(
            &self,
            tenant: TenantId,
            limit: u32,
        ) -> StoreResult<Vec<LeaseAuditEntry>> {
            self.0.audit_lines(tenant, limit).await
        }
    }
}
