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
use crate::store::{DevicePoll, Issue, NewAccessToken, NewDeviceRequest, Refreshed, TokenRecord};
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
pub(super) const DEVICE_PATH: &str = "/oauth/device_authorization";
/// The console page where operators approve device logins.
pub(super) const DEVICES_PAGE: &str = "/devices";

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route(METADATA_PATH, get(metadata))
        .route(JWKS_PATH, get(jwks))
        .route(TOKEN_PATH, post(token))
        .route(REVOKE_PATH, post(revoke))
        .route(DEVICE_PATH, post(device_authorization))
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

/// A `client_id` names a program for people (we register none): short, printable.
fn check_client_id(client_id: &str) -> Result<(), OAuthError> {
    if client_id.chars().count() > 200 || client_id.chars().any(char::is_control) {
        return Err(OAuthError::request(
            "client_id must be at most 200 printable characters",
        ));
    }
    Ok(())
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
        "device_authorization_endpoint": format!("{issuer}{DEVICE_PATH}"),
        "grant_types_supported": [
            oauth::GRANT_DEVICE_CODE, oauth::GRANT_REFRESH_TOKEN, oauth::GRANT_TOKEN_EXCHANGE,
        ],
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

/// When an access token is minted, in whole seconds as `exp` and `expires_in` say.
struct Minted {
    jti: String,
    now: i64,
    exp: i64,
    expires_in: i64,
}

impl Minted {
    fn new(state: &AppState) -> Self {
        let now = state.now();
        let ttl = state
            .config
            .access_token_ttl
            .min(oauth::MAX_ACCESS_TOKEN_TTL)
            .as_millis() as i64;
        let exp = (now + ttl) / 1000;
        Self {
            jti: base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(rand::random::<[u8; 16]>()),
            now,
            exp,
            expires_in: exp - now / 1000,
        }
    }

    fn expires_at(&self) -> i64 {
        self.exp * 1000
    }

    /// The signed access token of `record` (the credential `parent_hash` names).
    fn sign(
        &self,
        state: &AppState,
        issuer: &str,
        record: &TokenRecord,
        parent_hash: &[u8],
        scopes: &[String],
        client_id: Option<String>,
    ) -> Result<String, OAuthError> {
        let claims = Claims {
            iss: issuer.to_owned(),
            sub: match record.agent_id {
                Some(agent) => agent.to_string(),
                None => format!("token:{}", super::credentials::token_id(parent_hash)),
            },
            aud: issuer.to_owned(),
            exp: self.exp,
            iat: self.now / 1000,
            jti: self.jti.clone(),
            tenant: record.tenant_id.to_string(),
            scope: scopes.join(" "),
            client_id,
        };
        state.signing.sign(&claims).map_err(|e| {
            tracing::error!(error = %e, "an access token could not be signed");
            OAuthError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "this instance cannot sign access tokens right now (see its log); try again",
            )
        })
    }

    /// What the store records with a login's grant: its next refresh token and
    /// this access token.
    fn issue<'a>(&'a self, refresh_hash: &'a [u8]) -> Issue<'a> {
        Issue {
            refresh_hash,
            jti: &self.jti,
            expires_at: self.expires_at(),
        }
    }

    /// The answer to a login's grant (device code, refresh): an access token with
    /// the login's scopes, and its next refresh token.
    fn login_answer(
        &self,
        state: &AppState,
        issuer: &str,
        grant: &crate::store::AccessGrant,
        client_id: Option<String>,
        refresh_token: String,
    ) -> Result<Response, OAuthError> {
        let scopes = &grant.record.scopes;
        let access_token = self.sign(
            state,
            issuer,
            &grant.record,
            &grant.parent_hash,
            scopes,
            client_id,
        )?;
        Ok(self.answer(access_token, scopes, Some(refresh_token)))
    }

    /// The token endpoint's answer (RFC 6749 §5.1).
    fn answer(&self, access_token: String, scopes: &[String], refresh: Option<String>) -> Response {
        let mut body = json!({
            "access_token": access_token,
            "issued_token_type": oauth::TOKEN_TYPE_ACCESS,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": scopes.join(" "),
        });
        if let Some(refresh) = refresh {
            body["refresh_token"] = json!(refresh);
        }
        (StatusCode::OK, no_store(), axum::Json(body)).into_response()
    }
}

/// The token endpoint: the token exchange (RFC 8693) of a static credential, the
/// device code grant (RFC 8628) and refresh tokens (rotated on every use).
async fn token(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let grant_type = required(&params, "grant_type")?;
    let issuer = issuer(&state, &headers)?;
    let client_id = params.get("client_id").cloned();
    if let Some(client_id) = &client_id {
        check_client_id(client_id)?;
    }
    match grant_type {
        oauth::GRANT_TOKEN_EXCHANGE => exchange(&state, &notes, &params, &issuer, client_id).await,
        oauth::GRANT_DEVICE_CODE => device_code(&state, &notes, &params, &issuer, client_id).await,
        oauth::GRANT_REFRESH_TOKEN => refresh(&state, &notes, &params, &issuer, client_id).await,
        other => Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!(
                "the grant type {other:?} is not supported; this server supports {:?}, {:?} \
                 and {:?}",
                oauth::GRANT_TOKEN_EXCHANGE,
                oauth::GRANT_DEVICE_CODE,
                oauth::GRANT_REFRESH_TOKEN
            ),
        )),
    }
}

/// RFC 8693: a static credential for an access token with its scopes or fewer.
async fn exchange(
    state: &AppState,
    notes: &Notes,
    params: &BTreeMap<String, String>,
    issuer: &str,
    client_id: Option<String>,
) -> Result<Response, OAuthError> {
    let subject = required(params, "subject_token")?;
    let subject_type = required(params, "subject_token_type")?;
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
    if oauth::looks_like_jwt(subject) || subject.starts_with(oauth::REFRESH_PREFIX) {
        return Err(invalid_grant(
            "only a static token can be exchanged; an access token comes from one, a \
             refresh token is used with grant_type=refresh_token",
        ));
    }
    // The subject's own bucket, before any database work.
    let digest = token_digest(subject);
    auth::limit(state, Some(notes), state.limiter.credential(&digest))?;
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
    auth::limit(state, Some(notes), state.limiter.tenant(record.tenant_id))?;
    let scopes = granted(&record, params.get("scope").map(String::as_str))?;
    let minted = Minted::new(state);
    let access_token = minted.sign(state, issuer, &record, &hash, &scopes, client_id)?;
    state
        .store
        .insert_access_token(&NewAccessToken {
            jti: &minted.jti,
            tenant: record.tenant_id,
            parent_hash: &hash,
            issued_at: minted.now,
            expires_at: minted.expires_at(),
        })
        .await?;
    tracing::info!(
        agent = record.agent_name.as_deref().unwrap_or("-"),
        expires_in = minted.expires_in,
        "access token issued by token exchange"
    );
    Ok(minted.answer(access_token, &scopes, None))
}

/// A new refresh token and its hash.
fn new_refresh() -> (String, Vec<u8>) {
    let token = auth::generate_token(oauth::REFRESH_PREFIX);
    let hash = hash_token(&token);
    (token, hash)
}

/// RFC 8628 §3.4: the device polls with its device code until an operator decided.
async fn device_code(
    state: &AppState,
    notes: &Notes,
    params: &BTreeMap<String, String>,
    issuer: &str,
    client_id: Option<String>,
) -> Result<Response, OAuthError> {
    let code = required(params, "device_code")?;
    let client = client_id
        .clone()
        .ok_or_else(|| OAuthError::request("the parameter \"client_id\" is missing"))?;
    let digest = token_digest(code);
    auth::limit(state, Some(notes), state.limiter.credential(&digest))?;
    let (refresh_token, refresh_hash) = new_refresh();
    let minted = Minted::new(state);
    let polled = state
        .store
        .poll_device_request(
            &hex(&digest),
            &client,
            minted.now,
            &minted.issue(&refresh_hash),
        )
        .await?;
    let pending = |error: &'static str, description: &str| {
        Err(OAuthError::new(StatusCode::BAD_REQUEST, error, description))
    };
    match polled {
        DevicePoll::Unknown => Err(invalid_grant(
            "the device code is unknown, another client's, or its tokens were taken \
             already; start a new login",
        )),
        DevicePoll::Expired => pending(
            "expired_token",
            "the device code expired before an operator approved it; start a new login",
        ),
        DevicePoll::SlowDown => pending(
            "slow_down",
            "polling too often: wait 5 seconds longer between polls from now on",
        ),
        DevicePoll::Pending => pending(
            "authorization_pending",
            "waiting for an operator to approve the request in the console (Devices)",
        ),
        DevicePoll::Denied => pending("access_denied", "an operator denied the request"),
        DevicePoll::Approved(grant) => {
            let answer = minted.login_answer(state, issuer, &grant, client_id, refresh_token);
            tracing::info!(
                agent = grant.record.agent_name.as_deref().unwrap_or("-"),
                "device login completed: tokens issued"
            );
            answer
        }
    }
}

/// RFC 6749 §6: a refresh token for new tokens, once (it rotates); a second use
/// of one revokes its login.
async fn refresh(
    state: &AppState,
    notes: &Notes,
    params: &BTreeMap<String, String>,
    issuer: &str,
    client_id: Option<String>,
) -> Result<Response, OAuthError> {
    let old = required(params, "refresh_token")?;
    // Checked before the token is spent: a refusal after its rotation would lose
    // the login.
    if params.contains_key("scope") {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "a refresh keeps the login's scopes; omit scope (a narrower token comes from \
             the token exchange of a static token)",
        ));
    }
    let digest = token_digest(old);
    auth::limit(state, Some(notes), state.limiter.credential(&digest))?;
    let (refresh_token, refresh_hash) = new_refresh();
    let minted = Minted::new(state);
    let refreshed = state
        .store
        .refresh(&digest, minted.now, &minted.issue(&refresh_hash))
        .await?;
    match refreshed {
        Refreshed::Unknown => Err(invalid_grant("the refresh token is unknown; log in again")),
        Refreshed::Revoked => Err(invalid_grant("this login was revoked; log in again")),
        Refreshed::Reused => {
            // Every instance drops the login's tokens within the cache's TTL.
            state.lookups.forget_tokens();
            tracing::warn!("a rotated refresh token was used again: its login is revoked");
            Err(invalid_grant(
                "this refresh token was used before, so it may be stolen: the whole login \
                 is revoked now; log in again",
            ))
        }
        Refreshed::Rotated(grant) => {
            minted.login_answer(state, issuer, &grant, client_id, refresh_token)
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The address a request came from, as the listener saw it (absent when the
/// router runs without one, as in unit tests).
pub(super) struct Peer(Option<std::net::SocketAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<super::PeerAddr>>()
                .map(|c| c.0.0),
        ))
    }
}

/// How long a device code lives, and how often its device may poll.
const DEVICE_CODE_TTL_MS: i64 = 600_000;
const DEVICE_INTERVAL_MS: i64 = 5_000;
/// RFC 8628 §6.1: consonants only (no vowels, so no words; no look-alikes).
const USER_CODE_LETTERS: &[u8] = b"BCDFGHJKLMNPQRSTVWXZ";

fn user_code() -> String {
    let letters: String = (0..8)
        .map(|_| {
            let i = rand::random_range(0..USER_CODE_LETTERS.len());
            USER_CODE_LETTERS[i] as char
        })
        .collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

/// RFC 8628 §3.1: a device asks to log in as an agent (`scope=agent:<name>`), in
/// the tenant it names (`tenant`, else the default tenant). An operator of that
/// tenant approves or denies it by its user code.
async fn device_authorization(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    Peer(peer): Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let issuer = issuer(&state, &headers)?;
    // One bucket per source address, before any database work.
    let source_ip = peer.map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string());
    auth::limit(
        &state,
        Some(&notes),
        state
            .limiter
            .credential(&token_digest(&format!("device-authorization:{source_ip}"))),
    )?;
    let client_id = required(&params, "client_id")?;
    check_client_id(client_id)?;
    let scope = required(&params, "scope")?;
    let agent = scope
        .strip_prefix("agent:")
        .filter(|name| super::limits::name("scope", name).is_ok())
        .ok_or_else(|| {
            OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_scope",
                "scope must be agent:<name>, the agent to log in as (1 to 64 of A-Z a-z 0-9 . _ -)",
            )
        })?;
    let tenant = match params.get("tenant") {
        None => Some(state.tenant),
        // A name that is no tenant's is not told apart: nobody will see the request.
        Some(name) => state
            .store
            .tenants()
            .await?
            .into_iter()
            .find(|t| &t.name == name)
            .map(|t| t.id),
    };
    let forwarded = headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.chars()
                .filter(|c| !c.is_control())
                .take(40)
                .collect::<String>()
        });
    let source = match forwarded {
        Some(f) => format!("{source_ip} (for {f})"),
        None => source_ip,
    };
    let user_agent: String = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control())
        .take(255)
        .collect();
    let now = state.now();
    let device_code = auth::generate_token(oauth::DEVICE_CODE_PREFIX);
    let device_hash = hex(&token_digest(&device_code));
    let mut code = user_code();
    // A user code already in use (about one in 2.5e10 per pending request) is
    // drawn again.
    while !state
        .store
        .insert_device_request(&NewDeviceRequest {
            device_hash: &device_hash,
            user_code: &code,
            tenant,
            client_id,
            agent_name: agent,
            source: &source,
            user_agent: &user_agent,
            created_at: now,
            expires_at: now + DEVICE_CODE_TTL_MS,
            interval_ms: DEVICE_INTERVAL_MS,
        })
        .await?
    {
        code = user_code();
    }
    tracing::info!(agent, client_id, "device login requested");
    let verification_uri = format!("{issuer}{DEVICES_PAGE}");
    Ok((
        StatusCode::OK,
        no_store(),
        axum::Json(json!({
            "device_code": device_code,
            "user_code": code,
            "verification_uri_complete": format!("{verification_uri}?user_code={code}"),
            "verification_uri": verification_uri,
            "expires_in": DEVICE_CODE_TTL_MS / 1000,
            "interval": DEVICE_INTERVAL_MS / 1000,
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
    } else if token.starts_with(oauth::REFRESH_PREFIX) {
        // A refresh token ends its whole login, and every access token of it.
        if state.store.revoke_refresh_family(&digest, now).await? {
            tracing::info!("a device login was ended by its holder (refresh token revoked)");
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
