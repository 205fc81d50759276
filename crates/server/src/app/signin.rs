//! Sign-in as use cases, for the OAuth endpoints (`http/oauth`): device login
//! requests and their polls (RFC 8628), consent codes and their redemption with
//! PKCE (RFC 6749, RFC 7636), refresh tokens that rotate, access tokens issued by
//! token exchange (RFC 8693), and revocation by the holder (RFC 7009). A login that
//! ends (a reused refresh token or code, an expired login, a revocation) makes this
//! instance forget its cached tokens at once; the others follow within the cache's
//! TTL. The endpoints keep OAuth's wire (forms, errors); the tokens' signing is
//! `oauth::keys`.

use super::AppState;
use crate::error::ApiResult;
use switchboard_proto::TenantId;

pub use crate::store::{
    AUTHORIZATION_CODE_TTL_MS, AccessGrant, DevicePoll, Issue, NewAccessToken,
    NewAuthorizationCode, NewDeviceRequest, Redeemed, Redemption, Refreshed, TokenRecord,
};

/// The tenant named `name`, if there is one.
pub async fn tenant_by_name(state: &AppState, name: &str) -> ApiResult<Option<TenantId>> {
    Ok(state.store.tenant_by_name(name).await?)
}

/// Records a device's login request; `false` when its user code is taken (draw
/// another).
pub async fn request_device_login(
    state: &AppState,
    request: &NewDeviceRequest<'_>,
) -> ApiResult<bool> {
    Ok(state.store.insert_device_request(request).await?)
}

/// A device's poll with its device code: its tokens once an operator approved.
pub async fn poll_device(
    state: &AppState,
    device_hash: &str,
    client_id: &str,
    now: i64,
    issue: &Issue<'_>,
) -> ApiResult<DevicePoll> {
    Ok(state
        .store
        .poll_device_request(device_hash, client_id, now, issue)
        .await?)
}

/// Records an operator's consent (`code`), with its audit row.
pub async fn allow(
    state: &AppState,
    code: &NewAuthorizationCode<'_>,
    note: &crate::store::AuditNote,
) -> ApiResult<()> {
    Ok(state.store.insert_authorization_code(code, note).await?)
}

/// Redeems a consent's code for the sign-in's first tokens. A code redeemed twice
/// ends the sign-in it made.
pub async fn redeem(
    state: &AppState,
    redemption: &Redemption<'_>,
    now: i64,
    issue: &Issue<'_>,
) -> ApiResult<Redeemed> {
    let redeemed = state
        .store
        .redeem_authorization_code(redemption, now, issue)
        .await?;
    if matches!(redeemed, Redeemed::Reused) {
        state.lookups.forget_tokens();
        tracing::warn!("an authorization code was redeemed again: its sign-in is revoked");
    }
    Ok(redeemed)
}

/// Uses refresh token `hash` for new tokens, once (it rotates); a second use, or a
/// login past its lifetimes, ends the login.
pub async fn refresh(
    state: &AppState,
    hash: &[u8],
    now: i64,
    issue: &Issue<'_>,
) -> ApiResult<Refreshed> {
    let refreshed = state
        .store
        .refresh(hash, now, state.config.refresh_lifetimes, issue)
        .await?;
    match refreshed {
        Refreshed::Expired(_) => state.lookups.forget_tokens(),
        Refreshed::Reused => {
            // Every instance drops the login's tokens within the cache's TTL.
            state.lookups.forget_tokens();
            tracing::warn!("a rotated refresh token was used again: its login is revoked");
        }
        _ => {}
    }
    Ok(refreshed)
}

/// Records an access token issued by token exchange.
pub async fn issued(state: &AppState, token: &NewAccessToken<'_>) -> ApiResult<()> {
    Ok(state.store.insert_access_token(token).await?)
}

/// Revokes access token `jti` of `tenant`; whether it was live.
pub async fn revoke_access(state: &AppState, tenant: TenantId, jti: &str) -> ApiResult<bool> {
    let revoked = state
        .store
        .revoke_access_token(tenant, jti, state.now())
        .await?;
    state.lookups.forget_tokens();
    Ok(revoked)
}

/// Ends the login refresh token `hash` belongs to, with every access token of it;
/// whether it was live.
pub async fn revoke_login(state: &AppState, hash: &[u8]) -> ApiResult<bool> {
    let revoked = state.store.revoke_refresh_family(hash, state.now()).await?;
    state.lookups.forget_tokens();
    Ok(revoked)
}

/// Revokes the static token with this `hash` by its holder: its record when it was
/// live.
pub async fn revoke_static(state: &AppState, hash: &[u8]) -> ApiResult<Option<TokenRecord>> {
    let Some(record) = state.store.token(hash).await? else {
        return Ok(None);
    };
    let note = crate::store::AuditNote {
        actor: record
            .agent_name
            .as_ref()
            .map_or_else(|| "operator".to_owned(), |n| format!("agent:{n}")),
        target: format!("token:{}", crate::access::token_id(hash)),
        detail: Some("revoked by its holder (RFC 7009)".to_owned()),
    };
    let revoked = state
        .store
        .revoke_credential(record.tenant_id, hash, &note, state.now())
        .await?;
    state.lookups.forget_tokens();
    Ok((revoked > 0).then_some(record))
}
