//! The token endpoint: the token exchange (RFC 8693) of a static credential or of
//! an access token (a host handing its sidecars narrower, shorter tokens: issue
//! 40), the device code grant (RFC 8628), the authorization code grant with PKCE
//! (RFC 6749 §4.1.3, RFC 7636) and refresh tokens (rotated on every use).

use super::{OAuthError, check_client_id, draw, form, hex, invalid_grant, no_store, required};
use crate::app::signin::{
    self as app, AccessGrant, DevicePoll, Issue, NewAccessToken, Redeemed, Redemption, Refreshed,
};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::auth::{self, hash_token};
use crate::http::notes::Notes;
use crate::http::signatures::{self, Head};
use crate::oauth::{self, Actor, Claims};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use switchboard_proto::{AgentId, ErrorCode, TenantId};

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
        oauth::GRANT_TOKEN_EXCHANGE => exchange(grant).await,
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
async fn exchange(grant: Grant<'_>) -> Result<Response, OAuthError> {
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
