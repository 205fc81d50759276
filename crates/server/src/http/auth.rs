//! The request's credential, as extractors: a static bearer token (looked up through
//! the token cache), an access token (an EdDSA JWT, [`jwt`]) or the console's session
//! cookie, each drawn from its rate-limit bucket first, into a [`Principal`]. The
//! scopes, the tokens' minting and hashing and the principal itself are in
//! `access/`, below this layer.
//!
//! The console may instead present a session cookie ([`SESSION_COOKIE`], see
//! `http/session.rs`). It stands for the operator token it was made from, with that
//! token's scopes or fewer. A state-changing request that relies on the cookie must
//! carry an `Origin` header naming this server (the router's Origin check compares
//! it with `Host`): browsers always send one, and a request without it is not ours.

pub(super) mod jwt;

use super::AppState;
use super::notes::Notes;
use crate::access::rate_limit::Refused;
use crate::app::lookups::reads;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::header::{AUTHORIZATION, COOKIE, ORIGIN};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method};
use switchboard_proto::{ErrorCode, TenantId};

pub use crate::access::{
    Principal, SCOPE_ADMIN, SCOPE_METRICS_READ, SCOPE_OPS_READ, SCOPE_OPS_WRITE, SCOPE_SEND,
    SESSION_COOKIE, SessionRef, admin_scopes, agent_scopes, generate_token, hash_token,
    inbox_scope, operator_scopes, token_digest,
};

/// Whether the cookie is `Secure`: the server serves HTTPS itself, or the browser
/// reached it through a TLS-terminating proxy (see [`over_https`]).
pub(super) fn secure(state: &AppState, headers: &HeaderMap) -> bool {
    state.config.https || over_https(headers)
}

/// Whether the browser reached us over HTTPS (through a TLS-terminating proxy, which
/// says so in `X-Forwarded-Proto`): then the cookie is also `Secure`.
fn over_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
}

/// This server's address as the request names it (`Host`, and the scheme by
/// [`secure`]): the issuer of the access tokens it mints and accepts. `None` when
/// `Host` is missing or not a `host[:port]`.
pub(super) fn issuer(state: &AppState, headers: &axum::http::HeaderMap) -> Option<String> {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
        })?;
    let scheme = if secure(state, headers) {
        "https"
    } else {
        "http"
    };
    Some(format!("{scheme}://{}", host.to_ascii_lowercase()))
}

fn unauthorized(detail: &str) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, detail.to_owned())
}

/// The value of the cookie `name` in the request's `Cookie` headers, if any.
pub fn request_cookie(headers: &axum::http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    /// Any caller of the API: an agent or an operator. A machine token (one that is
    /// neither, such as a `metrics:read` scraper's) is refused here, so no handler
    /// can take it for an operator; `/metrics` reads it through [`Scraper`].
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = authenticate(parts, state).await?;
        if principal.agent_id.is_none()
            && !principal.has(SCOPE_OPS_READ)
            && !principal.has(SCOPE_OPS_WRITE)
        {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "this token has only the scopes {:?}; it may read /metrics and nothing else",
                    principal.scopes
                ),
            ));
        }
        Ok(principal)
    }
}

/// The caller of `/metrics`: a principal with `metrics:read` (or an operator).
pub struct Scraper(pub Principal);

impl FromRequestParts<AppState> for Scraper {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = authenticate(parts, state).await?;
        if principal.may_read_metrics() {
            Ok(Self(principal))
        } else {
            Err(ApiError::new(
                ErrorCode::Forbidden,
                "this token lacks the \"metrics:read\" scope; scrape with an operator token, \
                 or mint a metrics-only one with POST /api/v1/ops/tokens \
                 {\"scopes\": [\"metrics:read\"], \"label\": \"prometheus\"}",
            ))
        }
    }
}

/// The outcome of authenticating a request's bearer token, kept in its extensions
/// by the layer that authenticated it first (`signatures.rs`), so [`authenticate`]
/// takes it instead of looking the token up and drawing its buckets again.
#[derive(Clone)]
pub(crate) struct Authenticated(pub(crate) Result<Principal, ApiError>);

/// Who the bearer token or the console session cookie stands for: what the
/// signatures layer found already (`http/signatures.rs` authenticates every API
/// request with a bearer token once, before the handler), else looked up now.
pub(super) async fn authenticate(parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    if let Some(Authenticated(outcome)) = parts.extensions.get() {
        return outcome.clone();
    }
    let Some(header) = parts.headers.get(AUTHORIZATION) else {
        return match request_cookie(&parts.headers, SESSION_COOKIE) {
            Some(session) => from_session(parts, state, &session).await,
            None => Err(unauthorized(
                "no credentials; send Authorization: Bearer <token>, or log in to the console",
            )),
        };
    };
    let token = header
        .to_str()
        .ok()
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthorized("the Authorization header must be `Bearer <token>`"))?;
    let notes = parts.extensions.get::<Notes>();
    if crate::oauth::looks_like_jwt(token) {
        return from_access_token(parts, state, notes, token).await;
    }
    let digest = token_digest(token);
    let token_hash = digest.to_vec();
    let record = match state.lookups.token(&token_hash) {
        Some(record) => record,
        None => known_token(parts, state, notes, &digest).await?,
    };
    // The token's own bucket, and its tenant's.
    limit(
        state,
        notes,
        Some(record.tenant_id),
        state.limiter.credential(&digest),
    )?;
    limit(
        state,
        notes,
        Some(record.tenant_id),
        state.limiter.tenant(record.tenant_id),
    )?;
    if record.agent_id.is_some()
        && let Some(notes) = notes
    {
        notes.client_settings(record.client_settings);
    }
    Ok(Principal::of_token(record, token_hash))
}

/// A static token the cache does not know, looked up: first the client address's
/// bucket (no database read, and no bucket per token, for a flood of unknown tokens
/// past its burst), then the cache of unknown tokens, then the store.
async fn known_token(
    parts: &Parts,
    state: &AppState,
    notes: Option<&Notes>,
    digest: &[u8; 32],
) -> Result<crate::app::signin::TokenRecord, ApiError> {
    let refused = || unauthorized("the bearer token is unknown or revoked; use a current token");
    let client = notes.map_or_else(|| client_addr(parts, state), Notes::client);
    limit(state, notes, None, state.limiter.address(client))?;
    if state.lookups.unknown(digest) {
        return Err(refused());
    }
    match static_token(state, digest).await? {
        Some(record) => Ok(record),
        None => {
            state.lookups.put_unknown(digest);
            Err(refused())
        }
    }
}

/// The client's address: the TCP peer's, or, when the peer is one of the
/// configured trusted proxies (`--trusted-proxy`), the right-most address of
/// `X-Forwarded-For` that is not a trusted proxy. Never the header of an untrusted
/// peer: anyone can write it.
pub(crate) fn client_addr(parts: &Parts, state: &AppState) -> Option<std::net::IpAddr> {
    let peer = parts
        .extensions
        .get::<axum::extract::ConnectInfo<super::PeerAddr>>()
        .map(|c| c.0.0.ip())?;
    super::notes::forwarded_client(peer, &parts.headers, &state.config.trusted_proxies)
}

pub(super) use reads::static_token;

/// The principal of an access token (a JWT from the token endpoint): verified with
/// the published keys before any database work (the bucket of the token's string
/// pays for the rare reload an unknown `kid` causes), then its record through the
/// token cache (`oauth::principal`).
async fn from_access_token(
    parts: &Parts,
    state: &AppState,
    notes: Option<&Notes>,
    token: &str,
) -> Result<Principal, ApiError> {
    let issuer = issuer(state, &parts.headers).ok_or_else(|| {
        unauthorized("an access token needs the Host header naming this server (its issuer)")
    })?;
    // An unknown `kid` may make the keys reload: the client address's bucket pays.
    let client = notes.map_or_else(|| client_addr(parts, state), Notes::client);
    let claims = jwt::verified(state, token, &issuer, false, || {
        limit(state, notes, None, state.limiter.address(client))
    })
    .await?;
    jwt::principal(state, notes, &claims).await
}

/// Notes what a rate-limit bucket said for the response's headers; a refusal is
/// 429 `rate_limited` with `Retry-After`, counted in `tenant`'s metrics, or in the
/// process's when the bucket was drawn before the tenant was known (I9).
pub(super) fn limit(
    state: &AppState,
    notes: Option<&Notes>,
    tenant: Option<TenantId>,
    taken: Result<Option<crate::access::rate_limit::Standing>, Refused>,
) -> Result<(), ApiError> {
    match taken {
        Ok(standing) => {
            // An address's bucket is drawn on cache misses only: not a policy of
            // every response (`RateLimit-Policy`), so its standing is told on a
            // refusal only.
            if let (Some(notes), Some(standing)) = (notes, standing)
                && standing.policy != crate::access::rate_limit::Policy::Address
            {
                notes.standing(standing);
            }
            Ok(())
        }
        Err(refused) => {
            if let Some(notes) = notes {
                notes.standing(refused.standing());
            }
            match (tenant, refused.policy.metric()) {
                (Some(tenant), Some(policy)) => state.metrics.tenant(tenant).rate_limited(policy),
                _ => state.metrics.rate_limited_unattributed(),
            }
            let mut e = ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "too many requests: the {} rate limit is spent (see the RateLimit and \
                     RateLimit-Policy headers); retry after {} s and spread requests out",
                    refused.policy.as_str(),
                    refused.retry_after()
                ),
            );
            e.retry_after = Some(refused.retry_after());
            Err(e)
        }
    }
}

/// The principal behind a console session cookie.
async fn from_session(
    parts: &Parts,
    state: &AppState,
    session: &str,
) -> Result<Principal, ApiError> {
    let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    if !safe && !parts.headers.contains_key(ORIGIN) {
        // SameSite=Strict already keeps the cookie off cross-site requests; this is
        // the second lock. (A present Origin was compared with Host by the router.)
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "a change made with the console session must come from the console page \
             (the Origin header is missing); scripts should send Authorization: Bearer <token>",
        ));
    }
    let digest = token_digest(session);
    let notes = parts.extensions.get::<Notes>();
    // Sessions are not cached: the client address's bucket before the lookup, the
    // session's own once it is known.
    let client = notes.map_or_else(|| client_addr(parts, state), Notes::client);
    limit(state, notes, None, state.limiter.address(client))?;
    let hash = digest.to_vec();
    let grant = reads::session(state, &hash).await?.ok_or_else(|| {
        unauthorized("the console session has expired or was ended; log in again")
    })?;
    let tenant = Some(grant.record.tenant_id);
    limit(state, notes, tenant, state.limiter.credential(&digest))?;
    limit(
        state,
        notes,
        tenant,
        state.limiter.tenant(grant.record.tenant_id),
    )?;
    Ok(Principal {
        tenant_id: grant.record.tenant_id,
        agent_id: grant.record.agent_id,
        agent_name: grant.record.agent_name,
        scopes: grant.record.scopes,
        token_hash: grant.token_hash,
        session: Some(SessionRef {
            hash,
            expires_at: grant.expires_at,
        }),
        bound_key: None,
    })
}
