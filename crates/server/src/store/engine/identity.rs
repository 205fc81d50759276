//! Access tokens, once for every backend: signing keys and issued tokens. Each
//! method is one statement, so [`IdentityStatements`] and [`IdentityStore`] meet
//! one to one; the rules (which key signs, when one goes) live in `oauth/keys.rs`.

use super::Driver;
use crate::clock::Millis;
use crate::store::*;
use async_trait::async_trait;

/// The statements of access tokens (`store/statements/identity.rs`), each alone on
/// the read or the write pool.
#[async_trait]
pub(crate) trait IdentityStatements: Driver {
    async fn signing_key_rows(&self) -> StoreResult<Vec<SigningKeyRow>>;
    async fn insert_signing_key_row(&self, key: &SigningKeyRow) -> StoreResult<()>;
    async fn delete_signing_key_row(&self, kid: &str) -> StoreResult<()>;
    async fn insert_access_token_row(&self, token: &NewAccessToken<'_>) -> StoreResult<()>;
    async fn live_access_token(&self, jti: &str, now: Millis) -> StoreResult<Option<AccessGrant>>;
    async fn revoke_access_token_row(
        &self,
        tenant: TenantId,
        jti: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    async fn delete_access_tokens_before(&self, before: Millis) -> StoreResult<u64>;
}

#[async_trait]
impl<D: IdentityStatements> IdentityStore for D {
    async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRow>> {
        self.signing_key_rows().await
    }

    async fn insert_signing_key(&self, key: &SigningKeyRow) -> StoreResult<()> {
        self.retrying(|| self.insert_signing_key_row(key)).await
    }

    async fn delete_signing_key(&self, kid: &str) -> StoreResult<()> {
        self.retrying(|| self.delete_signing_key_row(kid)).await
    }

    async fn insert_access_token(&self, token: &NewAccessToken<'_>) -> StoreResult<()> {
        self.retrying(|| self.insert_access_token_row(token)).await
    }

    async fn access_token(&self, jti: &str, now: Millis) -> StoreResult<Option<AccessGrant>> {
        self.live_access_token(jti, now).await
    }

    async fn revoke_access_token(
        &self,
        tenant: TenantId,
        jti: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        self.retrying(|| self.revoke_access_token_row(tenant, jti, now))
            .await
    }

    async fn forget_access_tokens(&self, before: Millis) -> StoreResult<u64> {
        self.retrying(|| self.delete_access_tokens_before(before))
            .await
    }
}
