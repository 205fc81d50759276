//! Signed agent requests, once for every backend (issue 39): the keys bound to
//! credentials, the tenant's signature policy and the replay cache. What must hold
//! between rows:
//!
//! - a key hangs under one credential (`tokens` row) and is honoured only while
//!   that credential is live: the server reads a credential's keys with its token
//!   lookup's parent hash, and a revoked credential never gets that far;
//! - registering and revoking a key, and changing the policy, write their audit
//!   row in the same transaction;
//! - a `(keyid, nonce)` is used once across every instance: the replay cache's
//!   primary key refuses the second insert, wherever it comes from.

use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::trim::{self, TrimStatements};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;

/// The statements of signed requests (`store/statements/request_keys.rs`).
#[async_trait]
pub(crate) trait RequestKeyStatements: super::Driver {
    async fn request_key_rows(&self, parent_hash: &[u8]) -> StoreResult<Vec<RequestKey>>;
    async fn insert_request_key_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        parent_hash: &[u8],
        key: &NewRequestKey<'_>,
        now: Millis,
    ) -> StoreResult<bool>;
    async fn revoke_request_key_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        parent_hash: &[u8],
        jkt: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    async fn agent_key_rows(&self, tenant: TenantId) -> StoreResult<Vec<AgentKeyRow>>;
    async fn signature_policy_row(&self, tenant: TenantId) -> StoreResult<Option<String>>;
    async fn set_signature_policy_row(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        policy: &str,
    ) -> StoreResult<()>;
    async fn insert_nonce_row(
        &self,
        tx: &mut Self::Tx,
        keyid: &str,
        nonce: &str,
        expires_at: Millis,
    ) -> StoreResult<bool>;
    /// Keeps `rows` (a replay cache's nonces saved behind), each once.
    async fn insert_nonce_rows(&self, tx: &mut Self::Tx, rows: &[UsedNonce]) -> StoreResult<()>;
    async fn live_nonce_rows(&self, now: Millis) -> StoreResult<Vec<UsedNonce>>;
}

store_area! {
    pub trait RequestKeyStore for Engine<D: RequestKeyStatements + AuditStatements + TrimStatements> {
        /// The live keys of the credential `parent_hash`, newest first.
        async fn request_keys(&self, parent_hash: &[u8]) -> StoreResult<Vec<RequestKey>> {
            self.0.request_key_rows(parent_hash).await
        }

        /// Binds `key` to `tenant`'s credential `parent_hash`, with the audit row
        /// (`request_key_registered`) when `note` is given: `false` when the
        /// credential had this key already (live or revoked).
        async fn bind_request_key(
            &self,
            tenant: TenantId,
            parent_hash: &[u8],
            key: &NewRequestKey<'_>,
            note: Option<&AuditNote>,
            now: Millis,
        ) -> StoreResult<bool> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d
                    .insert_request_key_row(&mut tx, tenant, parent_hash, key, now)
                    .await?
                {
                    return Ok(false);
                }
                if let Some(note) = note {
                    audit::write(d, &mut tx, tenant, note, "request_key_registered", 1, now)
                        .await?;
                }
                d.commit(tx, &[]).await?;
                Ok(true)
            })
            .await
        }

        /// Revokes the key `jkt` of `tenant`'s credential `parent_hash`, with the audit
        /// row (`request_key_revoked`); whether it was live.
        async fn revoke_request_key(
            &self,
            tenant: TenantId,
            parent_hash: &[u8],
            jkt: &str,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<bool> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d
                    .revoke_request_key_row(&mut tx, tenant, parent_hash, jkt, now)
                    .await?
                {
                    return Ok(false);
                }
                audit::write(d, &mut tx, tenant, note, "request_key_revoked", 1, now).await?;
                d.commit(tx, &[]).await?;
                Ok(true)
            })
            .await
        }

        /// The live keys of `tenant`'s agents' live credentials, by agent name.
        async fn agent_keys(&self, tenant: TenantId) -> StoreResult<Vec<AgentKeyRow>> {
            self.0.agent_key_rows(tenant).await
        }

        /// `tenant`'s signature policy (the default for an unknown tenant).
        async fn signature_policy(&self, tenant: TenantId) -> StoreResult<SignaturePolicy> {
            let stored = self.0.signature_policy_row(tenant).await?;
            Ok(stored
                .as_deref()
                .and_then(SignaturePolicy::parse)
                .unwrap_or_default())
        }

        /// Sets `tenant`'s signature policy, with the audit row
        /// (`signature_policy_set`, the new policy as its detail).
        async fn set_signature_policy(
            &self,
            tenant: TenantId,
            policy: SignaturePolicy,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.set_signature_policy_row(&mut tx, tenant, policy.as_str())
                    .await?;
                let note = AuditNote {
                    detail: Some(policy.as_str().to_owned()),
                    ..note.clone()
                };
                audit::write(d, &mut tx, tenant, &note, "signature_policy_set", 1, now).await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// Records that a verified signature used `(keyid, nonce)`, until
        /// `expires_at`: `false` when it was used before (a replay), on any instance.
        /// Committed with `commit_later`: on a database one process owns (SQLite) it
        /// joins the writer's next group commit, usually the request's own business
        /// change, instead of a commit (an fsync) of its own; the writer's one
        /// transaction at a time already makes a second insert see the first.
        async fn use_nonce(&self, keyid: &str, nonce: &str, expires_at: Millis) -> StoreResult<bool> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d.insert_nonce_row(&mut tx, keyid, nonce, expires_at).await? {
                    return Ok(false);
                }
                d.commit_later(tx).await?;
                Ok(true)
            })
            .await
        }

        /// Keeps `nonces` (used already: a process that owns its database checks them
        /// in memory and saves them behind), in one transaction; one kept before is
        /// left as it is.
        async fn save_nonces(&self, nonces: &[UsedNonce]) -> StoreResult<()> {
            if nonces.is_empty() {
                return Ok(());
            }
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.insert_nonce_rows(&mut tx, nonces).await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// The nonces kept whose signatures have not expired at `now`.
        async fn live_nonces(&self, now: Millis) -> StoreResult<Vec<UsedNonce>> {
            self.0.live_nonce_rows(now).await
        }

        /// Forgets the nonces whose signatures expired before `before`; how many.
        async fn forget_nonces(&self, before: Millis) -> StoreResult<u64> {
            trim::trim(&self.0, &trim::SIGNATURE_NONCES, before).await
        }
    }
}
