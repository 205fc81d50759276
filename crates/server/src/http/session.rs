//! Console login: a session cookie from the operator token, or from a one-time link.
//!
//! - `POST /api/v1/session {"token"}` checks an operator token and answers with an
//!   HttpOnly, SameSite=Strict, Path=/ cookie ([`SESSION_COOKIE`]) holding a fresh
//!   random session id. Only its SHA-256 is stored, with an expiry ([`SESSION_TTL`]).
//! - `GET /api/v1/session` says who the caller is (scopes, read-only, expiry): the
//!   console asks it first and shows its login page on 401.
//! - `DELETE /api/v1/session` ends the session and clears the cookie.
//! - `POST /api/v1/ops/login-links` mints a single-use *ticket* ([`TICKET_TTL`]);
//!   `GET /login?ticket=…` redeems it, sets the cookie and redirects (303) to `/`, so
//!   the ticket does not stay in the address bar, the history or a Referer.
//!
//! A grant never has more scopes than the token it came from, and revoking that token
//! ends it. Tickets, session ids and tokens never reach logs, errors or audit rows.

use super::AppState;
use super::auth::{
    Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE, SESSION_COOKIE, request_cookie, secure,
};
use super::extract::{Json, Query};
use crate::access::sessions;
use crate::error::{ApiError, ApiResult};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use switchboard_proto::{
    CreateLoginLink, CreateSession, ErrorCode, LoginLink, Problem, SessionInfo,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use crate::access::sessions::{SESSION_TTL, TICKET_TTL};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_session, session_info, end_session))
        .routes(routes!(create_login_link))
}

/// `GET /login?ticket=…`: a page route, outside the API.
pub(super) fn page_routes() -> Router<AppState> {
    Router::new().route("/login", axum::routing::get(redeem))
}

fn session_cookie(session: Option<&str>, secure: bool) -> HeaderValue {
    let mut c = Cookie::build((SESSION_COOKIE, session.unwrap_or("").to_owned()))
        .secure(secure)
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/")
        .max_age(cookie::time::Duration::seconds(if session.is_some() {
            SESSION_TTL.as_secs() as i64
        } else {
            0
        }))
        .build();
    if session.is_none() {
        c.make_removal();
    }
    // Base64url ids and fixed attributes: always a valid header value.
    HeaderValue::from_str(&c.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Log in to the console with an operator token: sets the session cookie.
#[utoipa::path(post, path = "/api/v1/session", tag = "console", request_body = CreateSession,
    responses((status = 201, body = SessionInfo), (status = 401, body = Problem), (status = 403, body = Problem)))]
async fn create_session(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<CreateSession>,
) -> ApiResult<Response> {
    let (session, body) = state.sessions().from_token(&req.token).await?;
    let mut resp = (StatusCode::CREATED, axum::Json(body)).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        session_cookie(Some(&session), secure(&state, &headers)),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}

/// Who the caller is: scopes, whether read-only, and the session's expiry.
#[utoipa::path(get, path = "/api/v1/session", tag = "console",
    responses((status = 200, body = SessionInfo), (status = 401, body = Problem)))]
async fn session_info(principal: Principal) -> ApiResult<axum::Json<SessionInfo>> {
    if principal.agent_id.is_some() {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "agent tokens have no console session; use an operator token",
        ));
    }
    Ok(axum::Json(sessions::info(&principal)))
}

/// Log out: ends the session (if any) and clears the cookie. Always 204.
#[utoipa::path(delete, path = "/api/v1/session", tag = "console",
    responses((status = 204, description = "logged out")))]
async fn end_session(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(session) = request_cookie(&headers, SESSION_COOKIE) {
        state.sessions().end(&session).await?;
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        session_cookie(None, secure(&state, &headers)),
    );
    Ok(resp)
}

/// Mints a one-time console login link (single use, two minutes). A read-only link
/// opens a session without `ops:write`; nobody gets more than they have.
#[utoipa::path(post, path = "/api/v1/ops/login-links", tag = "console", request_body = CreateLoginLink,
    responses((status = 201, body = LoginLink), (status = 403, body = Problem)))]
async fn create_login_link(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<CreateLoginLink>,
) -> ApiResult<(StatusCode, axum::Json<LoginLink>)> {
    principal.require(SCOPE_OPS_READ)?;
    if !req.read_only {
        principal.require(SCOPE_OPS_WRITE)?;
    }
    if principal.agent_id.is_some() {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "agent tokens cannot mint console links; use an operator token",
        ));
    }
    let scopes = sessions::link_scopes(&principal, req.read_only);
    let link = state.sessions().mint_ticket(&principal, &scopes).await?;
    Ok((StatusCode::CREATED, axum::Json(link)))
}

/// A one-time login link from the operator `token` itself: what `switchboard
/// serve` prints and the desktop app opens.
pub async fn login_link(state: &AppState, token: &str, read_only: bool) -> ApiResult<LoginLink> {
    state.sessions().login_link(token, read_only).await
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginQuery {
    ticket: String,
}

/// Redeems a one-time ticket: sets the session cookie and redirects to `/`.
async fn redeem(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> ApiResult<Response> {
    let session = state.sessions().redeem(&q.ticket).await?;
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    h.insert(header::LOCATION, HeaderValue::from_static("/"));
    h.insert(
        header::SET_COOKIE,
        session_cookie(Some(&session), secure(&state, &headers)),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    Ok(resp)
}
