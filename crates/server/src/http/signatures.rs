//! Signed agent requests (issue 39): RFC 9421 HTTP Message Signatures with Ed25519
//! keys bound to the credential they were presented with. The signature scheme
//! itself (what is covered, the window, the digest) is `switchboard_webhook::agent`,
//! the one RFC 9421 implementation of the workspace; this layer decides when a
//! request must be signed and with which key, and keeps the replay cache.
//!
//! For every API request with a bearer token (`/api/...`, and the seeds' `/v1/...`
//! as received, before the alias is rewritten):
//!
//! 1. the credential is authenticated here, once: the handler's extractor takes
//!    the outcome from the request's extensions (no second lookup, no second draw
//!    from the rate-limit buckets);
//! 2. an agent credential bound to a key (an access token with `cnf.jkt`, or a
//!    static token or login with a registered key) must sign **every** request with
//!    that key, whatever the tenant's policy: that is what makes a stolen access
//!    token useless;
//! 3. otherwise the tenant's policy decides: `off` ignores signatures, `optional`
//!    (the default) verifies one when present, `required` refuses an unsigned
//!    state-changing agent call with 401 `signature_required` and `Accept-Signature`
//!    (RFC 9421 §5.1);
//! 4. a signature is verified before any effect: the key, the covered components,
//!    the window (30 s of skew), the signature, the body's `Content-Digest`; then
//!    its `(keyid, nonce)` goes into the replay cache every instance shares, and a
//!    second use is refused with `signature_replayed`. This runs before the
//!    handler, so before any idempotent replay: a client's retry signs again with a
//!    new nonce and gets its stored answer.
//!
//! Operators' calls and the console's session are not signed (operators hold no
//! agent key); the OAuth endpoints are not under `/api`. The token endpoint asks
//! the same proof of a bound subject token with the same functions ([`must_sign`],
//! [`signing_key`], [`verify_signed`]: `http/oauth/token.rs::proof_of_possession`).

use super::AppState;
use super::auth::{self, Authenticated};
use crate::access::Principal;
use crate::app::keys::SignaturePolicy;
use crate::app::lookups::BoundKey;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, HOST};
use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_proto::ErrorCode;
use switchboard_webhook::agent::{self, Presented, PublicKey};

/// `Accept-Signature`, the field a 401 `signature_required` names what to sign in.
const ACCEPT_SIGNATURE: &str = "accept-signature";

/// The layer; see the module's docs.
pub(super) async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !(path.starts_with("/api/") || path.starts_with("/v1/"))
        || !req.headers().contains_key(AUTHORIZATION)
        || super::problems::open(req.method().as_str(), path)
    {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let outcome = auth::authenticate(&parts, &state).await;
    let principal = match &outcome {
        Ok(principal) if principal.agent_id.is_some() => principal.clone(),
        // Refused credentials and operators: nothing to sign; the handler's extractor
        // answers with the same outcome.
        _ => {
            parts.extensions.insert(Authenticated(outcome));
            return next.run(Request::from_parts(parts, body)).await;
        }
    };
    parts.extensions.insert(Authenticated(outcome));
    match checked(&state, &principal, &parts, body).await {
        Ok(body) => next.run(Request::from_parts(parts, body)).await,
        Err(refusal) => refusal.into_response(&parts),
    }
}

/// Why a request was refused here.
enum Refusal {
    /// 401 `signature_required`, with `Accept-Signature`.
    Unsigned(String),
    Error(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(e: ApiError) -> Self {
        Self::Error(e)
    }
}

impl Refusal {
    fn into_response(self, parts: &axum::http::request::Parts) -> Response {
        match self {
            Self::Error(e) => e.into_response(),
            Self::Unsigned(detail) => {
                let mut response =
                    ApiError::new(ErrorCode::SignatureRequired, detail).into_response();
                let has_query = parts.uri.query().is_some();
                let has_body = !matches!(parts.method, Method::GET | Method::HEAD);
                if let Ok(value) =
                    HeaderValue::from_str(&agent::accept_signature(has_query, has_body))
                {
                    response.headers_mut().insert(ACCEPT_SIGNATURE, value);
                }
                response
            }
        }
    }
}

/// Whether an agent's request may go on, and its body (read whole when a signature
/// is verified, to check its digest).
async fn checked(
    state: &AppState,
    principal: &Principal,
    parts: &axum::http::request::Parts,
    body: Body,
) -> Result<Body, Refusal> {
    let now = state.now() / 1000;
    let presented = agent::presented(&parts.headers).map_err(|e| refused(e, now))?;
    let keys = crate::app::lookups::reads::request_keys(state, &principal.token_hash).await?;
    let bound = must_sign(principal.bound_key.as_deref(), &keys);
    let Some(presented) = presented else {
        if bound {
            return Err(Refusal::Unsigned(
                "this credential is bound to a signing key, so every request it makes must \
                 be signed with that key (RFC 9421, alg \"ed25519\"; see Accept-Signature); \
                 the SDK and the CLI sign by themselves when they hold the key"
                    .to_owned(),
            ));
        }
        let policy =
            crate::app::lookups::reads::signature_policy(state, principal.tenant_id).await?;
        let safe = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
        if policy == SignaturePolicy::Required && !safe {
            return Err(Refusal::Unsigned(
                "this tenant requires agent calls to be signed (RFC 9421, alg \"ed25519\"; see \
                 Accept-Signature) with a key registered for this credential: log in with \
                 `switchboard agent login`, or register one with `switchboard agent key \
                 register`"
                    .to_owned(),
            ));
        }
        return Ok(body);
    };
    if !bound
        && crate::app::lookups::reads::signature_policy(state, principal.tenant_id).await?
            == SignaturePolicy::Off
    {
        return Ok(body);
    }
    let public = signing_key(principal.bound_key.as_deref(), &keys, &presented)?;
    let bytes = axum::body::to_bytes(body, state.config.max_body_bytes)
        .await
        .map_err(|_| {
            ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!(
                    "the body is larger than {} bytes (max_body_bytes), or it could not be read",
                    state.config.max_body_bytes
                ),
            )
        })?;
    let head = Head {
        method: &parts.method,
        uri: &parts.uri,
        headers: &parts.headers,
    };
    verify_signed(state, public, head, &bytes, &presented, now).await?;
    Ok(Body::from(bytes))
}

/// Whether a credential must sign every request, whatever its tenant's policy: its
/// access token is bound to a key (`bound_key`, its `cnf.jkt`), or a key binds the
/// credential itself (a login's, a registered one).
pub(super) fn must_sign(bound_key: Option<&str>, keys: &[BoundKey]) -> bool {
    bound_key.is_some() || keys.iter().any(|k| k.binds_parent)
}

/// What a signature covers of a request besides its body.
#[derive(Clone, Copy)]
pub(super) struct Head<'a> {
    pub(super) method: &'a Method,
    /// As received (the seeds' `/v1/...` before the alias is rewritten).
    pub(super) uri: &'a Uri,
    pub(super) headers: &'a HeaderMap,
}

/// Verifies the signature `presented` over the request (`head` and the whole
/// `body`) with `public` at `now` (Unix seconds): the window, the covered
/// components, the signature and the body's digest; then its `(keyid, nonce)` goes
/// into the replay cache, and a second use is refused (`signature_replayed`).
pub(super) async fn verify_signed(
    state: &AppState,
    public: &PublicKey,
    head: Head<'_>,
    body: &[u8],
    presented: &Presented,
    now: i64,
) -> Result<(), ApiError> {
    let authority = authority(state, head.headers, head.uri)?;
    let path_and_query = head
        .uri
        .path_and_query()
        .map_or(head.uri.path(), |pq| pq.as_str());
    let request = agent::Request {
        method: head.method.as_str(),
        authority: &authority,
        path_and_query,
        headers: head.headers,
        body,
    };
    agent::verify(public, &request, presented, now).map_err(|e| refused(e, now))?;
    // Kept until the signature's window (and the skew) has passed: after that the
    // window refuses it anyway.
    let forget_at = (presented.expires + agent::CLOCK_SKEW_SECS) * 1000;
    if !crate::app::keys::first_use(state, &presented.keyid, &presented.nonce, forget_at).await? {
        return Err(ApiError::new(
            ErrorCode::SignatureReplayed,
            "this signature's nonce was used before (a replayed request); nothing was done. \
             Sign again with a new nonce: a retry of the same call then gets its stored \
             answer (Idempotency-Key)",
        ));
    }
    Ok(())
}

/// The key the signature must be made with: the one the access token is bound to
/// (`bound_key`, its `cnf.jkt`), or one of the credential's live `keys`.
pub(super) fn signing_key<'k>(
    bound_key: Option<&str>,
    keys: &'k [BoundKey],
    presented: &Presented,
) -> Result<&'k PublicKey, ApiError> {
    let invalid = |detail: String| ApiError::new(ErrorCode::SignatureInvalid, detail);
    if let Some(jkt) = bound_key
        && *jkt != presented.keyid
    {
        return Err(invalid(format!(
            "the access token is bound to the key {jkt:?} (cnf.jkt), but the signature's \
             keyid is {:?}; sign with the key the token was issued for",
            presented.keyid
        )));
    }
    let key = keys
        .iter()
        .find(|k| k.jkt == presented.keyid)
        .ok_or_else(|| {
            invalid(format!(
                "keyid {:?} is not a live key of this credential (revoked, or never registered); \
             sign with a registered key (its RFC 7638 thumbprint is the keyid), or register \
             this one first",
                presented.keyid
            ))
        })?;
    key.public.as_ref().ok_or_else(|| {
        invalid(
            "the key this signature names is not a usable Ed25519 key; register a new one"
                .to_owned(),
        )
    })
}

/// `@authority` as the client addressed this server: the configured public origin
/// (behind a proxy), else `Host` (HTTP/1.1) or the URI's authority (HTTP/2).
fn authority(state: &AppState, headers: &HeaderMap, uri: &Uri) -> Result<String, ApiError> {
    if let Some(origin) = &state.config.public_authority {
        return Ok(origin.clone());
    }
    headers
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.as_str().to_owned()))
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::SignatureInvalid,
                "a signed request needs a Host header (its @authority)",
            )
        })
}

/// The problem document of a signature the scheme refused at `now` (Unix
/// seconds). `signature_expired` carries `server_time`: the server's clock, for a
/// client whose own is off (the SDK signs again with the difference,
/// `crates/sdk/src/signing.rs`).
pub(super) fn refused(e: agent::Error, now: i64) -> ApiError {
    let problem = |code| ApiError::new(code, format!("{e}; nothing was done"));
    match &e {
        agent::Error::Invalid(_) => problem(ErrorCode::SignatureInvalid),
        agent::Error::Expired(_) => problem(ErrorCode::SignatureExpired).with("server_time", now),
        agent::Error::DigestMismatch(_) => problem(ErrorCode::DigestMismatch),
    }
}
