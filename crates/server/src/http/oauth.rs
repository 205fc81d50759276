//! The OAuth endpoints (issue 15), outside `/api/v1` because their RFCs define
//! them: metadata (RFC 8414), the JWKS (RFC 7517), the token endpoint with the
//! token exchange grant (RFC 8693: a static credential for a short-lived JWT), and
//! revocation (RFC 7009). They take `application/x-www-form-urlencoded` and answer
//! OAuth errors (`{"error", "error_description"}`, RFC 6749 §5.2), never a problem
//! document.
//!
//! The issuer is this server as the request reached it (`http(s)://` + `Host`), so a
//! token works on every instance behind one address and on the embedded server at
//! whatever port it got; `iss` and `aud` are both the issuer.

use super::AppState;
use super::auth::{self, Principal, hash_token, token_digest};
use super::notes::Notes;
use crate::error::ApiError;
use crate::oauth::{self, Claims, Rejected};
use crate::store::{NewAccessToken, TokenRecord};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::json;
use std::collections::BTreeMap;

pub(super) const METADATA_PATH: &str = "/.well-known/oauth-authorization-server";
pub(super) const JWKS_PATH: &str = "/oauth/jwks.json";
pub(super) const TOKEN_PATH: &str = "/oauth/token";
pub(super) const REVOKE_PATH: &str = "/oauth/revoke";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(METADATA_PATH, get(metadata))
        .route(JWKS_PATH, get(jwks))
        .route(TOKEN_PATH, post(token))
        .route(REVOKE_PATH, post(revoke))
}

/// This server's issuer identifier as the request reached it.
pub(super) fn issuer(state: &AppState, headers: &HeaderMap) -> Result<String, OAuthError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        })
        .ok_or_else(|| {
            OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the Host header is missing or not a host[:port]; the issuer is this server's \
                 address as the request names it",
            )
        })?;
    let scheme = if super::session::secure(state, headers) {
        "https"
    } else {
        "http"
    };
    Ok(format!("{scheme}://{}", host.to_ascii_lowercase()))
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
    fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        Self {
            status,
            error,
            description: description.into(),
            retry_after: None,
        }
    }

    fn request(description: impl Into<String>) -> Self {
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

impl From<crate::store::StoreError> for OAuthError {
    fn from(e: crate::store::StoreError) -> Self {
        ApiError::from(e).into()
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
fn no_store() -> [(header::HeaderName, &'static str); 2] {
    [
        (header::CACHE_CONTROL, "no-store"),
        (header::PRAGMA, "no-cache"),
    ]
}

/// The form of an OAuth request: `application/x-www-form-urlencoded`, each
/// parameter at most once (RFC 6749 §3.2), empty values as absent.
fn form(headers: &HeaderMap, body: &Bytes) -> Result<BTreeMap<String, String>, OAuthError> {
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
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
        .map_err(|_| OAuthError::request("the form does not decode as URL-encoded pairs"))?;
    let mut params = BTreeMap::new();
    for (name, value) in pairs {
        if params.insert(name.clone(), value).is_some() {
            return Err(OAuthError::request(format!(
                "the parameter {name:?} is given more than once; give it once"
            )));
        }
    }
    params.retain(|_, v| !v.is_empty());
    Ok(params)
}

fn required<'a>(params: &'a BTreeMap<String, String>, name: &str) -> Result<&'a str, OAuthError> {
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
        "grant_types_supported": [oauth::GRANT_TOKEN_EXCHANGE],
        // No authorization endpoint yet: no response types.
        "response_types_supported": [],
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

/// The token endpoint. One grant: token exchange (RFC 8693) of a static
/// credential (`subject_token`, of type access token) for a JWT access token with
/// its scopes or fewer.
async fn token(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let grant_type = required(&params, "grant_type")?;
    if grant_type != oauth::GRANT_TOKEN_EXCHANGE {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!(
                "the grant type {grant_type:?} is not supported; this server supports {:?}",
                oauth::GRANT_TOKEN_EXCHANGE
            ),
        ));
    }
    let issuer = issuer(&state, &headers)?;
    let subject = required(&params, "subject_token")?;
    let subject_type = required(&params, "subject_token_type")?;
    if subject_type != oauth::TOKEN_TYPE_ACCESS {
        return Err(OAuthError::request(format!(
            "subject_token_type must be {:?} (a static Switchboard token)",
            oauth::TOKEN_TYPE_ACCESS
        )));
    }
    if params.contains_key("actor_token") {
        return Err(OAuthError::request(
            "delegation (actor_token) is not supported; exchange the subject's own token",
        ));
    }
    if let Some(requested) = params.get("requested_token_type")
        && requested != oauth::TOKEN_TYPE_ACCESS
        && requested != oauth::TOKEN_TYPE_JWT
    {
        return Err(OAuthError::request(format!(
            "requested_token_type may be {:?} or {:?} (both give a JWT access token)",
            oauth::TOKEN_TYPE_ACCESS,
            oauth::TOKEN_TYPE_JWT
        )));
    }
    for target in ["audience", "resource"] {
        if let Some(asked) = params.get(target)
            && asked.trim_end_matches('/') != issuer
        {
            return Err(OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_target",
                format!("this server issues tokens only for itself ({issuer}), not for {asked:?}"),
            ));
        }
    }
    if oauth::looks_like_jwt(subject) {
        return Err(invalid_grant(
            "an access token cannot be exchanged for another; exchange the static token \
             it came from",
        ));
    }
    // The subject's own bucket, before any database work.
    let digest = token_digest(subject);
    auth::limit(&state, Some(&notes), state.limiter.credential(&digest))?;
    let hash = digest.to_vec();
    let record = match state.lookups.token(&hash) {
        Some(record) => record,
        None => {
            let record = state.store.token(&hash).await?.ok_or_else(|| {
                invalid_grant("the subject token is unknown or revoked; use a current token")
            })?;
            state.lookups.put_token(&hash, &record);
            record
        }
    };
    auth::limit(&state, Some(&notes), state.limiter.tenant(record.tenant_id))?;
    let scopes = granted(&record, params.get("scope").map(String::as_str))?;
    let client_id = params.get("client_id").cloned();
    if client_id
        .as_ref()
        .is_some_and(|c| c.chars().count() > 200 || c.chars().any(char::is_control))
    {
        return Err(OAuthError::request(
            "client_id must be at most 200 printable characters",
        ));
    }
    let now = state.now();
    let ttl = state
        .config
        .access_token_ttl
        .min(oauth::MAX_ACCESS_TOKEN_TTL)
        .as_millis() as i64;
    // Whole seconds, as `exp` and `expires_in` say it.
    let exp = (now + ttl) / 1000;
    let expires_in = exp - now / 1000;
    let expires_at = exp * 1000;
    let jti = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let claims = Claims {
        iss: issuer.clone(),
        sub: match record.agent_id {
            Some(agent) => agent.to_string(),
            None => format!("token:{}", super::credentials::token_id(&hash)),
        },
        aud: issuer,
        exp,
        iat: now / 1000,
        jti: jti.clone(),
        tenant: record.tenant_id.to_string(),
        scope: scopes.join(" "),
        client_id,
    };
    let access_token = state.signing.sign(&claims).map_err(|e| {
        tracing::error!(error = %e, "an access token could not be signed");
        OAuthError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "this instance cannot sign access tokens right now (see its log); try again",
        )
    })?;
    state
        .store
        .insert_access_token(&NewAccessToken {
            jti: &jti,
            tenant: record.tenant_id,
            parent_hash: &hash,
            issued_at: now,
            expires_at,
        })
        .await?;
    tracing::info!(
        agent = record.agent_name.as_deref().unwrap_or("-"),
        expires_in,
        "access token issued by token exchange"
    );
    Ok((
        StatusCode::OK,
        no_store(),
        axum::Json(json!({
            "access_token": access_token,
            "issued_token_type": oauth::TOKEN_TYPE_ACCESS,
            "token_type": "Bearer",
            "expires_in": expires_in,
            "scope": claims.scope,
        })),
    )
        .into_response())
}

fn invalid_grant(description: &str) -> OAuthError {
    OAuthError::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
}

/// The scopes a token exchange grants: what was asked (space-separated), each one
/// the subject has, or all of the subject's.
fn granted(record: &TokenRecord, asked: Option<&str>) -> Result<Vec<String>, OAuthError> {
    let Some(asked) = asked else {
        return Ok(record.scopes.clone());
    };
    let mut scopes: Vec<String> = Vec::new();
    for scope in asked.split_whitespace() {
        if !record.scopes.iter().any(|s| s == scope) {
            return Err(OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_scope",
                format!(
                    "the subject token does not have the scope {scope:?}; it has {:?}",
                    record.scopes
                ),
            ));
        }
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    Ok(scopes)
}

/// Revocation (RFC 7009): an access token (JWT) or a static token. Whoever holds a
/// token may revoke it; an unknown, invalid or already revoked token is answered
/// 200 all the same (§2.2).
async fn revoke(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let token = required(&params, "token")?;
    if let Some(hint) = params.get("token_type_hint")
        && hint != "access_token"
        && hint != "refresh_token"
    {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_token_type",
            format!("token_type_hint {hint:?} is not a type this server has; omit it"),
        ));
    }
    let digest = token_digest(token);
    auth::limit(&state, Some(&notes), state.limiter.credential(&digest))?;
    let now = state.now();
    if oauth::looks_like_jwt(token) {
        let issuer = issuer(&state, &headers)?;
        // A token that does not verify here names nothing to revoke.
        if let Ok(claims) = verified(&state, token, &issuer, true).await
            && let Ok(tenant) = claims.tenant.parse()
            && state
                .store
                .revoke_access_token(tenant, &claims.jti, now)
                .await?
        {
            tracing::info!(sub = %claims.sub, "access token revoked by its holder");
        }
    } else {
        let hash = hash_token(token);
        if let Some(record) = state.store.token(&hash).await?
            && state
                .store
                .revoke_credential(record.tenant_id, &hash, now)
                .await?
        {
            tracing::info!(
                agent = record.agent_name.as_deref().unwrap_or("-"),
                "static token revoked by its holder"
            );
        }
    }
    // This instance refuses it from the next request; the others within the TTL.
    state.lookups.forget_tokens();
    Ok((StatusCode::OK, no_store()).into_response())
}

/// The claims of `token` once its signature, issuer and audience verify (and its
/// expiry, unless `allow_expired`). A `kid` this instance does not know reloads
/// the keys (at most every 200 ms: `oauth/keys.rs`).
pub(super) async fn verified(
    state: &AppState,
    token: &str,
    issuer: &str,
    allow_expired: bool,
) -> Result<Claims, ApiError> {
    let kid = oauth::kid_of(token).map_err(unauthorized)?;
    let key = match state.signing.decoding(&kid) {
        Some(key) => key,
        None => {
            state
                .signing
                .reload_for_unknown(state.store.as_ref(), &state.webhooks.key, state.now())
                .await?;
            state
                .signing
                .decoding(&kid)
                .ok_or_else(|| unauthorized(Rejected::UnknownKey(kid)))?
        }
    };
    oauth::verify(token, &key, issuer, state.now(), allow_expired).map_err(unauthorized)
}

fn unauthorized(rejected: Rejected) -> ApiError {
    ApiError::new(
        switchboard_proto::ErrorCode::Unauthorized,
        rejected.to_string(),
    )
}

/// The principal of a verified access token, from its record (read through the
/// token cache): its parent credential's tenant and agent, the token's own scopes
/// that the parent still has.
pub(super) async fn principal(
    state: &AppState,
    notes: Option<&Notes>,
    claims: &Claims,
) -> Result<Principal, ApiError> {
    // Every token of one subject shares one bucket, before any database work.
    let subject = token_digest(&format!(
        "access-token-subject:{}:{}",
        claims.tenant, claims.sub
    ));
    auth::limit(state, notes, state.limiter.credential(&subject))?;
    let grant = match state.lookups.access(&claims.jti) {
        Some(grant) => grant,
        None => {
            let grant = state
                .store
                .access_token(&claims.jti, state.now())
                .await?
                .ok_or_else(|| {
                    ApiError::new(
                        switchboard_proto::ErrorCode::Unauthorized,
                        "the access token was revoked, or the credential it was issued from \
                         was; get a new one",
                    )
                })?;
            state.lookups.put_access(&claims.jti, &grant);
            grant
        }
    };
    let record = grant.record;
    if record.tenant_id.to_string() != claims.tenant {
        return Err(ApiError::new(
            switchboard_proto::ErrorCode::Unauthorized,
            "the access token does not match its record; get a new one",
        ));
    }
    auth::limit(state, notes, state.limiter.tenant(record.tenant_id))?;
    if record.agent_id.is_some()
        && let Some(notes) = notes
    {
        notes.client_settings(record.client_settings);
    }
    let scopes = claims
        .scopes()
        .filter(|s| record.scopes.iter().any(|r| r == s))
        .map(str::to_owned)
        .collect();
    Ok(Principal {
        tenant_id: record.tenant_id,
        agent_id: record.agent_id,
        agent_name: record.agent_name,
        scopes,
        token_hash: grant.parent_hash,
        session: None,
    })
}
