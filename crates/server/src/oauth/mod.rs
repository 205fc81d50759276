//! Access tokens (issue 15): short-lived JWTs (RFC 9068 profile, `typ` `at+jwt`),
//! signed with the keys of [`keys`], and what is in them.
//!
//! A token is honoured while its signature verifies against a published key, its
//! `iss` and `aud` are this server as the request reached it, it is unexpired on
//! the server's clock, and its `jti` is live in `access_tokens` with a live parent
//! credential. The last check is a database read the token cache
//! (`app/lookups.rs`) keeps for 2 s: that is how a revocation reaches every
//! instance within 2 s, as a static token's does.

pub mod keys;
pub use crate::store::pkce;

use crate::clock::Millis;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest an access token may live.
pub const MAX_ACCESS_TOKEN_TTL: Duration = Duration::from_secs(30 * 60);
/// The longest a token exchanged from another access token may live (issue 40:
/// what a host hands its sidecars is short-lived whatever `access_token_ttl` says).
pub const MAX_EXCHANGED_TOKEN_TTL: Duration = Duration::from_secs(15 * 60);
/// How many actors an exchanged token's `act` may name: each exchange of an
/// exchanged token nests one more, and a token must stay small enough for a header.
pub const MAX_ACT_DEPTH: usize = 8;
/// RFC 8693 §2.1: the grant type of a token exchange.
pub const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8628 §3.4: the grant type of a device's poll.
pub const GRANT_DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// RFC 6749 §6.
pub const GRANT_REFRESH_TOKEN: &str = "refresh_token";
/// RFC 6749 §4.1.3: the grant type of an authorization code (with PKCE).
pub const GRANT_AUTHORIZATION_CODE: &str = "authorization_code";
/// What authorization codes start with (opaque; stored hashed).
pub const AUTHORIZATION_CODE_PREFIX: &str = "sb_ac_";
/// What refresh tokens start with (opaque; stored hashed).
pub const REFRESH_PREFIX: &str = "sb_rt_";
/// What device codes start with (opaque; stored hashed).
pub const DEVICE_CODE_PREFIX: &str = "sb_dc_";
/// RFC 8693 §3: an access token, as a subject or an issued token.
pub const TOKEN_TYPE_ACCESS: &str = "urn:ietf:params:oauth:token-type:access_token";
/// RFC 8693 §3: a JWT (asked for as `requested_token_type`, we issue access tokens
/// that are JWTs).
pub const TOKEN_TYPE_JWT: &str = "urn:ietf:params:oauth:token-type:jwt";

/// How far a token's `iat` may lie in the future (another instance's clock).
const IAT_SKEW_MS: Millis = 60_000;

/// The claims of an access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    /// The agent's id, or `token:<id>` for a credential of no agent (an operator's).
    pub sub: String,
    pub aud: String,
    /// Seconds since the epoch.
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    /// The tenant it acts in.
    pub tenant: String,
    /// Space-separated scopes (RFC 8693 §4.2, RFC 9068 §2.2.3).
    pub scope: String,
    /// The client that asked for it, when it said (RFC 9068 §2.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The key the token is bound to (RFC 7800 `cnf`, with RFC 9449's `jkt`): a
    /// request with this token must be signed by that key (issue 39).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cnf: Option<Confirmation>,
    /// Who holds this token on the subject's behalf (RFC 8693 §4.1): set on a token
    /// exchanged from another access token, naming the credential that exchanged it
    /// (the host); a subject's own `act` nests inside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Actor>,
}

/// RFC 8693 §4.1 actor: `sub` is the credential that exchanged the token, as
/// operators see it (`token:<token_id>`, the `token_id` of the credentials list),
/// `client_id` the client the exchanged subject was issued to (§4.3), and `act`
/// the actor before it, when the subject was itself exchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub act: Option<Box<Actor>>,
}

impl Actor {
    /// How many actors this chain names (itself and those nested in it).
    pub fn depth(&self) -> usize {
        1 + self.act.as_deref().map_or(0, Actor::depth)
    }
}

/// RFC 7800 §3.1 confirmation: the RFC 7638 thumbprint of the bound key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confirmation {
    pub jkt: String,
}

impl Claims {
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scope.split_whitespace()
    }
}

/// Whether a bearer credential has the shape of a JWT (our static tokens start with
/// `sb_` and have no dots).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|b| *b == b'.').count() == 2
}

/// Why a JWT was not accepted. The message is for the caller: it never repeats the
/// token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("the access token is not a well-formed JWT")]
    Malformed,
    #[error(
        "the access token was signed with a key this server does not publish (kid {0:?}); \
         it may have expired long ago: ask the token endpoint for a new one"
    )]
    UnknownKey(String),
    #[error("the access token is not valid here: {0}")]
    Invalid(String),
    #[error("the access token has expired; ask the token endpoint for a new one")]
    Expired,
}

/// The `kid` of a token's header, before any verification.
pub fn kid_of(token: &str) -> Result<String, Rejected> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Rejected::Malformed)?;
    if header.alg != jsonwebtoken::Algorithm::EdDSA {
        return Err(Rejected::Invalid(format!(
            "its algorithm is {:?}; this server signs with EdDSA only",
            header.alg
        )));
    }
    header
        .kid
        .ok_or_else(|| Rejected::Invalid("its header names no key (kid)".to_owned()))
}

/// Verifies `token` with `key` for `issuer` (also its audience) at `now`. With
/// `allow_expired`, an expired token passes (revoking one is harmless).
pub fn verify(
    token: &str,
    key: &jsonwebtoken::DecodingKey,
    issuer: &str,
    now: Millis,
    allow_expired: bool,
) -> Result<Claims, Rejected> {
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    // Time is checked below on the server's clock (a test's manual clock), not
    // the library's system clock.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.required_spec_claims.clear();
    validation.set_issuer(&[issuer]);
    validation.set_audience(&[issuer]);
    let claims = jsonwebtoken::decode::<Claims>(token, key, &validation)
        .map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            Rejected::Invalid(
                match e.kind() {
                    K::InvalidSignature => "its signature does not verify",
                    K::InvalidIssuer => "it was issued for another server address (iss)",
                    K::InvalidAudience => "it is meant for another server address (aud)",
                    K::InvalidAlgorithm => "its algorithm is not EdDSA",
                    K::Json(_) | K::MissingRequiredClaim(_) => "its claims are incomplete",
                    _ => "it does not decode",
                }
                .to_owned(),
            )
        })?
        .claims;
    if claims.iat * 1000 > now + IAT_SKEW_MS {
        return Err(Rejected::Invalid(
            "it was issued in the future (iat)".to_owned(),
        ));
    }
    if !allow_expired && claims.exp * 1000 <= now {
        return Err(Rejected::Expired);
    }
    Ok(claims)
}
