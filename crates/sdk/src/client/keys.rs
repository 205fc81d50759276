//! The key calls of [`Client`]: its signing key, and the `/keys` and
//! `/ops/signatures` endpoints (`signing.rs` says what signing is).

use reqwest::Method;

use super::Client;
use crate::Error;
use crate::call::Call;
use crate::proto::{RegisterKey, SetSignaturePolicy, SignatureOverview, SigningKeyView};
use crate::signing::{PublicKey, SigningKey};

impl Client {
    /// The thumbprint (`keyid`) of the key this client signs with, if any.
    pub fn signing_key_id(&self) -> Option<String> {
        self.inner.signer.current().map(|h| h.jkt().to_owned())
    }

    /// Signs from now on with `key` (or nothing): for a key loaded after the client
    /// was built. The clients derived from this one change with it.
    pub fn use_signing_key(&self, key: Option<SigningKey>) {
        self.inner.signer.set(key);
    }

    /// `POST /keys`: binds `key` to this client's credential. From then on the
    /// server refuses the credential's unsigned requests, so call
    /// [`use_signing_key`](Self::use_signing_key) with the private half first (this
    /// request is signed with it when the credential already has a key: rotation).
    pub async fn register_key(&self, key: &PublicKey) -> Result<SigningKeyView, Error> {
        let url = self.api_url(&["keys"])?;
        let jwk = serde_json::to_value(key.to_jwk())
            .map_err(|e| Error::InvalidInput(format!("the key cannot be a JWK: {e}")))?;
        self.fetch(Call::new(Method::POST, url).json(&RegisterKey { jwk })?)
            .await
    }

    /// `GET /keys`: the live keys of this client's credential, newest first.
    pub async fn keys(&self) -> Result<Vec<SigningKeyView>, Error> {
        self.fetch(Call::get(self.api_url(&["keys"])?)).await
    }

    /// `DELETE /keys/{jkt}`: revokes a key of this client's credential.
    pub async fn revoke_key(&self, jkt: &str) -> Result<(), Error> {
        let url = self.api_url(&["keys", jkt])?;
        self.send(Call::new(Method::DELETE, url)).await.map(drop)
    }

    /// Replaces the key this client signs with, while it runs: a new key pair is
    /// registered by a request signed with the current key, a login's access token
    /// is renewed (so it is bound to the new key), the client signs with the new key
    /// from then on, and the old key is revoked. Returns the new key, for the caller
    /// to keep (the CLI saves it in the keyring). A client without a key gets its
    /// first one this way.
    pub async fn rotate_key(&self) -> Result<SigningKey, Error> {
        let old = self.signing_key_id();
        let new = SigningKey::generate();
        self.register_key(&new.public_key()).await?;
        self.use_signing_key(Some(new.clone()));
        if let Some(session) = &self.inner.session {
            // A login's new access tokens are bound to its newest key. A request
            // between the two lines above and this one is refused (the old token with
            // the new key) and retried after a renewal, as any 401 of a login is.
            session.renew_now(&self.inner.http).await?;
        }
        if let Some(old) = old
            && old != new.public_key().thumbprint()
        {
            self.revoke_key(&old).await?;
        }
        Ok(new)
    }

    /// `GET /ops/signatures` (operators): the tenant's signature policy and every
    /// agent's keys.
    pub async fn signatures(&self) -> Result<SignatureOverview, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "signatures"])?))
            .await
    }

    /// `PUT /ops/signatures` (operators): sets the tenant's policy for agent
    /// credentials without a key: `off`, `optional` or `required`.
    pub async fn set_signature_policy(&self, policy: &str) -> Result<SignatureOverview, Error> {
        let url = self.api_url(&["ops", "signatures"])?;
        let body = SetSignaturePolicy {
            policy: policy.to_owned(),
        };
        self.fetch(Call::new(Method::PUT, url).json(&body)?).await
    }
}
