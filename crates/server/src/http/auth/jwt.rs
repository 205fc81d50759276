//! Access tokens (EdDSA JWTs from the token endpoint) on the API: verified with the
//! published keys before any database work, then their record through the token
//! cache.

use super::limit;
use crate::access::{Principal, token_digest};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::notes::Notes;
use crate::oauth::{self, Claims, Rejected};

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
            crate::app::lookups::reads::reload_keys(state).await?;
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
    limit(state, notes, tenant, state.limiter.credential(&subject))?;
    let grant = crate::app::lookups::reads::access(state, &claims.jti)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                switchboard_proto::ErrorCode::Unauthorized,
                "the access token was revoked, or the credential it was issued from \
                 was; get a new one",
            )
        })?;
    let record = grant.record;
    if record.tenant_id.to_string() != claims.tenant {
        return Err(ApiError::new(
            switchboard_proto::ErrorCode::Unauthorized,
            "the access token does not match its record; get a new one",
        ));
    }
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
    let scopes = claims
        .scopes()
        .filter(|s| crate::access::grantable(&record.scopes, s))
        .map(str::to_owned)
        .collect();
    Ok(Principal {
        tenant_id: record.tenant_id,
        agent_id: record.agent_id,
        agent_name: record.agent_name,
        scopes,
        token_hash: grant.parent_hash,
        session: None,
        bound_key: claims.cnf.as_ref().map(|cnf| cnf.jkt.clone()),
    })
}
