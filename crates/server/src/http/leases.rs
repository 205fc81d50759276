//! Name + memory leases with fencing tokens (`/api/v1/leases`), and the operator's
//! view of them (`/api/v1/ops/leases`). Memory instances are in `memories.rs`.
//!
//! The names-and-leases seed's wire format is accepted too (issue 12): its field
//! names as aliases or extra fields (`display_name`, `owner_client_id`,
//! `canonical_name`; renewals and releases that name the lease by its fields), and
//! its paths without the `/api` prefix (`/v1/leases…`, `/v1/memories…`), which run
//! the same handlers. The OpenAPI document lists both spellings and both paths
//! (`seed.rs`).
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
use crate::app::leases::{self as app, MAX_TTL_S, MIN_TTL_S, Naming, NewLease};
use crate::clock::Millis;
use crate::error::{ApiError, ApiResult};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

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
        .routes(routes!(acquire))
        .routes(routes!(renew))
        .routes(routes!(release))
        .routes(routes!(list_leases))
        .routes(routes!(force_release))
        .routes(routes!(lease_audit))
        .routes(routes!(import_names))
}

/// Agents (with their inbox scope) and writing operators may hold leases; a
/// read-only session or token may not.
pub(super) fn may_lease(p: &Principal) -> ApiResult<()> {
    p.refuse_read_only()?;
    match p.agent_id {
        Some(agent) => p.require(&crate::access::inbox_scope(agent)),
        None => p.require(SCOPE_OPS_WRITE),
    }
}

pub(super) fn note(field: &str, value: Option<String>) -> ApiResult<Option<String>> {
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

/// Acquire a name + memory lease (also at `/v1/leases`; the seed's `display_name`
/// and `owner_client_id` are accepted for `name` and `owner_client`, and the answer
/// carries `canonical_name` as well as `name`). Needs an `Idempotency-Key`: 201 for
/// a new claim, 200 for a replay of it; 423 `lease_held` when the name or the memory has another
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
    let name = app::lease_name(&req.name, req.display_name.as_deref())?;
    let new = NewLease {
        tenant: principal.tenant_id,
        name: name.canonical,
        skeleton: name.skeleton,
        display_name: note("display_name", req.display_name)?,
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
        holder_key: principal.actor().key(),
    };
    let key = idempotency::key_of(&state, &principal, &headers, "/api/v1/leases", &body)?;
    app::precheck(&state, &new, &key).await?;
    let st = state.clone();
    idempotency::run(
        &state,
        &principal,
        &headers,
        "/api/v1/leases",
        &body,
        LEASE_POLICY,
        |key| async move { app::acquire(&st, &new, &key).await },
    )
    .await
}

/// Renew, naming the lease by `lease_id` or by `canonical_name`,
/// `memory_instance_id` and `owner_client_id` (the seed's way); also at
/// `/v1/leases/renew`. 200 with the new expiry; 409 `stale_fence` when the token is
/// not the lease's current one, the lease is gone, or the fields do not match it;
/// 410 `lease_expired` after its expiry; 422 when no lease is named.
#[utoipa::path(post, path = "/api/v1/leases/renew", tag = "leases", request_body = RenewLease,
    responses((status = 200, body = Lease), (status = 409, body = Problem), (status = 410, body = Problem),
              (status = 422, body = Problem)))]
async fn renew(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<RenewLease>,
) -> ApiResult<axum::Json<Lease>> {
    may_lease(&principal)?;
    let ttl = req
        .ttl_seconds
        .map(|t| seconds("ttl_seconds", t, MIN_TTL_S, MAX_TTL_S))
        .transpose()?;
    let naming = Naming {
        lease_id: req.lease_id,
        canonical_name: req.canonical_name,
        memory_instance_id: req.memory_instance_id,
        owner_client_id: req.owner_client_id,
        fencing_token: req.fencing_token,
    };
    let lease = app::renew(&state, &principal, naming, ttl).await?;
    Ok(axum::Json(lease))
}

/// Release, naming the lease as for a renewal; also at `/v1/leases/release`. 204.
/// Releasing a lease that is already gone is 204 too; a stale token of a lease
/// still held, or fields that do not match it, are 409 `stale_fence`.
#[utoipa::path(post, path = "/api/v1/leases/release", tag = "leases", request_body = ReleaseLease,
    responses((status = 204), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn release(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<ReleaseLease>,
) -> ApiResult<Response> {
    may_lease(&principal)?;
    let naming = Naming {
        lease_id: req.lease_id,
        canonical_name: req.canonical_name,
        memory_instance_id: req.memory_instance_id,
        owner_client_id: req.owner_client_id,
        fencing_token: req.fencing_token,
    };
    app::release(&state, &principal, naming).await?;
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
        leases: app::list(&state, principal.tenant_id).await?,
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
    let lease = app::force_release(&state, &principal, id).await?;
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
        entries: app::audit(&state, principal.tenant_id, limit).await?,
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
    let report = app::import_names(&state, &principal, &req.names, req.dry_run).await?;
    Ok(axum::Json(report))
}
