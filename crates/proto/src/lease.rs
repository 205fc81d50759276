//! Memory instances and the leases that bind a canonical agent name to one of them,
//! with fencing tokens (issue 5).
//!
//! Terms:
//! - *memory instance*: an identity for an agent's memory, a UUIDv7 minted by the
//!   server (`POST /memories`), or by branching one (`POST /memories/branch`), which
//!   records the parent and the parent's fencing token at the branch. A copy of the
//!   bytes is not a branch: only the server mints ids.
//! - *lease*: the right to run as `name` on `memory_instance_id` until `expires_at`.
//!   A name (by its confusable skeleton, service-wide) and a memory each have at most
//!   one live lease; one request claims both or neither.
//! - *fencing token*: a number that strictly increases with every acquisition and
//!   takeover of a name or a memory (and with a force-release). The data plane refuses
//!   any token lower than the memory's current one (`409 stale_fence`).
//! - *lock delay*: after a lease expires or is force-released, its name and memory
//!   stay unavailable for this long (Consul's lock-delay), so a holder that missed its
//!   expiry notices before anyone else starts.

use crate::{LeaseId, MemoryId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/memories`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterMemory {
    /// The id the client holds already (a UUIDv7), as the names-and-leases seed
    /// registers it; left out, the server mints one. A retry with the same id in
    /// the same tenant answers 200 with the memory; an id registered elsewhere is
    /// refused (409 `conflict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_instance_id: Option<MemoryId>,
    /// A note for operators, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// `POST /api/v1/memories/branch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BranchMemory {
    pub parent_memory_instance_id: MemoryId,
    /// The parent's fencing token the branch starts from: at most the parent's
    /// current token.
    pub parent_fencing_token: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// A memory instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Memory {
    pub memory_instance_id: MemoryId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_memory_instance_id: Option<MemoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branched_at_token: Option<u64>,
    /// The memory's current fencing token (0: never leased). Shown to operators
    /// only: with it anyone could pose as the lease holder to a reader of tokens, and
    /// the holder has it from its own acquisition. Absent for agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// `GET /api/v1/memories/{id}/lineage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lineage {
    pub memory: Memory,
    /// Parent first, then its parent, up to the root.
    pub ancestors: Vec<Memory>,
    /// Every branch below, breadth first (each names its parent).
    pub descendants: Vec<Memory>,
}

/// `POST /api/v1/leases` (needs an `Idempotency-Key`).
///
/// The names-and-leases seed spells two fields differently; both spellings are
/// accepted (sending both is a duplicate field): `display_name` for `name`, and
/// `owner_client_id` for `owner_client`. The OpenAPI document lists the aliases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcquireLease {
    /// The agent name; canonicalized (PRECIS UsernameCaseMapped, UTS #39). Send
    /// this or `display_name`; when both come, `name` wins.
    #[serde(default)]
    pub name: String,
    /// A name to be read, as the names-and-leases seed sends it (`My Agent`): letter
    /// case and spaces allowed. Its canonical name is NFKC, then every White_Space
    /// code point removed, then the `name` pipeline (`My Agent` → `myagent`). It is
    /// kept with the lease and shown in the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub memory_instance_id: MemoryId,
    /// 0.1..=300.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.1, maximum = 300))]
    pub ttl_seconds: f64,
    /// Who holds it (host, pid…), at most 200 characters. Also accepted as
    /// `owner_client_id`. A renewal or release that names the lease by its fields
    /// (see [`RenewLease`]) must present the same value.
    #[serde(
        default,
        alias = "owner_client_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub owner_client: Option<String>,
    /// Quiet period after this lease expires or is force-released, 0..=60 s;
    /// default 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 60))]
    pub lock_delay_seconds: Option<f64>,
}

/// A lease as its holder sees it.
///
/// Additive only within v1: `canonical_name` repeats `name` under the
/// names-and-leases seed's spelling, so clients written from either read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    pub lease_id: LeaseId,
    /// The canonical name.
    pub name: String,
    /// The canonical name again (the seed's field name); always equal to `name`.
    /// Missing from servers before it was added, hence the default.
    #[serde(default)]
    pub canonical_name: String,
    /// The display name it was acquired with, if one was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub memory_instance_id: MemoryId,
    pub fencing_token: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_client: Option<String>,
    pub ttl_seconds: f64,
    pub lock_delay_seconds: f64,
    #[serde(with = "time::serde::rfc3339")]
    pub acquired_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: OffsetDateTime,
}

/// `POST /api/v1/leases/renew`.
///
/// The lease is named one of two ways, and `fencing_token` is always its token:
/// - by `lease_id` (what the SDK sends);
/// - by its fields, as the names-and-leases seed does: `canonical_name`,
///   `memory_instance_id` and `owner_client_id` (the `owner_client` it was acquired
///   with; leave it out only if it was acquired without one).
///
/// Both may be sent; the fields must then name the same lease. A lease the fields
/// do not match is refused as a stale one (`409 stale_fence`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RenewLease {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<LeaseId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_instance_id: Option<MemoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_client_id: Option<String>,
    pub fencing_token: u64,
    /// A new TTL (0.1..=300); default: the lease's.
    #[cfg_attr(feature = "openapi", schema(minimum = 0.1, maximum = 300))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<f64>,
}

impl RenewLease {
    /// Renews `lease` by its id, keeping its TTL.
    pub fn of(lease: &Lease) -> Self {
        Self {
            lease_id: Some(lease.lease_id),
            fencing_token: lease.fencing_token,
            ..Self::default()
        }
    }
}

/// `POST /api/v1/leases/release`: the lease named as for [`RenewLease`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseLease {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_id: Option<LeaseId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canonical_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_instance_id: Option<MemoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_client_id: Option<String>,
    pub fencing_token: u64,
}

impl ReleaseLease {
    /// Releases `lease` by its id.
    pub fn of(lease: &Lease) -> Self {
        Self {
            lease_id: Some(lease.lease_id),
            fencing_token: lease.fencing_token,
            ..Self::default()
        }
    }
}

/// `GET /api/v1/ops/leases`: every live lease of the tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeasePage {
    pub leases: Vec<OpsLease>,
}

/// A lease as operators see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsLease {
    #[serde(flatten)]
    pub lease: Lease,
    /// Who acquired it (`agent:build-bot`, `operator`).
    pub holder: String,
    /// Past `expires_at`, not yet taken over.
    pub expired: bool,
}

/// The header carrying the fencing token of the current lease on every record call.
pub const FENCING_TOKEN: &str = "fencing-token";

/// A record of a memory: `GET`/`PUT /api/v1/memories/{id}/records/{key}`. Its
/// version is the `ETag` (`"v3"`); send it back as `If-Match` to update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryRecord {
    pub memory_instance_id: MemoryId,
    pub key: String,
    pub value: serde_json::Value,
    pub version: u64,
    /// The token of the write that made this version.
    pub fencing_token: u64,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

impl MemoryRecord {
    /// The ETag of `version`: `"v3"`.
    pub fn etag(version: u64) -> String {
        format!("\"v{version}\"")
    }
}

/// `GET /api/v1/memories/{id}/records` (also `/v1/…`): a page of the memory's
/// records in key order. Pass `next_cursor` back as `cursor` for the next page; it
/// is absent on the last one. The cursor is opaque: only the server reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryRecordPage {
    pub records: Vec<MemoryRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The payload of a `memory_updated` inbox event, sent to the agents subscribed to a
/// memory in the same transaction as the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoryUpdated {
    /// Always `memory_updated`.
    #[serde(rename = "type")]
    pub kind: String,
    pub memory_instance_id: MemoryId,
    pub key: String,
    /// The new version (for a delete, the version that was deleted).
    pub version: u64,
    pub deleted: bool,
}

/// One refused data-plane call: a token that was not the memory's current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FencingRejection {
    pub id: i64,
    pub memory_instance_id: MemoryId,
    pub presented_token: u64,
    pub current_token: u64,
    /// The `owner_client` of the lease the presented token came from, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_client: Option<String>,
    /// Who made the call (`agent:build-bot`).
    pub actor: String,
    /// `get`, `put` or `delete`, and the record key.
    pub operation: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// `GET /api/v1/ops/fencing-rejections`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FencingRejectionPage {
    pub rejections: Vec<FencingRejection>,
}

/// One entry of the lease audit trail. Names and memory ids are stored only as
/// `SHA-256(value || tenant salt)` in hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseAuditEntry {
    pub id: i64,
    /// `acquired`, `renewed`, `released`, `expired`, `taken_over`, `superseded` (its
    /// holder acquired it again), `force_released`, `fence_rejected`.
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_hash: Option<String>,
    pub memory_hash: String,
    pub fencing_token: u64,
    pub actor: String,
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// `GET /api/v1/ops/lease-audit`: newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseAuditPage {
    pub entries: Vec<LeaseAuditEntry>,
}

/// `POST /api/v1/ops/names/import`: legacy agent names into the registry of
/// canonical names (what `switchboard names import FILE.csv` sends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ImportNames {
    pub names: Vec<LegacyName>,
    /// Plan and report, change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// One legacy name with when it was created (the oldest keeps a contested name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LegacyName {
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// What an import did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportReport {
    pub dry_run: bool,
    /// Registered under their canonical form, or renamed with a suffix.
    pub registered: Vec<ImportedName>,
    /// Names the pipeline refuses, with why.
    pub rejected: Vec<RejectedName>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportedName {
    /// Position in the request (0-based).
    pub index: usize,
    pub original: String,
    /// The registered name: the canonical form, or it with a `-N` suffix.
    pub name: String,
    /// Set when the canonical form was taken by an older name (which one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collided_with: Option<String>,
    /// Registered by an earlier import already (under `name`): nothing to do.
    #[serde(default)]
    pub already_registered: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RejectedName {
    pub index: usize,
    pub original: String,
    pub code: String,
    pub reason: String,
}
