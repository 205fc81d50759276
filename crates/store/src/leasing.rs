//! The store's seams for memories, name + memory leases and the fenced data plane:
//! their records. The traits are declared with their one implementation:
//! [`LeaseStore`](crate::LeaseStore) in `engine/lease_store.rs`,
//! [`RecordStore`](crate::RecordStore) in `engine/records.rs`.

use super::*;

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

/// The longest a lease may last (`ttl_seconds` at most 300): also the wait a 423
/// tells a caller whose way another tenant's lease blocks (`StoreError::LeaseHeld`
/// with no `retry_after_ms`), which says nothing of that lease.
pub const MAX_LEASE_TTL_MS: crate::clock::Millis = 300_000;

/// A lease to acquire, validated by the handler.
#[derive(Debug, Clone)]
pub struct NewLease {
    pub tenant: TenantId,
    /// Canonical form and skeleton (the uniqueness key) of the name.
    pub name: String,
    pub skeleton: String,
    /// The display name it was asked for by, if any (kept and shown).
    pub display_name: Option<String>,
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
