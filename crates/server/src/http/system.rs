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
/// tokens have it; `POST /api/v1/ops/tokens` mints one that has nothing else): the
/// depth series name agents, which the API hides from anyone outside their tenant
/// (I9). A scrape sees its own tenant's agents only, each series labelled with the
/// tenant, so several tenants' scrapes never collide.
async fn metrics(State(state): State<AppState>, Scraper(principal): Scraper) -> Response {
    let depth = match state.store.depth(Some(principal.tenant_id)).await {
        Ok(d) => d,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let disabled = match state.store.callbacks(principal.tenant_id, None).await {
        Ok(c) => c
            .iter()
            .filter(|c| c.state == switchboard_proto::CallbackState::Disabled)
            .count() as u64,
        Err(e) => return ApiError::from(e).into_response(),
    };
    // Database-wide numbers: only for the deployment's own tenant, as in the overview.
    let health = if principal.tenant_id == state.tenant {
        state.queue_health().await
    } else {
        None
    };
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(&depth, disabled, health.as_ref()),
    )
        .into_response()
}
