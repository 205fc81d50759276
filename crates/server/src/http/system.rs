//! Health, readiness, metrics and capabilities.

use super::AppState;
use super::auth::Scraper;
use super::limits::limits;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use switchboard_proto::Capabilities;
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
        backend: state.backend().to_owned(),
        limits: limits(&state.config),
    })
}

async fn readyz(State(state): State<AppState>) -> Response {
    match crate::app::system::ready(&state).await {
        Ok(()) => "ready".into_response(),
        Err(e) => e.into_response(),
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
    let body = match crate::app::system::metrics(&state, &principal).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}
