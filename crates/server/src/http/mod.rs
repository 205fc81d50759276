//! The HTTP API v1. The router is built by [`router`], so tests can drive it with
//! `oneshot` as well as over real TCP. Routes live next to their handlers, one
//! module per resource, merged here.

mod admin;
pub mod auth;
mod callbacks;
mod client_report;
mod client_settings;
mod console;
mod credentials;
mod devices;
pub use console::embedded as console_embedded;
pub mod extract;
#[cfg(test)]
mod fuzz;
mod idempotency;
mod inbox;
mod jobs;
mod keys;
mod leases;
pub mod limits;
mod memories;
mod messages;
mod notes;
mod oauth;
mod ops;
mod problems;
mod records;
pub mod region;
mod seed;
pub mod session;
mod signatures;
mod system;

pub(crate) use crate::app::AppState;
use crate::error::ApiError;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use switchboard_proto::ErrorCode;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard",
        description = "Coordination server for AI agents: durable transactional inboxes, \
                       claims under fenced visibility leases, dead-letter quarantine.",
    ),
    tags(
        (name = "agent", description = "An agent's inbox"),
        (name = "messages", description = "Business writes that fan out into inboxes"),
        (name = "ops", description = "The operator API"),
        (name = "callbacks", description = "Webhook callbacks: registration with a challenge, signed deliveries"),
        (name = "leases", description = "Memory instances and name + memory leases with fencing tokens"),
        (name = "system", description = "Health, metrics, capabilities"),
        (name = "admin", description = "The deployment admin's API: tenants"),
    ),
    components(schemas(switchboard_proto::Problem, switchboard_proto::InboxUpdated, switchboard_proto::OpsChange))
)]
struct ApiDoc;

/// The address of the peer of a connection, whatever the listener (plain TCP or
/// TLS): what `ConnectInfo` carries to handlers.
#[derive(Debug, Clone, Copy)]
pub struct PeerAddr(pub std::net::SocketAddr);

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

impl
    axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, crate::tls::TlsListener>>
    for PeerAddr
{
    fn connect_info(stream: axum::serve::IncomingStream<'_, crate::tls::TlsListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Builds the whole application: API, system endpoints and the console.
pub fn router(state: AppState) -> Router {
    let (api, mut openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(admin::routes())
        .merge(inbox::routes())
        .merge(callbacks::routes())
        .merge(client_report::routes())
        .merge(client_settings::routes())
        .merge(messages::routes())
        .merge(ops::routes())
        .merge(credentials::routes())
        .merge(devices::routes())
        .merge(oauth::api_routes())
        .merge(jobs::routes())
        .merge(keys::routes())
        .merge(leases::routes())
        .merge(memories::routes())
        .merge(records::routes())
        .merge(session::routes())
        .merge(system::api_routes())
        .split_for_parts();
    seed::document(&mut openapi);
    problems::document(&mut openapi);
    let openapi = Arc::new(openapi);
    let api = api
        .route(
            "/api/v1/openapi.json",
            axum::routing::get(move || {
                let doc = openapi.clone();
                async move { axum::Json(doc.as_ref().clone()) }
            }),
        )
        .route("/api/v1/{*rest}", axum::routing::any(api_not_found))
        .method_not_allowed_fallback(method_not_allowed);
    let rest = seed_alias_or_console(
        api.clone().with_state(state.clone()),
        console::router(&state.config).with_state(state.clone()),
    );
    let max_body = state.config.max_body_bytes;
    api.merge(system::routes())
        .merge(oauth::routes())
        .merge(session::page_routes())
        .merge(api_prefixes())
        .fallback_service(rest)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            signatures::layer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            region::layer,
        ))
        .layer(axum::middleware::from_fn(check_origin))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            notes::layer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            network_deadline,
        ))
        .layer(DefaultBodyLimit::max(max_body))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            TraceLayer::new_for_http().make_span_with(|req: &Request| {
                // Method, path and request id only: never headers, query or bodies (I11).
                let id = req
                    .headers()
                    .get(REQUEST_ID)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                tracing::info_span!("http", method = %req.method(), path = %req.uri().path(), request_id = %id)
            })
            .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .with_state(state)
}

/// What no route took: a path under `/v1/` is an API path without its `/api`
/// prefix (`/v1/leases`, `/v1/capabilities`, `/v1/memories/{id}/records`: the seeds
/// write them so), rewritten to `/api/v1/...` and routed by the API alone, after the
/// outer layers (limits, notes, deadline, region) have seen it as it came; anything
/// else is the console's. A fallback rather than a `/v1/{*rest}` route: a route's
/// path parameters would stay on the request and confuse the API's own.
fn seed_alias_or_console(api: Router, console: Router) -> axum::routing::MethodRouter {
    use tower::ServiceExt;
    axum::routing::any(move |mut req: Request| {
        let target = match seed_path(req.uri()) {
            Some(uri) => {
                *req.uri_mut() = uri;
                api.clone()
            }
            None => console.clone(),
        };
        async move {
            match target.oneshot(req).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    })
}

/// `/v1/...` as the API's `/api/v1/...` (query kept); `None` for any other path.
fn seed_path(uri: &axum::http::Uri) -> Option<axum::http::Uri> {
    if !uri.path().starts_with("/v1/") {
        return None;
    }
    let pq = format!("/api{}", uri.path_and_query()?.as_str())
        .parse()
        .ok()?;
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(pq);
    axum::http::Uri::from_parts(parts).ok()
}

/// The prefixes that belong to the API, the OAuth server and the system endpoints:
/// an unknown path under one of them is a JSON 404, never the console's page (a
/// client that expects JSON must not get HTML with a 200).
fn api_prefixes() -> Router<AppState> {
    use axum::routing::any;
    [
        "/api",
        "/api/",
        "/api/{*rest}",
        "/v1",
        "/v1/",
        "/oauth",
        "/oauth/{*rest}",
        "/.well-known",
        "/.well-known/{*rest}",
        "/mcp",
        "/mcp/{*rest}",
        "/metrics/{*rest}",
        "/healthz/{*rest}",
        "/readyz/{*rest}",
    ]
    .into_iter()
    .fold(Router::new(), |r, path| r.route(path, any(api_not_found)))
}

async fn api_not_found(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!(
            "no API route for {method} {}; see /api/v1/openapi.json for the routes",
            uri.path()
        ),
    )
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{method} is not allowed on {}; see /api/v1/openapi.json for the methods",
            uri.path()
        ),
    )
}

/// On a database reached over the network (PostgreSQL, MariaDB / MySQL), the
/// longest a request may take: the pool's acquire timeout (5 s) plus the statement
/// timeout (15 s).
pub const NETWORK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Answers 503 `unavailable` for a request still running at [`NETWORK_DEADLINE`].
/// The statement timeout is enforced by the database itself: when the network path
/// to it dies without a reset (a blackhole, a half-open connection), no answer, not
/// even the timeout's, comes back, and a request on such a connection would wait
/// until TCP gives up, many minutes later (found by the network-fault scenario of
/// issue 17). Dropping the handler drops its transaction, which the database rolls
/// back when the connection ends; an idempotency key it left in flight is taken over
/// by a retry on this instance at once. Streams are not cut: their handler returns
/// as soon as the stream starts. SQLite is local: its own timeouts answer.
async fn network_deadline(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    if state.backend() == "sqlite" {
        return next.run(req).await;
    }
    match tokio::time::timeout(NETWORK_DEADLINE, next.run(req)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!("the database did not answer within the request deadline");
            let mut e = ApiError::new(
                ErrorCode::Unavailable,
                "the database did not answer in time; if the request wrote, it is rolled \
                 back or, if it had committed, a retry with the same Idempotency-Key \
                 returns its result; retry after a short delay",
            );
            e.retry_after = Some(1);
            e.into_response()
        }
    }
}

/// Refuses state-changing requests from another origin (a web page the operator
/// visits must not drive the local server). Requests without Origin (CLI, SDK) pass.
async fn check_origin(req: Request, next: Next) -> Response {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && let Some(origin) = req.headers().get(header::ORIGIN) {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok());
        let origin_host = origin.to_str().ok().and_then(|o| {
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
        });
        if host.is_none() || origin_host != host {
            return ApiError::new(
                ErrorCode::Forbidden,
                "cross-origin request refused: state-changing requests must come from the \
                     console's own origin or from a client that sends no Origin header",
            )
            .into_response();
        }
    }
    next.run(req).await
}
