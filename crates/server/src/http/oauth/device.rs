//! Device authorization (RFC 8628 §3.1): a device asks to log in as an agent; an
//! operator of the tenant it names decides (`http/devices.rs`).

use super::{OAuthError, check_client_id, form, hex, no_store, required};
use crate::app::signin::{self as app, NewDeviceRequest};
use crate::http::AppState;
use crate::http::auth::{self, token_digest};
use crate::http::notes::Notes;
use crate::oauth;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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
                .get::<axum::extract::ConnectInfo<crate::http::PeerAddr>>()
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
pub(super) async fn device_authorization(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    Peer(peer): Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let issuer = super::issuer(&state, &headers)?;
    // One bucket per source address, before any database work.
    let source_ip = peer.map_or_else(|| "unknown".to_owned(), |p| p.ip().to_string());
    auth::limit(
        &state,
        Some(&notes),
        None,
        state
            .limiter
            .credential(&token_digest(&format!("device-authorization:{source_ip}"))),
    )?;
    let client_id = required(&params, "client_id")?;
    check_client_id(client_id)?;
    let scope = required(&params, "scope")?;
    let agent = scope
        .strip_prefix("agent:")
        .filter(|name| crate::http::limits::name("scope", name).is_ok())
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
        Some(name) => app::tenant_by_name(&state, name).await?,
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
    while !app::request_device_login(
        &state,
        &NewDeviceRequest {
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
        },
    )
    .await?
    {
        code = user_code();
    }
    tracing::info!(agent, client_id, "device login requested");
    let verification_uri = format!("{issuer}{}", super::DEVICES_PAGE);
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
