//! Revocation (RFC 7009) of an access token, a refresh token or a static token. The
//! access tokens' verification on every request is in `http/auth/jwt.rs`.

use super::{OAuthError, form, no_store, required};
use crate::http::AppState;
use crate::http::auth::jwt::verified;
use crate::http::notes::Notes;
use crate::oauth;
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
            target: format!("token:{}", crate::access::token_id(&hash)),
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
