//! Access tokens on the API (verified before any database work, then their record
//! through the token cache) and revocation (RFC 7009).

use super::{OAuthError, form, no_store, required};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::auth::{self, Principal, token_digest};
use crate::http::notes::Notes;
use crate::oauth::{self, Claims, Rejected};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

/// Revocation (RFC 7009): an access token (JWT) or a static token. Whoever holds a
/// token may revoke it; an unknown, invalid or already revoked token is answered
/// 200 all the same (§2.2).
pub(super) async fn revoke(
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
    let digest = super::draw(&state, &notes, token)?;
    let now = state.now();
    if oauth::looks_like_jwt(token) {
        let issuer = super::issuer(&state, &headers)?;
        // A token that does not verify here names nothing to revoke. (Its string's
        // bucket was drawn from above: an unknown `kid` costs nothing more.)
        if let Ok(claims) = verified(&state, token, &issuer, true, || Ok(())).await
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
            tracing::info!("a login was ended by its holder (refresh token revoked)");
        }
    } else {
        let hash = digest.to_vec();
        let holder = |record: &crate::store::TokenRecord| crate::store::AuditNote {
            actor: record
                .agent_name
                .as_ref()
                .map_or_else(|| "operator".to_owned(), |n| format!("agent:{n}")),
            target: format!("token:{}", crate::http::credentials::token_id(&hash)),
            detail: Some("revoked by its holder (RFC 7009)".to_owned()),
        };
        if let Some(record) = state.store.token(&hash).await?
            && state
                .store
                .revoke_credential(record.tenant_id, &hash, &holder(&record), now)
                .await?
                > 0
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
/// the keys (at most every 200 ms: `oauth/keys.rs`), after `before_reload` (the
/// caller's rate limit for what may become a database read).
pub(in crate::http) async fn verified(
    state: &AppState,
    token: &str,
    issuer: &str,
    allow_expired: bool,
    before_reload: impl FnOnce() -> Result<(), ApiError>,
) -> Result<Claims, ApiError> {
    let digest = token_digest(token);
    if let Some(claims) = state.lookups.verified(&digest, issuer) {
        if !allow_expired && claims.exp * 1000 <= state.now() {
            return Err(unauthorized(Rejected::Expired));
        }
        return Ok(claims);
    }
    let kid = oauth::kid_of(token).map_err(unauthorized)?;
    let key = match state.signing.decoding(&kid) {
        Some(key) => key,
        None => {
            before_reload()?;
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
    let claims =
        oauth::verify(token, &key, issuer, state.now(), allow_expired).map_err(unauthorized)?;
    state.lookups.put_verified(digest, issuer, &claims);
    Ok(claims)
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
pub(in crate::http) async fn principal(
    state: &AppState,
    notes: Option<&Notes>,
    claims: &Claims,
) -> Result<Principal, ApiError> {
    // Every token of one subject shares one bucket, before any database work.
    let subject = token_digest(&format!(
        "access-token-subject:{}:{}",
        claims.tenant, claims.sub
    ));
    let tenant = claims.tenant.parse().ok();
    auth::limit(state, notes, tenant, state.limiter.credential(&subject))?;
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
    auth::limit(
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
