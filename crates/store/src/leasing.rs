//! The store's seams for memories, name + memory leases and the fenced data plane.

use super::*;
use async_trait::async_trait;

/// A legacy name to insert (the server's `names_import::plan`): canonical form, skeleton, original, creation time (ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    pub skeleton: String,
    pub original: String,
    pub created_at: i64,
}

/// Registered names by skeleton: (name, original).
pub type Taken = std::collections::HashMap<String, (String, String)>;

/// A lease to acquire, validated by the handler.
#[derive(Debug, Clone)]
pub struct NewLease {
    pub tenant: TenantId,
    /// Canonical form and skeleton (the uniqueness key) of the name.
    pub name: String,
    pub skeleton: String,
    pub memory: switchboard_proto::MemoryId,
    pub ttl_ms: Millis,
    pub lock_delay_ms: Millis,
    pub owner_client: Option<String>,
    /// Who asks (`Actor` as text), for operators.
    pub holder: String,
    /// Who asks, for the holder checks ([`Actor::key`]).
    pub holder_key: String,
}

/// A lease named by its fields rather than its id, as the names-and-leases seed
/// names it in a renewal or release (see [`super::lease_rules::match_fields`]).
#[derive(Debug, Clone)]
pub struct LeaseFields {
    /// The canonical name.
    pub name: String,
    pub memory: switchboard_proto::MemoryId,
    pub token: u64,
    /// The `owner_client` the lease was acquired with.
    pub owner_client: Option<String>,
}

/// Memory instances and their leases. Time is the server's clock (`now`): with
/// SQLite the server is the database's only client, so its clock is the database
/// clock; a client's clock is never used.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    async fn register_memory(
        &self,
        tenant: TenantId,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Memory>;
    /// A new memory recording `parent` and `parent_token` (which must not be above
    /// the parent's current token).
    async fn branch_memory(
        &self,
        tenant: TenantId,
        parent: switchboard_proto::MemoryId,
        parent_token: u64,
        label: Option<&str>,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Memory>;
    async fn memory(
        &self,
        tenant: TenantId,
        id: switchboard_proto::MemoryId,
    ) -> StoreResult<switchboard_proto::Memory>;
    async fn lineage(
        &self,
        tenant: TenantId,
        id: switchboard_proto::MemoryId,
    ) -> StoreResult<switchboard_proto::Lineage>;
    /// Claims the name and the memory together, in one transaction (I7), or neither:
    /// `LeaseHeld` when either has another live lease or is in its lock delay,
    /// `Confusable` when the skeleton is leased under another canonical name.
    /// An expired lease in the way is taken over. The new fencing token is one above
    /// both the name's and the memory's last.
    async fn acquire_lease(
        &self,
        lease: &NewLease,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Lease>;
    /// The acquisition's checks, read-only, for a key this principal has not used:
    /// a refusal (`LeaseHeld`, `Confusable`, `NotFound`) costs no write. The
    /// acquisition checks again in its own transaction.
    async fn lease_precheck(&self, lease: &NewLease, key: &IdemKey, now: Millis)
    -> StoreResult<()>;
    /// The lease on `memory`, live or expired, if any (a memory has at most one).
    async fn lease_on_memory(
        &self,
        tenant: TenantId,
        memory: switchboard_proto::MemoryId,
    ) -> StoreResult<Option<switchboard_proto::Lease>>;
    /// The id of the lease `fields` name: `None` when it is over, `StaleFence` when
    /// they name no lease that was issued (the rules: `lease_rules::match_fields`).
    /// A lease's id, name, memory, token and owner never change, so acting on the id
    /// in a later transaction acts on the lease the fields named, or finds it gone.
    async fn find_lease(
        &self,
        tenant: TenantId,
        fields: &LeaseFields,
    ) -> StoreResult<Option<switchboard_proto::LeaseId>> {
        let held = self.lease_on_memory(tenant, fields.memory).await?;
        super::lease_rules::match_fields(held.as_ref(), fields)
    }
    async fn renew_lease(
        &self,
        tenant: TenantId,
        id: switchboard_proto::LeaseId,
        token: u64,
        ttl_ms: Option<Millis>,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<switchboard_proto::Lease>;
    async fn release_lease(
        &self,
        tenant: TenantId,
        id: switchboard_proto::LeaseId,
        token: u64,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<()>;
    /// Ends a lease now and bumps both fences past its token, so its holder is
    /// refused from then on; the lock delay starts now.
    async fn force_release_lease(
        &self,
        tenant: TenantId,
        id: switchboard_proto::LeaseId,
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<switchboard_proto::OpsLease>;
    async fn leases(
        &self,
        tenant: TenantId,
        now: Millis,
    ) -> StoreResult<Vec<switchboard_proto::OpsLease>>;
    /// Registered names among `skeletons`: skeleton → (name, original).
    async fn registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken>;
    /// Registers planned names in one transaction (all or none); `Conflict` when a
    /// skeleton was registered meanwhile.
    async fn register_names(
        &self,
        tenant: TenantId,
        names: &[crate::Planned],
        note: &AuditNote,
        now: Millis,
    ) -> StoreResult<()>;
    /// The lease audit trail, newest first (names and memories as salted hashes).
    async fn lease_audit(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::LeaseAuditEntry>>;
}

/// One data-plane call on a memory's record, with the caller's fencing token.
#[derive(Debug, Clone)]
pub struct RecordCall<'a> {
    pub tenant: TenantId,
    pub memory: switchboard_proto::MemoryId,
    pub key: &'a str,
    pub token: u64,
    pub who: &'a Actor,
    pub op: RecordOp,
}

#[derive(Debug, Clone)]
pub enum RecordOp {
    Get,
    /// `value` is JSON text. `if_match`: the version the caller read;
    /// `if_none_match`: create only.
    Put {
        value: String,
        if_match: Option<u64>,
        if_none_match: bool,
    },
    Delete {
        if_match: Option<u64>,
    },
}

impl RecordOp {
    pub fn verb(&self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Put { .. } => "put",
            Self::Delete { .. } => "delete",
        }
    }
}

#[derive(Debug, Clone)]
pub enum RecordDone {
    Read(switchboard_proto::MemoryRecord),
    Written {
        record: switchboard_proto::MemoryRecord,
        created: bool,
    },
    Deleted,
}

/// The fenced data plane (I7's other half): every call presents the memory's
/// current fencing token, checked in the call's own transaction; a refusal is
/// recorded before it is answered. A change sends `memory_updated` to the memory's
/// subscribers in the same transaction (I1).
#[async_trait]
pub trait RecordStore: Send + Sync {
    async fn record(
        &self,
        call: &RecordCall<'_>,
        now: Millis,
    ) -> StoreResult<Committed<RecordDone>>;
    async fn subscribe_memory(
        &self,
        tenant: TenantId,
        memory: switchboard_proto::MemoryId,
        agent: AgentId,
        on: bool,
    ) -> StoreResult<()>;
    /// Newest first.
    async fn fencing_rejections(
        &self,
        tenant: TenantId,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::FencingRejection>>;
}
