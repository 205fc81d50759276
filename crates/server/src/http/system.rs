//! Health, readiness, metrics and capabilities.

use super::AppState;
use super::auth::Scraper;
use super::limits::limits;
use crate::error::ApiError;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use switchboard_proto::{Capabilities, ErrorCode};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(capabilities))
}

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
}

/// Version, backend and every enforced limit. Public.
#[utoipa::path(get, path = "/api/v1/capabilities", tag = "system", responses((status = 200, body = Capabilities)))]
async fn capabilities(State(state): State<AppState>) -> axum::Json<Capabilities> {
    axum::Json(Capabilities {
        api_version: switchboard_proto::API_VERSION.to_owned(),
        server_version: env!("CARGO_PKG_VERSION").to_owned(),
        backend: state.store.backend().to_owned(),
        limits: limits(&state.config),
    })
}

/// How long `/readyz` waits for the database.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

async fn readyz(State(state): State<AppState>) -> Response {
    if state.shutdown.is_cancelled() {
        return ApiError::new(ErrorCode::Unavailable, "the server is shutting down")
            .into_response();
    }
    // Readiness answers quickly: a request would wait up to the pool's acquire
    // timeout for a database that is down, a load balancer should not.
    match tokio::time::timeout(READY_WITHIN, state.store.ping()).await {
        Ok(Ok(())) => "ready".into_response(),
        Ok(Err(e)) => ApiError::from(e).into_response(),
        Err(_) => {
            let mut e = ApiError::new(
                ErrorCode::Unavailable,
                format!(
                    "the database did not answer within {} s; requests are answered 503 until it does",
                    READY_WITHIN.as_secs()
                ),
            );
            e.retry_after = Some(1);
            e.into_response()
        }
    }
}

/// The Prometheus exposition. It needs a bearer token with `metrics:read` (operator
/// tokens have it; `POST /api/v1/ops/tokens` mints one that has nothing else). Every
/// series of a tenant carries its `tenant` label, and a tenant's token sees its own
/// tenant's series only (I9): its agents' depth, and the counters and histograms of
/// what its agents and operators did. The deployment admin's token (scope `admin`)
/// sees every tenant's, plus the process's own: the database's health, transaction
/// retries, background task failures, rate limits drawn before a tenant was known.
async fn metrics(State(state): State<AppState>, Scraper(principal): Scraper) -> Response {
    let admin = principal.has(super::auth::SCOPE_ADMIN);
    let (scope, tenant) = match admin {
        true => (crate::metrics::Scope::All, None),
        false => (
            crate::metrics::Scope::Tenant(principal.tenant_id),
            Some(principal.tenant_id),
        ),
    };
    let depth = match state.store.depth(tenant).await {
        Ok(d) => d,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let disabled = match disabled_callbacks(&state, tenant).await {
        Ok(c) => c,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let (health, retries) = match admin {
        true => (state.queue_health().await, state.transaction_retries()),
        false => (None, Vec::new()),
    };
    let scrape = crate::metrics::Scrape {
        scope,
        depth: &depth,
        disabled_callbacks: &disabled,
        health: health.as_ref(),
        retries: &retries,
    };
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(&scrape),
    )
        .into_response()
}

/// Disabled webhook callbacks of `tenant` (or of every tenant), per tenant.
async fn disabled_callbacks(
    state: &AppState,
    tenant: Option<switchboard_proto::TenantId>,
) -> crate::store::StoreResult<Vec<(switchboard_proto::TenantId, u64)>> {
    let tenants = match tenant {
        Some(t) => vec![t],
        None => state.store.tenants().await?.iter().map(|t| t.id).collect(),
    };
    let mut out = Vec::with_capacity(tenants.len());
    for t in tenants {
        let disabled = state
            .store
            .callbacks(t, None)
            .await?
            .iter()
            .filter(|c| c.state == switchboard_proto::CallbackState::Disabled)
            .count() as u64;
        out.push((t, disabled));
    }
    Ok(out)
}
