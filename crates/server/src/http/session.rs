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
    Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE, SESSION_COOKIE, generate_token, hash_token,
    request_cookie, secure,
};
use super::extract::{Json, Query};
use crate::clock::{Millis, to_timestamp};
use crate::error::{ApiError, ApiResult};
use crate::store::{GrantKind, NewGrant};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cookie::{Cookie, SameSite};
use std::time::Duration;
use switchboard_proto::{
    CreateLoginLink, CreateSession, ErrorCode, LoginLink, Problem, SessionInfo,
};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How long a console session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a one-time login ticket can be redeemed.
pub const TICKET_TTL: Duration = Duration::from_secs(120);

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_session, session_info, end_session))
        .routes(routes!(create_login_link))
}

/// `GET /login?ticket=…`: a page route, outside the API.
pub(super) fn page_routes() -> Router<AppState> {
    Router::new().route("/login", axum::routing::get(redeem))
}

fn millis(d: Duration) -> Millis {
    d.as_millis() as Millis
}

/// The `Set-Cookie` value that stores `session` (or, with `None`, removes it).
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

fn info(principal: &Principal) -> SessionInfo {
    SessionInfo {
        read_only: !principal.has(SCOPE_OPS_WRITE),
        scopes: principal.scopes.clone(),
        via: if principal.session.is_some() {
            "cookie"
        } else {
            "bearer"
        }
        .to_owned(),
        expires_at: principal
            .session
            .as_ref()
            .map(|s| to_timestamp(s.expires_at)),
    }
}

/// Mints a session for `token_hash` with `scopes`; returns its id (the cookie value).
async fn start_session(
    state: &AppState,
    tenant: switchboard_proto::TenantId,
    token_hash: &[u8],
    scopes: &[String],
) -> ApiResult<(String, Millis)> {
    let session = generate_token("sb_ses_");
    let now = state.now();
    let expires_at = now + millis(SESSION_TTL);
    state
        .store
        .insert_grant(
            &NewGrant {
                hash: &hash_token(&session),
                kind: GrantKind::Session,
                tenant,
                token_hash,
                scopes,
                expires_at,
            },
            None,
            now,
        )
        .await?;
    Ok((session, expires_at))
}

/// Log in to the console with an operator token: sets the session cookie.
#[utoipa::path(post, path = "/api/v1/session", tag = "console", request_body = CreateSession,
    responses((status = 201, body = SessionInfo), (status = 401, body = Problem), (status = 403, body = Problem)))]
async fn create_session(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(req): Json<CreateSession>,
) -> ApiResult<Response> {
    let token = req.token.trim();
    let token_hash = hash_token(token);
    let record = match state.store.token(&token_hash).await? {
        Some(r) if !token.is_empty() => r,
        _ => {
            return Err(ApiError::new(
                ErrorCode::Unauthorized,
                "that token is unknown or revoked; paste the operator token (the \
                 operator-token file next to the database, or what `switchboard serve` wrote)",
            ));
        }
    };
    if record.agent_id.is_some() || !record.scopes.iter().any(|s| s == SCOPE_OPS_READ) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "this is not an operator token (it lacks the \"ops:read\" scope); the console \
             needs an operator token",
        ));
    }
    let (session, expires_at) =
        start_session(&state, record.tenant_id, &token_hash, &record.scopes).await?;
    tracing::info!("console session started");
    let body = SessionInfo {
        read_only: !record.scopes.iter().any(|s| s == SCOPE_OPS_WRITE),
        scopes: record.scopes,
        via: "cookie".to_owned(),
        expires_at: Some(to_timestamp(expires_at)),
    };
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
    Ok(axum::Json(info(&principal)))
}

/// Log out: ends the session (if any) and clears the cookie. Always 204.
#[utoipa::path(delete, path = "/api/v1/session", tag = "console",
    responses((status = 204, description = "logged out")))]
async fn end_session(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    if let Some(session) = request_cookie(&headers, SESSION_COOKIE) {
        state.store.delete_grant(&hash_token(&session)).await?;
        tracing::info!("console session ended");
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
    let scopes: Vec<String> = if req.read_only {
        vec![SCOPE_OPS_READ.to_owned()]
    } else {
        principal.scopes.clone()
    };
    let link = mint_ticket(&state, &principal, &scopes).await?;
    Ok((StatusCode::CREATED, axum::Json(link)))
}

async fn mint_ticket(
    state: &AppState,
    principal: &Principal,
    scopes: &[String],
) -> ApiResult<LoginLink> {
    let ticket = generate_token("sb_tk_");
    let now = state.now();
    let expires_at = now + millis(TICKET_TTL);
    state
        .store
        .insert_grant(
            &NewGrant {
                hash: &hash_token(&ticket),
                kind: GrantKind::Ticket,
                tenant: principal.tenant_id,
                token_hash: &principal.token_hash,
                scopes,
                expires_at,
            },
            Some(&principal.note("console").detail(scopes.join(" "))),
            now,
        )
        .await?;
    tracing::info!(
        read_only = !scopes.iter().any(|s| s == SCOPE_OPS_WRITE),
        "console login link minted"
    );
    Ok(LoginLink {
        path: format!("/login?ticket={ticket}"),
        expires_at: to_timestamp(expires_at),
    })
}

/// For embedders (the desktop shell, `switchboard serve`): a one-time login link for
/// the operator `token`, as `/login?ticket=…` relative to the server's URL.
pub async fn login_link(state: &AppState, token: &str, read_only: bool) -> ApiResult<LoginLink> {
    let token_hash = hash_token(token);
    let record = state.store.token(&token_hash).await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::Unauthorized,
            "the operator token is unknown or revoked",
        )
    })?;
    let principal = Principal {
        tenant_id: record.tenant_id,
        agent_id: record.agent_id,
        agent_name: record.agent_name,
        scopes: record.scopes,
        token_hash,
        session: None,
    };
    let scopes = if read_only {
        vec![SCOPE_OPS_READ.to_owned()]
    } else {
        principal.scopes.clone()
    };
    mint_ticket(state, &principal, &scopes).await
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
    let grant = state
        .store
        .take_grant(&hash_token(q.ticket.trim()), GrantKind::Ticket, state.now())
        .await?
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "this login link was already used or has expired (links work once, for two \
                 minutes); ask for a new one, or log in with the operator token",
            )
        })?;
    let (session, _) = start_session(
        &state,
        grant.record.tenant_id,
        &grant.token_hash,
        &grant.record.scopes,
    )
    .await?;
    tracing::info!("console login link redeemed");
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
