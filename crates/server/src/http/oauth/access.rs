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
    if oauth::looks_like_jwt(token) {
        let issuer = super::issuer(&state, &headers)?;
        // A token that does not verify here names nothing to revoke. (Its string's
        // bucket was drawn from above: an unknown `kid` costs nothing more.)
        if let Ok(claims) = verified(&state, token, &issuer, true, || Ok(())).await
            && let Ok(tenant) = claims.tenant.parse()
            && crate::app::signin::revoke_access(&state, tenant, &claims.jti).await?
        {
            tracing::info!(sub = %claims.sub, "access token revoked by its holder");
        }
    } else if token.starts_with(oauth::REFRESH_PREFIX) {
        // A refresh token ends its whole login, and every access token of it.
        if crate::app::signin::revoke_login(&state, &digest).await? {
            tracing::info!("a login was ended by its holder (refresh token revoked)");
        }
    } else {
        if let Some(record) = crate::app::signin::revoke_static(&state, &digest).await? {
            tracing::info!(
                agent = record.agent_name.as_deref().unwrap_or("-"),
                "static token revoked by its holder"
            );
        }
    }
    // This instance refuses it from the next request (the revocations forgot its
    // cached tokens); the others within the TTL.
    Ok((StatusCode::OK, no_store()).into_response())
}
