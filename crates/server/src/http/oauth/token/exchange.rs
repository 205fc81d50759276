//! The token exchange grant (RFC 8693): a static credential, or an access token
//! this server issued (a host handing its sidecars narrower, shorter tokens: issue
//! 40), for an access token with its scopes or fewer.

use super::{Grant, Holder, Minted, presented_key};
use crate::app::signin::{self as app, NewAccessToken};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::auth;
use crate::http::notes::Notes;
use crate::http::oauth::{OAuthError, draw, invalid_grant, required};
use crate::http::signatures;
use crate::oauth::{self, Actor, Claims};
use axum::http::StatusCode;
use axum::response::Response;
use switchboard_proto::{AgentId, ErrorCode, TenantId};

/// RFC 8693: a static credential, or an access token this server issued, for an
/// access token with its scopes or fewer. Where each guard is:
///
/// - who the subject is: [`static_subject`] or [`access_subject`] (the API's
///   verification, `http/auth/jwt.rs`), each drawing the buckets the API draws;
/// - a bound subject's key: [`proof_of_possession`] (the API's signature checks,
///   `http/signatures.rs`);
/// - never wider: [`granted`] (scopes), [`oauth::MAX_EXCHANGED_TOKEN_TTL`] (life)
///   and the binding kept (a subject's `cnf` passes on unless a key is presented);
/// - cascade: the new token's record hangs under the subject's parent credential,
///   so revoking that (or logging it out) ends it (`live_access_token` needs a live
///   parent).
pub(super) async fn exchange(grant: Grant<'_>) -> Result<Response, OAuthError> {
    let (state, notes, params, issuer) = (grant.state, grant.notes, grant.params, grant.issuer);
    let subject_token = required(params, "subject_token")?;
    let subject_type = required(params, "subject_token_type")?;
    if subject_type != oauth::TOKEN_TYPE_ACCESS {
        return Err(OAuthError::request(format!(
            "subject_token_type must be {:?} (a static Switchboard token, or an access token \
             this server issued)",
            oauth::TOKEN_TYPE_ACCESS
        )));
    }
    if params.contains_key("actor_token") {
        return Err(OAuthError::request(
            "delegation (actor_token) is not supported; exchange the subject's own token \
             (the new token names the exchanging credential in its act claim)",
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
    if subject_token.starts_with(oauth::REFRESH_PREFIX) {
        return Err(invalid_grant(
            "a refresh token is not exchanged: use it with grant_type=refresh_token, then \
             exchange the access token it gives",
        ));
    }
    // The client address's bucket, before any database work.
    let digest = draw(state, notes, subject_token)?;
    let subject = if oauth::looks_like_jwt(subject_token) {
        access_subject(state, notes, issuer, subject_token).await?
    } else {
        static_subject(state, notes, &digest).await?
    };
    proof_of_possession(&grant, &subject).await?;
    let scopes = granted(&subject, params.get("scope").map(String::as_str))?;
    let minted = match subject.claims {
        Some(_) => Minted::new(state, oauth::MAX_EXCHANGED_TOKEN_TTL),
        None => Minted::new(state, oauth::MAX_ACCESS_TOKEN_TTL),
    };
    // A key presented here binds the token this exchange makes (and only it): it
    // hangs under the subject's parent credential, which itself need not sign with
    // it. Without one, a token exchanged from a bound access token is bound to the
    // same key: an exchange never loosens a binding.
    let key = presented_key(params)?;
    if let Some(key) = &key {
        crate::app::keys::bind_exchange_key(
            state,
            subject.tenant,
            &subject.parent_hash,
            &key.new_key(false),
        )
        .await?;
    }
    let bound_key = key
        .as_ref()
        .map(|k| k.jkt.as_str())
        .or(subject.bound_key.as_deref());
    let act = subject.claims.as_ref().map(|claims| Actor {
        sub: format!("token:{}", crate::access::token_id(&subject.parent_hash)),
        client_id: claims.client_id.clone(),
        act: claims.act.clone().map(Box::new),
    });
    let depth = act.as_ref().map_or(0, Actor::depth);
    let holder = Holder {
        tenant: subject.tenant,
        agent: subject.agent,
        parent_hash: &subject.parent_hash,
        scopes: &scopes,
        client_id: grant.client_id.clone(),
        bound_key,
        act,
    };
    let access_token = minted.sign(state, issuer, holder)?;
    app::issued(
        state,
        &NewAccessToken {
            jti: &minted.jti,
            tenant: subject.tenant,
            parent_hash: &subject.parent_hash,
            issued_at: minted.now,
            expires_at: minted.expires_at(),
        },
    )
    .await?;
    tracing::info!(
        agent = subject.agent_name.as_deref().unwrap_or("-"),
        subject = if subject.claims.is_some() {
            "access_token"
        } else {
            "static"
        },
        actors = depth,
        bound = bound_key.is_some(),
        expires_in = minted.expires_in,
        "access token issued by token exchange"
    );
    Ok(minted.answer(access_token, &scopes, None))
}

/// Whom a token exchange's subject stands for, once it is verified.
struct Subject {
    tenant: TenantId,
    agent: Option<AgentId>,
    agent_name: Option<String>,
    /// The credential the exchanged token hangs under: the static token itself, or
    /// the one the access token was issued from (the host's login or static token).
    parent_hash: Vec<u8>,
    /// What it may hand out: the static token's scopes, or the access token's that
    /// its parent still has.
    scopes: Vec<String>,
    /// The key the access token is bound to (`cnf.jkt`).
    bound_key: Option<String>,
    /// An access token's claims (`None` for a static token).
    claims: Option<Claims>,
}

/// A static subject token: live, looked up through the token cache, then its own
/// bucket and its tenant's.
async fn static_subject(
    state: &AppState,
    notes: &Notes,
    digest: &[u8; 32],
) -> Result<Subject, OAuthError> {
    let hash = digest.to_vec();
    let record = auth::static_token(state, &hash).await?.ok_or_else(|| {
        invalid_grant("the subject token is unknown or revoked; use a current token")
    })?;
    // The subject's own bucket, once it is known.
    auth::limit(
        state,
        Some(notes),
        Some(record.tenant_id),
        state.limiter.credential(digest),
    )?;
    auth::limit(
        state,
        Some(notes),
        Some(record.tenant_id),
        state.limiter.tenant(record.tenant_id),
    )?;
    Ok(Subject {
        tenant: record.tenant_id,
        agent: record.agent_id,
        agent_name: record.agent_name,
        parent_hash: hash,
        scopes: record.scopes,
        bound_key: None,
        claims: None,
    })
}

/// An access token as the subject, verified as the API verifies one
/// (`http/auth/jwt.rs`): its signature with the published keys, `iss` and `aud`
/// (this server as the request names it), `iat` and `exp` on the server's clock,
/// then its `jti` through the token cache (a revoked token, or one whose parent
/// credential was revoked or logged out, is refused), drawing from its subject's
/// and its tenant's buckets as an API call does.
async fn access_subject(
    state: &AppState,
    notes: &Notes,
    issuer: &str,
    token: &str,
) -> Result<Subject, OAuthError> {
    // The client address's bucket was drawn: an unknown `kid` costs nothing more.
    let claims = auth::jwt::verified(state, token, issuer, false, || Ok(()))
        .await
        .map_err(subject_refused)?;
    if claims.act.as_ref().map_or(0, Actor::depth) >= oauth::MAX_ACT_DEPTH {
        return Err(invalid_grant(&format!(
            "the subject token was exchanged {} times already (its act claim): exchange \
             the host's own token instead",
            oauth::MAX_ACT_DEPTH
        )));
    }
    let principal = auth::jwt::principal(state, Some(notes), &claims)
        .await
        .map_err(subject_refused)?;
    Ok(Subject {
        tenant: principal.tenant_id,
        agent: principal.agent_id,
        agent_name: principal.agent_name,
        parent_hash: principal.token_hash,
        scopes: principal.scopes,
        bound_key: principal.bound_key,
        claims: Some(claims),
    })
}

/// An access token the API would refuse (401) is an `invalid_grant` here; a rate
/// limit or an unavailable database keeps its own answer.
fn subject_refused(e: ApiError) -> OAuthError {
    if e.problem.status == StatusCode::UNAUTHORIZED.as_u16() {
        let detail = e.problem.detail.as_deref().unwrap_or(&e.problem.title);
        invalid_grant(&format!("the subject token is refused: {detail}"))
    } else {
        e.into()
    }
}

/// The proof that a bound subject's holder asks (issue 39's rule, applied to the
/// token request): when the subject must sign its API calls (an access token bound
/// to a key by `cnf.jkt`, or a credential a key binds), the token request must be
/// signed with RFC 9421 by that key, exactly as an API call is
/// (`http/signatures.rs`: `@method`, `@authority`, `@path`, `content-digest` of
/// the form, `keyid` = `cnf.jkt`), and its nonce is used once. Otherwise a stolen
/// bound token could be exchanged for one bound to the thief's key, or none.
async fn proof_of_possession(grant: &Grant<'_>, subject: &Subject) -> Result<(), OAuthError> {
    let state = grant.state;
    let keys = crate::app::lookups::reads::request_keys(state, &subject.parent_hash).await?;
    let bound = subject.bound_key.as_deref();
    if !signatures::must_sign(bound, &keys) {
        return Ok(());
    }
    let now = state.now() / 1000;
    let presented = switchboard_webhook::agent::presented(grant.head.headers).map_err(|e| {
        OAuthError::request(format!(
            "the token request's signature cannot be read: {e}; {SIGN_HOW}"
        ))
    })?;
    let Some(presented) = presented else {
        return Err(OAuthError::request(match bound {
            Some(jkt) => format!(
                "the subject token is bound to the key {jkt:?} (its cnf.jkt), so this token \
                 request must be signed with that key: {SIGN_HOW}"
            ),
            None => format!(
                "the subject token's credential is bound to a signing key, so this token \
                 request must be signed with it: {SIGN_HOW}"
            ),
        }));
    };
    let public = signatures::signing_key(bound, &keys, &presented).map_err(pop_refused)?;
    signatures::verify_signed(state, public, grant.head, grant.body, &presented, now)
        .await
        .map_err(pop_refused)
}

/// How to sign a token request, for a refusal's description.
const SIGN_HOW: &str = "RFC 9421 with label sig1 over \"@method\" \"@authority\" \"@path\" and \
     \"content-digest\" (sha-256 of the form body), keyid = the key's RFC 7638 thumbprint, \
     alg=\"ed25519\", a fresh nonce, created now and expires at most 300 s later (the SDK's \
     signing::sign_request does this)";

/// A signature refused by the API's checks, as an OAuth error: one made with
/// another key than the subject's, or that does not verify, is `invalid_grant`
/// (the proof does not match the grant); a request to sign again (its window, its
/// digest, a nonce used before) is `invalid_request`. Status 400 (RFC 6749 §5.2).
fn pop_refused(e: ApiError) -> OAuthError {
    let detail = e
        .problem
        .detail
        .clone()
        .unwrap_or_else(|| e.problem.title.clone());
    let detail = format!("the token request's signature: {detail}");
    match e.code() {
        Some(ErrorCode::SignatureInvalid) => invalid_grant(&detail),
        Some(ErrorCode::SignatureExpired) => OAuthError::request(format!(
            "{detail} (the server's clock is at {} Unix seconds)",
            e.problem
                .extensions
                .get("server_time")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or_default()
        )),
        Some(ErrorCode::SignatureReplayed) => OAuthError::request(
            "the token request's signature was used before (its nonce): a replayed request; \
             nothing was issued. Sign each token request anew, with a fresh nonce",
        ),
        Some(ErrorCode::DigestMismatch) => OAuthError::request(detail),
        _ => e.into(),
    }
}

/// The scopes a token exchange grants: what was asked (space-separated), each one
/// the subject has or may hand out (an agent's read scope, from its inbox scope:
/// `access::grantable`), or all of the subject's. Never more than the subject's:
/// for an access token, its scopes that its parent credential still has.
fn granted(subject: &Subject, asked: Option<&str>) -> Result<Vec<String>, OAuthError> {
    let held = &subject.scopes;
    let what = match subject.claims {
        Some(_) => "the subject access token",
        None => "the subject token",
    };
    let scopes = match asked {
        None => held.clone(),
        Some(asked) => {
            let mut scopes: Vec<String> = Vec::new();
            for scope in asked.split_whitespace() {
                if !crate::access::grantable(held, scope) {
                    return Err(OAuthError::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_scope",
                        format!(
                            "{what} does not have the scope {scope:?}, and an exchange never \
                             widens: ask for some of {held:?} (an agent's token may also ask \
                             for \"agent:<its id>:read\"), or omit scope for all of them"
                        ),
                    ));
                }
                if !scopes.iter().any(|s| s == scope) {
                    scopes.push(scope.to_owned());
                }
            }
            scopes
        }
    };
    if scopes.is_empty() && subject.claims.is_some() {
        return Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            "no scope to grant: the subject access token has none its credential still holds, \
             or scope named none; ask for at least one of the subject's scopes",
        ));
    }
    Ok(scopes)
}
