//! The store's seam for access tokens (issue 15): the keys that sign them and the
//! record of every token issued, by its `jti`. The private keys are stored sealed
//! (the HTTP layer seals and opens them); tokens never are, only their ids.

use super::*;
use async_trait::async_trait;

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

#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// Every stored signing key, oldest first.
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRow>>;
    async fn insert_signing_key(&self, key: &SigningKeyRow) -> StoreResult<()>;
    /// Removes the signing key `kid` (one no token it signed can still be live with).
    async fn delete_signing_key(&self, kid: &str) -> StoreResult<()>;

    async fn insert_access_token(&self, token: &NewAccessToken<'_>) -> StoreResult<()>;
    /// Who the access token `jti` acts for: its parent credential's record, while
    /// the token is unexpired at `now` and neither it nor its parent is revoked.
    async fn access_token(&self, jti: &str, now: Millis) -> StoreResult<Option<AccessGrant>>;
    /// Revokes `tenant`'s access token `jti`; whether it was live.
    async fn revoke_access_token(
        &self,
        tenant: TenantId,
        jti: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Forgets the records of access tokens expired before `before`; how many.
    async fn forget_access_tokens(&self, before: Millis) -> StoreResult<u64>;
}
