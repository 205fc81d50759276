//! Memory instances (`/api/v1/memories`) and name + memory leases with fencing
//! tokens (`/api/v1/leases`), and the operator's view of them (`/api/v1/ops/leases`).
//!
//! Who may: agents (their own token) and operators with `ops:write` acquire, renew and
//! release; a read-only session may only look. Names go through the canonical-name
//! pipeline (`switchboard-names`): the lease is on the name's confusable skeleton,
//! service-wide.

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use super::extract::{Json, Path, RawJson, parse_json};
use super::idempotency::{self, Policy};
use super::limits::PageLimit;
use crate::clock::Millis;
use crate::error::{ApiError, ApiResult};
use crate::store::{NewLease, StoreError};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// `ttl_seconds` bounds.
pub(crate) const MIN_TTL_S: f64 = 0.1;
pub(crate) const MAX_TTL_S: f64 = 300.0;
/// `lock_delay_seconds` bounds and default (see ARCHITECTURE.md, "Lock delay").
pub(crate) const MAX_LOCK_DELAY_S: f64 = 60.0;
pub(crate) const DEFAULT_LOCK_DELAY_S: f64 = 5.0;
/// `label` and `owner_client`.
const MAX_NOTE_CHARS: usize = 200;

/// A new claim answers 201; a replay of it 200. A held lease (423) is an answer for
/// the moment only: the key is forgotten, so retrying with it asks again.
const LEASE_POLICY: Policy = Policy {
    replay_success: Some(StatusCode::OK),
    momentary: &[423],
};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register_memory))
        .routes(routes!(branch_memory))
        .routes(routes!(get_memory))
        .routes(routes!(lineage))
        .routes(routes!(acquire))
        .routes(routes!(renew))
        .routes(routes!(release))
        .routes(routes!(list_leases))
        .routes(routes!(force_release))
        .routes(routes!(lease_audit))
        .routes(routes!(import_names))
}

/// Agents and writing operators may hold leases; a read-only session may not.
pub(super) fn may_lease(p: &Principal) -> ApiResult<()> {
    if p.agent_id.is_some() {
        Ok(())
    } else {
        p.require(SCOPE_OPS_WRITE)
    }
}

fn note(field: &str, value: Option<String>) -> ApiResult<Option<String>> {
    match value {
        Some(v) if v.chars().count() > MAX_NOTE_CHARS => Err(ApiError::unprocessable(format!(
            "{field} is {} characters; at most {MAX_NOTE_CHARS}",
            v.chars().count()
        ))),
        v => Ok(v),
    }
}

fn seconds(field: &str, value: f64, min: f64, max: f64) -> ApiResult<Millis> {
    if value.is_finite() && (min..=max).contains(&value) {
        Ok((value * 1000.0).round() as Millis)
    } else {
        Err(ApiError::unprocessable(format!(
            "{field} must be between {min} and {max} seconds, not {value}"
        )))
    }
}

fn memory_not_found(id: MemoryId) -> impl FnOnce(StoreError) -> ApiError {
    move |e| match e {
        StoreError::NotFound => ApiError::not_found(format_args!("memory {id}")),
        e => e.into(),
    }
}

/// Register a memory instance: the server mints its UUIDv7 identity.
#[utoipa::path(post, path = "/api/v1/memories", tag = "leases", request_body = RegisterMemory,
    responses((status = 201, body = Memory), (status = 422, body = Problem)))]
async fn register_memory(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<RegisterMemory>,
) -> ApiResult<(StatusCode, axum::Json<Memory>)> {
    may_lease(&principal)?;
    let label = note("label", req.label)?;
    let memory = state
        .store
        .register_memory(principal.tenant_id, label.as_deref(), state.now())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(memory)))
}

/// Branch a memory: a new identity that records its parent and the parent's fencing
/// token at the branch.
#[utoipa::path(post, path = "/api/v1/memories/branch", tag = "leases", request_body = BranchMemory,
    responses((status = 201, body = Memory), (status = 404, body = Problem), (status = 422, body = Problem)))]
async fn branch_memory(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<BranchMemory>,
) -> ApiResult<(StatusCode, axum::Json<Memory>)> {
    may_lease(&principal)?;
    let label = note("label", req.label)?;
    let parent = req.parent_memory_instance_id;
    let memory = state
        .store
        .branch_memory(
            principal.tenant_id,
            parent,
            req.parent_fencing_token,
            label.as_deref(),
            state.now(),
        )
        .await
        .map_err(|e| match e {
            // A well-formed body with a token the parent has not reached.
            StoreError::Invalid(why) => ApiError::unprocessable(why),
            e => memory_not_found(parent)(e),
        })?;
    Ok((StatusCode::CREATED, axum::Json(memory)))
}

/// One memory instance with its current fencing token.
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}", tag = "leases",
    params(("memory_id" = MemoryId, Path)),
    responses((status = 200, body = Memory), (status = 404, body = Problem)))]
async fn get_memory(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<MemoryId>,
) -> ApiResult<axum::Json<Memory>> {
    let memory = state
        .store
        .memory(principal.tenant_id, id)
        .await
        .map_err(memory_not_found(id))?;
    Ok(axum::Json(memory))
}

/// A memory's ancestors (parent first) and descendants (breadth first).
#[utoipa::path(get, path = "/api/v1/memories/{memory_id}/lineage", tag = "leases",
    params(("memory_id" = MemoryId, Path)),
    responses((status = 200, body = Lineage), (status = 404, body = Problem)))]
async fn lineage(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<MemoryId>,
) -> ApiResult<axum::Json<Lineage>> {
    let lineage = state
        .store
        .lineage(principal.tenant_id, id)
        .await
        .map_err(memory_not_found(id))?;
    Ok(axum::Json(lineage))
}

/// Acquire a name + memory lease. Needs an `Idempotency-Key`: 201 for a new claim,
/// 200 for a replay of it; 423 `lease_held` when the name or the memory has another
/// live lease (nothing is claimed); 422 `name_invalid` / `name_confusable`.
#[utoipa::path(post, path = "/api/v1/leases", tag = "leases", request_body = AcquireLease,
    params(("Idempotency-Key" = String, Header, description = "Required; reuse it on retries")),
    responses((status = 201, body = Lease), (status = 200, body = Lease, description = "A replay"),
              (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem),
              (status = 422, body = Problem), (status = 423, body = Problem)))]
async fn acquire(
    State(state): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> ApiResult<Response> {
    may_lease(&principal)?;
    let req: AcquireLease = parse_json(&body)?;
    let name = switchboard_names::canonicalize(&req.name).map_err(|e| {
        let code = if e.code() == switchboard_names::NAME_CONFUSABLE {
            ErrorCode::NameConfusable
        } else {
            ErrorCode::NameInvalid
        };
        ApiError::new(code, e.to_string())
    })?;
    let new = NewLease {
        tenant: principal.tenant_id,
        name: name.canonical,
        skeleton: name.skeleton,
        memory: req.memory_instance_id,
        ttl_ms: seconds("ttl_seconds", req.ttl_seconds, MIN_TTL_S, MAX_TTL_S)?,
        lock_delay_ms: seconds(
            "lock_delay_seconds",
            req.lock_delay_seconds.unwrap_or(DEFAULT_LOCK_DELAY_S),
            0.0,
            MAX_LOCK_DELAY_S,
        )?,
        owner_client: note("owner_client", req.owner_client)?,
        holder: principal.actor().to_string(),
    };
    let memory = req.memory_instance_id;
    // A refusal of the moment (held, in its lock delay, confusable) costs no write:
    // checked read-only first, for a key not seen before. The claim checks again.
    let key = idempotency::key_of(&state, &principal, &headers, "/api/v1/leases", &body)?;
    state
        .store
        .lease_precheck(&new, &key, state.now())
        .await
        .map_err(memory_not_found(memory))?;
    let st = state.clone();
    idempotency::run(
        &state,
        &principal,
        &headers,
        "/api/v1/leases",
        &body,
        LEASE_POLICY,
        |key| async move {
            let lease = st
                .store
                .acquire_lease(&new, Some(&key), st.now())
                .await
                .map_err(memory_not_found(memory))?;
            tracing::info!(lease_id = %lease.lease_id, fencing_token = lease.fencing_token, "lease acquired");
            st.hub.leases(new.tenant);
            Ok(lease)
        },
    )
    .await
}

/// Renew: 200 with the new expiry; 409 `stale_fence` when the token is not the
/// lease's current one (or the lease is gone), 410 `lease_expired` after its expiry.
#[utoipa::path(post, path = "/api/v1/leases/renew", tag = "leases", request_body = RenewLease,
    responses((status = 200, body = Lease), (status = 409, body = Problem), (status = 410, body = Problem)))]
async fn renew(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<RenewLease>,
) -> ApiResult<axum::Json<Lease>> {
    may_lease(&principal)?;
    let started = std::time::Instant::now();
    let ttl = req
        .ttl_seconds
        .map(|t| seconds("ttl_seconds", t, MIN_TTL_S, MAX_TTL_S))
        .transpose()?;
    let lease = state
        .store
        .renew_lease(
            principal.tenant_id,
            req.lease_id,
            req.fencing_token,
            ttl,
            &principal.actor().to_string(),
            state.now(),
        )
        .await?;
    state
        .metrics
        .lease_renewal_latency
        .observe(started.elapsed().as_secs_f64());
    state.hub.leases(principal.tenant_id);
    Ok(axum::Json(lease))
}

/// Release: 204. Releasing a lease that is already gone is 204 too; a stale token of
/// a lease still held is 409 `stale_fence`.
#[utoipa::path(post, path = "/api/v1/leases/release", tag = "leases", request_body = ReleaseLease,
    responses((status = 204), (status = 409, body = Problem)))]
async fn release(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<ReleaseLease>,
) -> ApiResult<Response> {
    may_lease(&principal)?;
    state
        .store
        .release_lease(
            principal.tenant_id,
            req.lease_id,
            req.fencing_token,
            &principal.actor().to_string(),
            state.now(),
        )
        .await?;
    state.hub.leases(principal.tenant_id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Every lease of the tenant (holder, owner client, fencing token, expiry).
#[utoipa::path(get, path = "/api/v1/ops/leases", tag = "ops",
    responses((status = 200, body = LeasePage)))]
async fn list_leases(
    State(state): State<AppState>,
    principal: Principal,
) -> ApiResult<axum::Json<LeasePage>> {
    principal.require(SCOPE_OPS_READ)?;
    Ok(axum::Json(LeasePage {
        leases: state.store.leases(principal.tenant_id, state.now()).await?,
    }))
}

/// Force-release a lease: it ends now, both fences move past its token (its holder
/// is refused from then on) and the lock delay starts.
#[utoipa::path(post, path = "/api/v1/ops/leases/{lease_id}/force-release", tag = "ops",
    params(("lease_id" = LeaseId, Path)),
    responses((status = 200, body = OpsLease), (status = 404, body = Problem)))]
async fn force_release(
    State(state): State<AppState>,
    principal: Principal,
    Path(id): Path<LeaseId>,
) -> ApiResult<axum::Json<OpsLease>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let lease = state
        .store
        .force_release_lease(
            principal.tenant_id,
            id,
            &principal.actor().to_string(),
            state.now(),
        )
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(format_args!("lease {id}")),
            e => e.into(),
        })?;
    tracing::info!(lease_id = %id, fencing_token = lease.lease.fencing_token, "lease force-released");
    state.hub.leases(principal.tenant_id);
    Ok(axum::Json(lease))
}

/// The lease audit trail, newest first: acquired, renewed, released, expired,
/// taken over, force-released and fence-rejected, with the name and the memory only
/// as `SHA-256(value || tenant salt)`.
#[utoipa::path(get, path = "/api/v1/ops/lease-audit", tag = "ops", params(PageLimit),
    responses((status = 200, body = LeaseAuditPage)))]
async fn lease_audit(
    State(state): State<AppState>,
    principal: Principal,
    super::extract::Query(q): super::extract::Query<PageLimit>,
) -> ApiResult<axum::Json<LeaseAuditPage>> {
    principal.require(SCOPE_OPS_READ)?;
    let limit = q.get()?;
    Ok(axum::Json(LeaseAuditPage {
        entries: state.store.lease_audit(principal.tenant_id, limit).await?,
    }))
}

/// Most names per import request.
const MAX_IMPORT: usize = 10_000;

/// Import legacy names into the registry of canonical names: each through the
/// pipeline; on a collision the oldest keeps the name and the others get a
/// deterministic `-N` suffix. With `dry_run` it reports and changes nothing.
#[utoipa::path(post, path = "/api/v1/ops/names/import", tag = "ops", request_body = ImportNames,
    responses((status = 200, body = ImportReport), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn import_names(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<ImportNames>,
) -> ApiResult<axum::Json<ImportReport>> {
    principal.require(SCOPE_OPS_WRITE)?;
    if req.names.len() > MAX_IMPORT {
        return Err(ApiError::unprocessable(format!(
            "{} names in one import; at most {MAX_IMPORT}, split the file",
            req.names.len()
        )));
    }
    let skeletons: Vec<String> = req
        .names
        .iter()
        .filter_map(|n| switchboard_names::canonicalize(&n.name).ok())
        .map(|c| c.skeleton)
        .collect();
    // Suffixes may land on registered names too: look up every candidate skeleton
    // the plan could try, by planning against what is registered.
    let mut taken = state.store.registered_names(&skeletons).await?;
    let (mut planned, mut report) = crate::names_import::plan(&req.names, &taken);
    // A suffixed name may be registered already: widen the lookup until stable.
    for _ in 0..4 {
        let more: Vec<String> = planned.iter().map(|p| p.skeleton.clone()).collect();
        let found = state.store.registered_names(&more).await?;
        if found.keys().all(|k| taken.contains_key(k)) {
            break;
        }
        taken.extend(found);
        (planned, report) = crate::names_import::plan(&req.names, &taken);
    }
    report.dry_run = req.dry_run;
    if !req.dry_run {
        state
            .store
            .register_names(principal.tenant_id, &planned)
            .await?;
        tracing::info!(
            registered = planned.len(),
            rejected = report.rejected.len(),
            "legacy names imported"
        );
    }
    Ok(axum::Json(report))
}
