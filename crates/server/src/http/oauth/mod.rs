//! The OAuth endpoints (issue 15), outside `/api/v1` because their RFCs define
//! them: metadata (RFC 8414), the JWKS (RFC 7517), the token endpoint with the
//! token exchange grant (RFC 8693: a static credential, or an access token this
//! server issued, for a narrower short-lived JWT; `token.rs`), and revocation (RFC 7009). They take `application/x-www-form-urlencoded` and answer
//! OAuth errors (`{"error", "error_description"}`, RFC 6749 §5.2), never a problem
//! document.
//!
//! The issuer is this server as the request reached it (`http(s)://` + `Host`), so a
//! token works on every instance behind one address and on the embedded server at
//! whatever port it got; `iss` and `aud` are both the issuer.

//!
//! Parts: `token.rs` (the token endpoint's grants), `device.rs` (device
//! authorization), `authorize.rs` (the authorization endpoint and its consent,
//! for the sign-in of native apps), `access.rs` (access tokens on the API, and
//! revocation).

mod access;
mod authorize;
mod device;
mod token;

pub(super) use authorize::api_routes;

use super::AppState;
use super::auth;
use crate::error::ApiError;
use crate::oauth;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::collections::BTreeMap;

pub(super) const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";
pub(super) const JWKS_PATH: &str = "/oauth/jwks.json";
pub(super) const TOKEN_PATH: &str = "/oauth/token";
pub(super) const REVOKE_PATH: &str = "/oauth/revoke";
pub(super) const DEVICE_PATH: &str = "/oauth/device_authorization";
pub(super) const AUTHORIZE_PATH: &str = "/oauth/authorize";
/// The console page where operators approve device logins.
pub(super) const DEVICES_PAGE: &str = "/devices";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(METADATA_PATH, get(metadata))
        .route(JWKS_PATH, get(jwks))
        .route(TOKEN_PATH, post(token::token))
        .route(REVOKE_PATH, post(access::revoke))
        .route(DEVICE_PATH, post(device::device_authorization))
        .route(AUTHORIZE_PATH, get(authorize::authorize))
}

/// This server's issuer identifier as the request reached it.
pub(super) fn issuer(state: &AppState, headers: &HeaderMap) -> Result<String, OAuthError> {
    auth::issuer(state, headers).ok_or_else(|| {
        OAuthError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the Host header is missing or not a host[:port]; the issuer is this server's \
             address as the request names it",
        )
    })
}

/// An OAuth error answer (RFC 6749 §5.2, RFC 7009 §2.2.1, RFC 8693 §2.2.2).
#[derive(Debug)]
pub(super) struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
    retry_after: Option<u64>,
}

impl OAuthError {
    pub(super) fn new(
        status: StatusCode,
        error: &'static str,
        description: impl Into<String>,
    ) -> Self {
        Self {
            status,
            error,
            description: description.into(),
            retry_after: None,
        }
    }

    pub(super) fn request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }
}

/// A problem met on the way (a rate limit, the database) in OAuth's shape, with
/// the problem's code as the error.
impl From<ApiError> for OAuthError {
    fn from(e: ApiError) -> Self {
        let p = &e.problem;
        Self {
            status: StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            error: match p.status {
                429 => "rate_limited",
                503 => "temporarily_unavailable",
                _ => "server_error",
            },
            description: p.detail.clone().unwrap_or_else(|| p.title.clone()),
            retry_after: e.retry_after,
        }
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            no_store(),
            axum::Json(json!({"error": self.error, "error_description": self.description})),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// RFC 6749 §5.1: answers with tokens (and their errors) are kept by no cache.
pub(super) fn no_store() -> [(header::HeaderName, &'static str); 2] {
    [
        (header::CACHE_CONTROL, "no-store"),
        (header::PRAGMA, "no-cache"),
    ]
}

/// The form of an OAuth request: `application/x-www-form-urlencoded`, each
/// parameter at most once (RFC 6749 §3.2), empty values as absent.
pub(super) fn form(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<BTreeMap<String, String>, OAuthError> {
    let form_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err(OAuthError::request(
            "send the parameters as application/x-www-form-urlencoded (RFC 6749 §4.1.3)",
        ));
    }
    unique_pairs(body).map_err(OAuthError::request)
}

/// The parameters of `query`, each at most once (RFC 6749 §3.1), empty as absent.
fn unique_pairs(query: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(query)
        .map_err(|_| "the parameters do not decode as URL-encoded pairs".to_owned())?;
    let mut params = BTreeMap::new();
    for (name, value) in pairs {
        if params.insert(name.clone(), value).is_some() {
            return Err(format!(
                "the parameter {name:?} is given more than once; give it once"
            ));
        }
    }
    params.retain(|_, v| !v.is_empty());
    Ok(params)
}

/// Draws from the bucket of the client's address before the database looks up the
/// secret a request presents (a token, a code: one that does not exist costs no
/// bucket of its own); its digest.
pub(super) fn draw(
    state: &AppState,
    notes: &crate::http::notes::Notes,
    secret: &str,
) -> Result<[u8; 32], OAuthError> {
    let digest = auth::token_digest(secret);
    auth::limit(
        state,
        Some(notes),
        None,
        state.limiter.address(notes.client()),
    )?;
    Ok(digest)
}

/// A `client_id` names a program for people (we register none): short, printable.
pub(super) fn check_client_id(client_id: &str) -> Result<(), OAuthError> {
    if client_id.chars().count() > 200 || client_id.chars().any(char::is_control) {
        return Err(OAuthError::request(
            "client_id must be at most 200 printable characters",
        ));
    }
    Ok(())
}

pub(super) fn required<'a>(
    params: &'a BTreeMap<String, String>,
    name: &str,
) -> Result<&'a str, OAuthError> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| OAuthError::request(format!("the parameter {name:?} is missing")))
}

/// RFC 8414 authorization server metadata.
async fn metadata(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let issuer = match issuer(&state, &headers) {
        Ok(i) => i,
        Err(e) => return e.into_response(),
    };
    let body = json!({
        "issuer": issuer,
        "token_endpoint": format!("{issuer}{TOKEN_PATH}"),
        "revocation_endpoint": format!("{issuer}{REVOKE_PATH}"),
        "jwks_uri": format!("{issuer}{JWKS_PATH}"),
        "device_authorization_endpoint": format!("{issuer}{DEVICE_PATH}"),
        "authorization_endpoint": format!("{issuer}{AUTHORIZE_PATH}"),
        "grant_types_supported": [
            oauth::GRANT_AUTHORIZATION_CODE, oauth::GRANT_DEVICE_CODE,
            oauth::GRANT_REFRESH_TOKEN, oauth::GRANT_TOKEN_EXCHANGE,
        ],
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": [oauth::pkce::METHOD_S256],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "scopes_supported": [
            auth::SCOPE_OPS_READ, auth::SCOPE_OPS_WRITE, auth::SCOPE_SEND,
            auth::SCOPE_METRICS_READ, "agent:{agent_id}:inbox",
        ],
        "access_token_signing_alg_values_supported": [oauth::keys::ALGORITHM],
    });
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        axum::Json(body),
    )
        .into_response()
}

/// The published signing keys (RFC 7517). A verifier that meets an unknown `kid`
/// fetches it again: a new key signs from the moment it exists.
async fn jwks(State(state): State<AppState>) -> Response {
    let keys: Vec<_> = state.signing.public().iter().map(|k| k.jwk()).collect();
    (
        [(header::CACHE_CONTROL, "public, max-age=300")],
        axum::Json(json!({ "keys": keys })),
    )
        .into_response()
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn invalid_grant(description: &str) -> OAuthError {
    OAuthError::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
}
