//! The token endpoint: the token exchange (RFC 8693) of a static credential or of
//! an access token (a host handing its sidecars narrower, shorter tokens: issue
//! 40), the device code grant (RFC 8628), the authorization code grant with PKCE
//! (RFC 6749 §4.1.3, RFC 7636) and refresh tokens (rotated on every use). The
//! exchange and its guards are `token/exchange.rs`.

mod exchange;

use super::{OAuthError, check_client_id, draw, form, hex, invalid_grant, no_store, required};
use crate::app::signin::{
    self as app, AccessGrant, DevicePoll, Issue, Redeemed, Redemption, Refreshed,
};
use crate::http::AppState;
use crate::http::auth::{self, hash_token};
use crate::http::notes::Notes;
use crate::http::signatures::Head;
use crate::oauth::{self, Actor, Claims};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_proto::{AgentId, TenantId};

/// When an access token is minted, in whole seconds as `exp` and `expires_in` say.
struct Minted {
    jti: String,
    now: i64,
    exp: i64,
    expires_in: i64,
}

impl Minted {
    /// Now, for `access_token_ttl` or `cap`, whichever is shorter.
    fn new(state: &AppState, cap: Duration) -> Self {
        let now = state.now();
        let ttl = state.config.access_token_ttl.min(cap).as_millis() as i64;
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
        holder: Holder<'_>,
    ) -> Result<String, OAuthError> {
        let Holder {
            tenant,
            agent,
            parent_hash,
            scopes,
            client_id,
            bound_key,
            act,
        } = holder;
        let claims = Claims {
            iss: issuer.to_owned(),
            sub: match agent {
                Some(agent) => agent.to_string(),
                None => format!("token:{}", crate::access::token_id(parent_hash)),
            },
            aud: issuer.to_owned(),
            exp: self.exp,
            iat: self.now / 1000,
            jti: self.jti.clone(),
            tenant: tenant.to_string(),
            scope: scopes.join(" "),
            client_id,
            cnf: bound_key.map(|jkt| oauth::Confirmation {
                jkt: jkt.to_owned(),
            }),
            act,
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

    /// What the store records with a login's grant: its next refresh token, this
    /// access token, and the key the client presented (bound to the login).
    fn issue<'a>(&'a self, refresh_hash: &'a [u8], key: Option<&'a Presented>) -> Issue<'a> {
        Issue {
            refresh_hash,
            jti: &self.jti,
            expires_at: self.expires_at(),
            key: key.map(|k| k.new_key(true)),
        }
    }

    /// The answer to a login's grant (device code, refresh): an access token with
    /// the login's scopes, bound to the login's newest key when it has one, and its
    /// next refresh token.
    async fn login_answer(
        &self,
        state: &AppState,
        issuer: &str,
        grant: &AccessGrant,
        client_id: Option<String>,
        refresh_token: String,
    ) -> Result<Response, OAuthError> {
        let scopes = &grant.record.scopes;
        let bound = crate::app::keys::login_key(state, &grant.parent_hash).await?;
        let holder = Holder {
            tenant: grant.record.tenant_id,
            agent: grant.record.agent_id,
            parent_hash: &grant.parent_hash,
            scopes,
            client_id,
            bound_key: bound.as_deref(),
            act: None,
        };
        let access_token = self.sign(state, issuer, holder)?;
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

/// Whom an access token is for: the credential `parent_hash` names (its tenant and
/// agent), the scopes it carries, the client that asked, the key it is bound to,
/// and who holds it on the subject's behalf (an exchanged access token's `act`).
struct Holder<'a> {
    tenant: TenantId,
    agent: Option<AgentId>,
    parent_hash: &'a [u8],
    scopes: &'a [String],
    client_id: Option<String>,
    bound_key: Option<&'a str>,
    act: Option<Actor>,
}

/// One token request as every grant reads it.
struct Grant<'a> {
    state: &'a AppState,
    notes: &'a Notes,
    params: &'a BTreeMap<String, String>,
    issuer: &'a str,
    client_id: Option<String>,
    /// The request as received, for the signature a bound subject's exchange must
    /// carry.
    head: Head<'a>,
    body: &'a [u8],
}

/// The token endpoint: its grants, as the module says.
pub(super) async fn token(
    State(state): State<AppState>,
    axum::Extension(notes): axum::Extension<Notes>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let params = form(&headers, &body)?;
    let grant_type = required(&params, "grant_type")?;
    let issuer = super::issuer(&state, &headers)?;
    let client_id = params.get("client_id").cloned();
    if let Some(client_id) = &client_id {
        check_client_id(client_id)?;
    }
    let grant = Grant {
        state: &state,
        notes: &notes,
        params: &params,
        issuer: &issuer,
        client_id,
        head: Head {
            method: &method,
            uri: &uri,
            headers: &headers,
        },
        body: &body,
    };
    match grant_type {
        oauth::GRANT_TOKEN_EXCHANGE => exchange::exchange(grant).await,
        oauth::GRANT_DEVICE_CODE => device_code(grant).await,
        oauth::GRANT_REFRESH_TOKEN => refresh(grant).await,
        oauth::GRANT_AUTHORIZATION_CODE => authorization_code(grant).await,
        other => Err(OAuthError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            format!(
                "the grant type {other:?} is not supported; this server supports {:?}, {:?}, \
                 {:?} and {:?}",
                oauth::GRANT_AUTHORIZATION_CODE,
                oauth::GRANT_TOKEN_EXCHANGE,
                oauth::GRANT_DEVICE_CODE,
                oauth::GRANT_REFRESH_TOKEN
            ),
        )),
    }
}

/// A new refresh token and its hash.
fn new_refresh() -> (String, Vec<u8>) {
    let token = auth::generate_token(oauth::REFRESH_PREFIX);
    let hash = hash_token(&token);
    (token, hash)
}

/// RFC 8628 §3.4: the device polls with its device code until an operator decided.
async fn device_code(grant: Grant<'_>) -> Result<Response, OAuthError> {
    let Grant {
        state,
        notes,
        params,
        issuer,
        client_id,
        ..
    } = grant;
    let code = required(params, "device_code")?;
    let client = required(params, "client_id")?;
    let key = presented_key(params)?;
    let digest = draw(state, notes, code)?;
    let (refresh_token, refresh_hash) = new_refresh();
    let minted = Minted::new(state, oauth::MAX_ACCESS_TOKEN_TTL);
    let polled = app::poll_device(
        state,
        &hex(&digest),
        client,
        minted.now,
        &minted.issue(&refresh_hash, key.as_ref()),
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
            let answer = minted
                .login_answer(state, issuer, &grant, client_id, refresh_token)
                .await;
            tracing::info!(
                agent = grant.record.agent_name.as_deref().unwrap_or("-"),
                "device login completed: tokens issued"
            );
            answer
        }
    }
}

/// RFC 6749 §4.1.3 with RFC 7636 §4.5: the code a sign-in's consent made, with the
/// app's code verifier, for the sign-in's first tokens. Any attempt spends the
/// code; one redeemed twice ends the sign-in it made.
async fn authorization_code(grant: Grant<'_>) -> Result<Response, OAuthError> {
    let Grant {
        state,
        notes,
        params,
        issuer,
        client_id,
        ..
    } = grant;
    let code = required(params, "code")?;
    let redirect_uri = required(params, "redirect_uri")?;
    let client = required(params, "client_id")?;
    // A missing verifier is a mismatch (RFC 7636 §4.6): it spends the code too.
    let verifier = params
        .get("code_verifier")
        .map(String::as_str)
        .unwrap_or("");
    let key = presented_key(params)?;
    let digest = draw(state, notes, code)?;
    let family = hash_token(&auth::generate_token("sb_fam_"));
    let (refresh_token, refresh_hash) = new_refresh();
    let minted = Minted::new(state, oauth::MAX_ACCESS_TOKEN_TTL);
    let redeemed = app::redeem(
        state,
        &Redemption {
            code_hash: &digest,
            client_id: client,
            redirect_uri,
            code_verifier: verifier,
            family_hash: &family,
        },
        minted.now,
        &minted.issue(&refresh_hash, key.as_ref()),
    )
    .await?;
    match redeemed {
        Redeemed::Unknown => Err(invalid_grant(
            "the authorization code is unknown; sign in again",
        )),
        Redeemed::Expired => Err(invalid_grant(
            "the authorization code expired (it lives one minute); sign in again",
        )),
        Redeemed::Mismatch => Err(invalid_grant(
            "the code was made for another client_id or redirect_uri, or code_verifier is \
             not the one its code_challenge came from (RFC 7636 S256); the code is spent, \
             sign in again",
        )),
        Redeemed::Reused => Err(invalid_grant(
            "this authorization code was redeemed before: the sign-in it made is \
                 revoked now; sign in again",
        )),
        Redeemed::Issued(grant) => {
            tracing::info!(client = %client, "sign-in completed: tokens issued");
            minted
                .login_answer(state, issuer, &grant, client_id, refresh_token)
                .await
        }
    }
}

/// RFC 6749 §6: a refresh token for new tokens, once (it rotates); a second use
/// of one revokes its login.
async fn refresh(grant: Grant<'_>) -> Result<Response, OAuthError> {
    let Grant {
        state,
        notes,
        params,
        issuer,
        client_id,
        ..
    } = grant;
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
    if params.contains_key(SIGNING_KEY) {
        return Err(OAuthError::request(
            "a refresh keeps the login's keys; a new key is registered with a request signed \
             by a current one (POST /api/v1/agent/keys), then a refresh binds to it",
        ));
    }
    let digest = draw(state, notes, old)?;
    let (refresh_token, refresh_hash) = new_refresh();
    let minted = Minted::new(state, oauth::MAX_ACCESS_TOKEN_TTL);
    let refreshed = app::refresh(
        state,
        &digest,
        minted.now,
        &minted.issue(&refresh_hash, None),
    )
    .await?;
    match refreshed {
        Refreshed::Unknown => Err(invalid_grant("the refresh token is unknown; log in again")),
        Refreshed::Revoked => Err(invalid_grant("this login was revoked; log in again")),
        Refreshed::Expired(why) => Err(invalid_grant(&format!(
            "{why} ({} days from the login, {} days without a refresh): it is ended; \
                 log in again",
            state.config.refresh_lifetimes.absolute_ms / 86_400_000,
            state.config.refresh_lifetimes.idle_ms / 86_400_000,
        ))),
        Refreshed::Reused => Err(invalid_grant(
            "this refresh token was used before, so it may be stolen: the whole login \
                 is revoked now; log in again",
        )),
        Refreshed::Rotated(grant) => {
            minted
                .login_answer(state, issuer, &grant, client_id, refresh_token)
                .await
        }
    }
}

/// The token request's parameter that presents the client's public key (issue 39):
/// a JWK of an Ed25519 key, `{"kty":"OKP","crv":"Ed25519","x":"…"}`.
pub(super) const SIGNING_KEY: &str = "signing_key";

/// A public key a token request presented.
pub(super) struct Presented {
    pub(super) jkt: String,
    public_key: [u8; 32],
}

impl Presented {
    fn new_key(&self, binds_parent: bool) -> crate::app::keys::NewRequestKey<'_> {
        crate::app::keys::NewRequestKey {
            jkt: &self.jkt,
            public_key: &self.public_key,
            binds_parent,
        }
    }
}

/// The key of [`SIGNING_KEY`], if the request presented one.
fn presented_key(params: &BTreeMap<String, String>) -> Result<Option<Presented>, OAuthError> {
    let Some(text) = params.get(SIGNING_KEY) else {
        return Ok(None);
    };
    let public = crate::app::keys::parse_jwk(text).map_err(OAuthError::request)?;
    Ok(Some(Presented {
        jkt: public.thumbprint(),
        public_key: *public.as_bytes(),
    }))
}
