//! The store's seam for access tokens (issue 15): the keys that sign them and the
//! record of every token issued, by its `jti`. The private keys are stored sealed (the
//! HTTP layer seals and opens them); tokens never are, only their ids. The trait,
//! [`IdentityStore`](crate::IdentityStore), is declared with its one implementation in
//! `engine/identity.rs`.

use super::*;

/// A stored signing key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeyRow {
    pub kid: String,
    /// The JOSE algorithm: `EdDSA`.
    pub algorithm: String,
    /// The raw public key (32 bytes for Ed25519).
    pub public_key: Vec<u8>,
    /// PKCS#8, sealed under the server key named by `sealed_with`.
    pub private_key: Vec<u8>,
    pub sealed_with: String,
    pub created_at: Millis,
}

/// An access token to record.
#[derive(Debug, Clone)]
pub struct NewAccessToken<'a> {
    pub jti: &'a str,
    pub tenant: TenantId,
    /// The credential it was issued from (a `tokens` row): revoking that revokes it.
    pub parent_hash: &'a [u8],
    pub issued_at: Millis,
    pub expires_at: Millis,
}

/// A live access token: who it acts for.
#[derive(Debug, Clone)]
pub struct AccessGrant {
    /// Its parent credential's record (tenant, agent, scopes, client settings).
    pub record: TokenRecord,
    /// The parent credential's hash (what a console grant made with it refers to).
    pub parent_hash: Vec<u8>,
}

/// A device login request to store (RFC 8628). Only the device code's hash.
#[derive(Debug, Clone)]
pub struct NewDeviceRequest<'a> {
    /// SHA-256 of the device code, in hex.
    pub device_hash: &'a str,
    pub user_code: &'a str,
    /// The tenant whose operators may decide it; `None`: the name the client gave
    /// is no tenant's, and nobody sees the request.
    pub tenant: Option<TenantId>,
    pub client_id: &'a str,
    pub agent_name: &'a str,
    pub source: &'a str,
    pub user_agent: &'a str,
    pub created_at: Millis,
    pub expires_at: Millis,
    pub interval_ms: Millis,
}

/// A device login request as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRequestRow {
    pub user_code: String,
    pub client_id: String,
    pub agent_name: String,
    pub source: String,
    pub user_agent: String,
    pub created_at: Millis,
    pub expires_at: Millis,
    /// `pending`, `approved`, `denied` or `used` (approved, and its tokens taken).
    pub status: String,
    pub decided_by: Option<String>,
    pub decided_at: Option<Millis>,
    pub agent_id: Option<AgentId>,
}

/// An operator's approval of a device request.
#[derive(Debug, Clone)]
pub struct Approval<'a> {
    /// The agent the login is for (created in the tenant when it does not exist).
    /// `None`: the one the request asked for.
    pub agent_name: Option<&'a str>,
    /// The login's credential: a new `tokens` row of the agent, which every
    /// refresh and access token of the login hangs from.
    pub family_hash: &'a [u8],
    /// The agent token scopes (`{agent_id}` filled in by the store).
    pub scopes: &'a [String],
    /// The approving credential (the operator's token, or the one its console
    /// session hangs from): revoking it ends the login.
    pub parent: &'a [u8],
}

/// How long a login (a refresh-token family) lives: at most `absolute_ms` from its
/// start, and until it went unused for `idle_ms` (no refresh).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefreshLifetimes {
    pub absolute_ms: Millis,
    pub idle_ms: Millis,
}

impl RefreshLifetimes {
    /// 30 days from the login, 7 days idle: an agent asleep for a week logs in
    /// again, and a stolen refresh token is worth a month at most (OAuth 2.0
    /// Security BCP §4.14.2: refresh tokens should expire when unused).
    pub const DEFAULT: Self = Self {
        absolute_ms: 30 * 24 * 3600 * 1000,
        idle_ms: 7 * 24 * 3600 * 1000,
    };

    /// Why a login that started at `started`, last refreshed at `last`, is over at
    /// `now`, if it is.
    pub fn ended(self, started: Millis, last: Millis, now: Millis) -> Option<&'static str> {
        if now >= started.saturating_add(self.absolute_ms) {
            Some("the login reached its absolute lifetime")
        } else if now >= last.saturating_add(self.idle_ms) {
            Some("the login went unused for its idle lifetime")
        } else {
            None
        }
    }
}

/// What a grant that succeeds records at once, in its transaction: the next
/// refresh token (hash) and the access token (by `jti`).
#[derive(Debug, Clone, Copy)]
pub struct Issue<'a> {
    pub refresh_hash: &'a [u8],
    pub jti: &'a str,
    pub expires_at: Millis,
    /// A public key the client presented with the grant (issue 39): bound to the
    /// login in the same transaction (a key the login has already is kept).
    pub key: Option<NewRequestKey<'a>>,
}

/// What polling the token endpoint with a device code found (RFC 8628 §3.5).
#[derive(Debug, Clone)]
pub enum DevicePoll {
    /// No such device code, another client's, or its tokens were taken already.
    Unknown,
    Expired,
    /// Polled sooner than its interval: the interval is now this (5 s more).
    SlowDown,
    Pending,
    Denied,
    /// Approved: the tokens of [`Issue`] were recorded for this login.
    Approved(AccessGrant),
}

/// What a refresh token's use found.
#[derive(Debug, Clone)]
pub enum Refreshed {
    Unknown,
    /// It had been used before: its whole family is revoked now.
    Reused,
    /// Its family (the login) was revoked.
    Revoked,
    /// The login's lifetime is over (why): it is revoked now.
    Expired(&'static str),
    /// Used, and the tokens of [`Issue`] recorded.
    Rotated(AccessGrant),
}
