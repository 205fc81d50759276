//! Name + memory leases with fencing tokens as use cases: acquire (under the
//! request's idempotency key), renew, release, force-release, the operator's views,
//! and the import of legacy names. Names go through the canonical-name pipeline
//! (`switchboard-names`): the lease is on the name's confusable skeleton,
//! service-wide. The console hears of every change.

use super::{AppState, or_not_found};
use crate::access::Principal;
use crate::error::{ApiError, ApiResult};
use crate::store::{IdemKey, LeaseFields, StoreError, lease_rules};
use switchboard_proto::*;

pub use crate::store::NewLease;

/// `ttl_seconds` bounds. The maximum is also the `Retry-After` of a 423 whose lease
/// is another tenant's (it tells nothing of that lease).
pub const MIN_TTL_S: f64 = 0.1;
pub const MAX_TTL_S: f64 = crate::store::MAX_LEASE_TTL_MS as f64 / 1000.0;

/// A name through the canonical-name pipeline; 422 `name_invalid` or
/// `name_confusable` says why it cannot be one.
pub fn canonical(name: &str) -> ApiResult<switchboard_names::CanonicalName> {
    switchboard_names::canonicalize(name).map_err(name_error)
}

/// The canonical name of an acquisition: `name` through [`canonical`] when it is
/// sent (it wins), else `display_name` by the display rule
/// (`switchboard_names::canonicalize_display`: NFKC, White_Space removed, then the
/// same pipeline). 422 `name_invalid` when neither comes.
pub fn lease_name(
    name: &str,
    display_name: Option<&str>,
) -> ApiResult<switchboard_names::CanonicalName> {
    match (name, display_name) {
        ("", Some(display)) => switchboard_names::canonicalize_display(display).map_err(|e| {
            ApiError::new(
                code_of(&e),
                format!(
                    "display_name: {e} (its canonical name is the display name in NFKC \
                     with white space removed, then the name rules)"
                ),
            )
        }),
        ("", None) => Err(ApiError::new(
            ErrorCode::NameInvalid,
            "send the agent name as `name` (a canonical name, like \"build-bot\") or as \
             `display_name` (a display string, like \"My Agent\")",
        )),
        (name, _) => canonical(name),
    }
}

fn code_of(e: &switchboard_names::NameError) -> ErrorCode {
    if e.code() == switchboard_names::NAME_CONFUSABLE {
        ErrorCode::NameConfusable
    } else {
        ErrorCode::NameInvalid
    }
}

fn name_error(e: switchboard_names::NameError) -> ApiError {
    ApiError::new(code_of(&e), e.to_string())
}

/// A lease as a renewal or a release names it: by its id, or by the seed's fields.
pub struct Naming {
    pub lease_id: Option<LeaseId>,
    pub canonical_name: Option<String>,
    pub memory_instance_id: Option<MemoryId>,
    pub owner_client_id: Option<String>,
    pub fencing_token: u64,
}

/// What a [`Naming`] names.
pub enum Named {
    Lease(LeaseId),
    /// No lease any more: the refusal a renewal answers (a release is done).
    Over(ApiError),
}

fn not_that_lease(id: LeaseId) -> ApiError {
    StoreError::StaleFence(format!(
        "lease {id} is not the lease that canonical_name, memory_instance_id, \
         fencing_token and owner_client_id name; send the fields of lease {id}, or \
         only its lease_id"
    ))
    .into()
}

/// The lease `n` names in `tenant`.
pub async fn named(state: &AppState, tenant: TenantId, n: Naming) -> ApiResult<Named> {
    const HOW: &str = "name the lease by lease_id, or by canonical_name and \
         memory_instance_id (with owner_client_id if it was acquired with one)";
    let by_fields =
        n.canonical_name.is_some() || n.memory_instance_id.is_some() || n.owner_client_id.is_some();
    if !by_fields {
        return match n.lease_id {
            Some(id) => Ok(Named::Lease(id)),
            None => Err(ApiError::unprocessable(format!("no lease named: {HOW}"))),
        };
    }
    let (Some(name), Some(memory)) = (n.canonical_name, n.memory_instance_id) else {
        let missing = if n.memory_instance_id.is_some() {
            "canonical_name"
        } else {
            "memory_instance_id"
        };
        return Err(ApiError::unprocessable(format!(
            "{missing} is missing: {HOW}"
        )));
    };
    let fields = LeaseFields {
        name: canonical(&name)?.canonical,
        memory,
        token: n.fencing_token,
        owner_client: n.owner_client_id,
    };
    let found = state.store.find_lease(tenant, &fields).await?;
    match (n.lease_id, found) {
        (Some(id), Some(f)) if id != f => Err(not_that_lease(id)),
        (_, Some(f)) => Ok(Named::Lease(f)),
        // The lease the id names is still stored while the fields name none: a
        // mismatch, not an end (a release must not answer 204 and leave it held).
        (Some(id), None)
            if state
                .store
                .leases(tenant, state.now())
                .await?
                .iter()
                .any(|l| l.lease.lease_id == id) =>
        {
            Err(not_that_lease(id))
        }
        (_, None) => Ok(Named::Over(lease_rules::gone(&fields).into())),
    }
}

/// A refusal of the moment (held, in its lock delay, confusable) costs no write:
/// checked read-only first, for a key not seen before. The acquisition checks again.
pub async fn precheck(state: &AppState, new: &NewLease, key: &IdemKey) -> ApiResult<()> {
    let checked = state.store.lease_precheck(new, key, state.now()).await;
    or_not_found(checked, format_args!("memory {}", new.memory))
}

/// Acquires `new`, storing the lease as `key`'s answer in the same transaction.
pub async fn acquire(state: &AppState, new: &NewLease, key: &IdemKey) -> ApiResult<Lease> {
    let lease = state.store.acquire_lease(new, Some(key), state.now()).await;
    let lease = or_not_found(lease, format_args!("memory {}", new.memory))?;
    tracing::info!(lease_id = %lease.lease_id, fencing_token = lease.fencing_token, "lease acquired");
    state.hub.leases(new.tenant);
    Ok(lease)
}

/// Renews the lease `naming` names (its TTL, or `ttl_ms` from now).
pub async fn renew(
    state: &AppState,
    principal: &Principal,
    naming: Naming,
    ttl_ms: Option<i64>,
) -> ApiResult<Lease> {
    let started = std::time::Instant::now();
    let token = naming.fencing_token;
    let id = match named(state, principal.tenant_id, naming).await? {
        Named::Lease(id) => id,
        Named::Over(refusal) => return Err(refusal),
    };
    let lease = state
        .store
        .renew_lease(
            principal.tenant_id,
            id,
            token,
            ttl_ms,
            &principal.actor(),
            state.now(),
        )
        .await?;
    state
        .metrics
        .tenant(principal.tenant_id)
        .lease_renewal_latency
        .observe(started.elapsed().as_secs_f64());
    state.hub.leases(principal.tenant_id);
    Ok(lease)
}

/// Releases the lease `naming` names; a lease already over is released too.
pub async fn release(state: &AppState, principal: &Principal, naming: Naming) -> ApiResult<()> {
    let token = naming.fencing_token;
    let id = match named(state, principal.tenant_id, naming).await? {
        Named::Lease(id) => id,
        // Already over: the holder wants it ended, and it is.
        Named::Over(_) => return Ok(()),
    };
    state
        .store
        .release_lease(
            principal.tenant_id,
            id,
            token,
            &principal.actor(),
            state.now(),
        )
        .await?;
    state.hub.leases(principal.tenant_id);
    Ok(())
}

/// The tenant's leases, as operators see them.
pub async fn list(state: &AppState, tenant: TenantId) -> ApiResult<Vec<OpsLease>> {
    Ok(state.store.leases(tenant, state.now()).await?)
}

/// Ends lease `id` whoever holds it (operators).
pub async fn force_release(
    state: &AppState,
    principal: &Principal,
    id: LeaseId,
) -> ApiResult<OpsLease> {
    let lease = state
        .store
        .force_release_lease(
            principal.tenant_id,
            id,
            &principal.note(format!("lease:{id}")),
            state.now(),
        )
        .await;
    let lease = or_not_found(lease, format_args!("lease {id}"))?;
    tracing::info!(lease_id = %id, fencing_token = lease.lease.fencing_token, "lease force-released");
    state.hub.leases(principal.tenant_id);
    Ok(lease)
}

/// The last `limit` entries of the tenant's lease audit.
pub async fn audit(
    state: &AppState,
    tenant: TenantId,
    limit: u32,
) -> ApiResult<Vec<LeaseAuditEntry>> {
    Ok(state.store.lease_audit(tenant, limit).await?)
}

/// Plans the import of legacy `names` (suffixes for collisions) and, unless
/// `dry_run`, registers them.
pub async fn import_names(
    state: &AppState,
    principal: &Principal,
    names: &[LegacyName],
    dry_run: bool,
) -> ApiResult<ImportReport> {
    let skeletons: Vec<String> = names
        .iter()
        .filter_map(|n| switchboard_names::canonicalize(&n.name).ok())
        .map(|c| c.skeleton)
        .collect();
    // Suffixes may land on registered names too: look up every candidate skeleton
    // the plan could try, by planning against what is registered.
    let mut taken = state.store.registered_names(&skeletons).await?;
    let (mut planned, mut report) = crate::names_import::plan(names, &taken);
    // A suffixed name may be registered already: widen the lookup until stable.
    for _ in 0..4 {
        let more: Vec<String> = planned.iter().map(|p| p.skeleton.clone()).collect();
        let found = state.store.registered_names(&more).await?;
        if found.keys().all(|k| taken.contains_key(k)) {
            break;
        }
        taken.extend(found);
        (planned, report) = crate::names_import::plan(names, &taken);
    }
    report.dry_run = dry_run;
    if !dry_run {
        state
            .store
            .register_names(
                principal.tenant_id,
                &planned,
                &principal.note("names"),
                state.now(),
            )
            .await?;
        tracing::info!(
            registered = planned.len(),
            rejected = report.rejected.len(),
            "legacy names imported"
        );
    }
    Ok(report)
}
