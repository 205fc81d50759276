//! The store's seam for the sign-in of native apps (issue 15): authorization codes
//! (RFC 6749 §4.1) bound to a client, a loopback redirect URI and a PKCE challenge
//! (RFC 7636). Only a code's hash is stored; it is redeemed once. The trait,
//! [`SignInStore`](crate::SignInStore), is declared with its one implementation in
//! `engine/signin.rs`.

use super::*;

/// How long an authorization code can be redeemed (RFC 6749 §4.1.2 recommends at
/// most 10 minutes; the app redeems it the moment the browser brings it back).
pub const AUTHORIZATION_CODE_TTL_MS: Millis = 60_000;

/// A code an operator's consent made.
#[derive(Debug, Clone)]
pub struct NewAuthorizationCode<'a> {
    pub code_hash: &'a [u8],
    pub tenant: TenantId,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    /// The S256 challenge of the app's code verifier.
    pub code_challenge: &'a str,
    /// What the operator granted (each one they hold).
    pub scopes: &'a [String],
    /// The id of the consenting operator's credential.
    pub granted_by: &'a str,
    /// The consenting credential's hash: the sign-in hangs from it, and revoking it
    /// ends the sign-in.
    pub parent_hash: &'a [u8],
    pub created_at: Millis,
    pub expires_at: Millis,
}

/// A token request redeeming a code: what it must match.
#[derive(Debug, Clone, Copy)]
pub struct Redemption<'a> {
    pub code_hash: &'a [u8],
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub code_verifier: &'a str,
    /// The sign-in's credential, made on success: a new `tokens` row with the
    /// code's scopes, which the refresh and access tokens hang from.
    pub family_hash: &'a [u8],
}

/// What redeeming a code found.
#[derive(Debug, Clone)]
pub enum Redeemed {
    Unknown,
    /// Too late: the code is spent now.
    Expired,
    /// Another client, another redirect URI, or a verifier that is not the
    /// challenge's: the code is spent now.
    Mismatch,
    /// Redeemed before: the sign-in it made is revoked now.
    Reused,
    /// Redeemed: the tokens of [`Issue`] were recorded for the new sign-in.
    Issued(AccessGrant),
}
