//! Access tokens, once for every backend: signing keys, issued tokens, device
//! login requests (RFC 8628) and refresh tokens. Which key signs and when one goes
//! is decided in `oauth/keys.rs`; here, what must hold between rows:
//!
//! - a device request is decided once, by an operator of its tenant, and its
//!   tokens are taken once (a guarded status change in the transaction that
//!   records them);
//! - a refresh token is used once: its use and its successor commit together, and
//!   a second use revokes its whole family (the login's `tokens` row), which ends
//!   every access token of the login (their lookup needs a live parent).

use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::directory::{DirectoryStatements, NewToken};
use super::lineage::{self, LineageStatements};
use super::trim::{self, TrimStatements};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;

/// Device requests are kept this long after they expired (for the operators'
/// list, then forgotten).
const DEVICE_FORGET_MS: Millis = 24 * 3600 * 1000;

/// RFC 8628 §3.5: `slow_down` adds 5 seconds to the interval.
const SLOW_DOWN_MS: Millis = 5_000;

/// A device request row as the token endpoint's poll reads it.
#[derive(Debug, Clone)]
pub(crate) struct DeviceRow {
    pub(crate) client_id: String,
    pub(crate) expires_at: Millis,
    pub(crate) interval_ms: Millis,
    pub(crate) polled_at: Option<Millis>,
    pub(crate) status: String,
    pub(crate) family_hash: Option<Vec<u8>>,
}

/// The statements of access tokens (`store/statements/identity.rs`): in `tx`
/// where they take one, else alone on the read or the write pool.
/// A device request's move from one status to another (`set_device_status`):
/// who decided and when, and for which agent and login; a `None` keeps the
/// column's value.
pub(crate) struct DeviceStatus<'a> {
    pub(crate) from: &'a str,
    pub(crate) to: &'a str,
    pub(crate) decided: Option<(&'a str, Millis)>,
    pub(crate) agent: Option<AgentId>,
    pub(crate) family_hash: Option<&'a [u8]>,
}

#[async_trait]
pub(crate) trait IdentityStatements:
    DirectoryStatements + super::request_keys::RequestKeyStatements
{
    async fn signing_key_rows(&self) -> StoreResult<Vec<SigningKeyRow>>;
    async fn insert_signing_key_row(&self, key: &SigningKeyRow) -> StoreResult<()>;
    async fn delete_signing_key_row(&self, kid: &str) -> StoreResult<()>;
    async fn insert_access_token_row(
        &self,
        tx: &mut Self::Tx,
        token: &NewAccessToken<'_>,
    ) -> StoreResult<()>;
    async fn live_access_token(&self, jti: &str, now: Millis) -> StoreResult<Option<AccessGrant>>;
    async fn revoke_access_token_row(
        &self,
        tenant: TenantId,
        jti: &str,
        now: Millis,
    ) -> StoreResult<bool>;

    async fn insert_device_row(
        &self,
        tx: &mut Self::Tx,
        request: &NewDeviceRequest<'_>,
    ) -> StoreResult<bool>;
    async fn device_rows(
        &self,
        tenant: TenantId,
        now: Millis,
    ) -> StoreResult<Vec<DeviceRequestRow>>;
    /// `tenant`'s pending, unexpired request with `user_code`, locked: its device
    /// hash and the agent it asks for.
    async fn pending_device_for_update(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        user_code: &str,
        now: Millis,
    ) -> StoreResult<Option<(String, String)>>;
    async fn device_for_update(
        &self,
        tx: &mut Self::Tx,
        device_hash: &str,
    ) -> StoreResult<Option<DeviceRow>>;
    async fn device_by_code(
        &self,
        tx: &mut Self::Tx,
        user_code: &str,
    ) -> StoreResult<Option<DeviceRequestRow>>;
    async fn set_device_polled(
        &self,
        tx: &mut Self::Tx,
        device_hash: &str,
        polled_at: Millis,
        interval_ms: Millis,
    ) -> StoreResult<()>;
    /// Moves the request as `change` says; whether it was in `change.from`.
    async fn set_device_status(
        &self,
        tx: &mut Self::Tx,
        device_hash: &str,
        change: &DeviceStatus<'_>,
    ) -> StoreResult<bool>;

    /// The refresh token's row, locked.
    async fn refresh_for_update(
        &self,
        tx: &mut Self::Tx,
        hash: &[u8],
    ) -> StoreResult<Option<RefreshRow>>;
    async fn insert_refresh_row(
        &self,
        tx: &mut Self::Tx,
        hash: &[u8],
        family_hash: &[u8],
        now: Millis,
    ) -> StoreResult<()>;
    /// Marks it used, unless it was; whether it was not.
    async fn mark_refresh_used(
        &self,
        tx: &mut Self::Tx,
        hash: &[u8],
        now: Millis,
    ) -> StoreResult<bool>;
    /// The tenant of the family's `tokens` row and when it was made (the login's
    /// start), while it is live.
    async fn family_tenant(
        &self,
        tx: &mut Self::Tx,
        family_hash: &[u8],
    ) -> StoreResult<Option<(TenantId, Millis)>>;
}

/// A refresh token's row.
#[derive(Debug, Clone)]
pub(crate) struct RefreshRow {
    /// Its login's credential.
    pub(crate) family: Vec<u8>,
    pub(crate) used_at: Option<Millis>,
    /// When it was issued: the login's last use.
    pub(crate) created_at: Millis,
}

/// Ends the login `family` (its `tokens` row) and every credential it approved,
/// in `tx`; whether it was live.
pub(crate) async fn end_family<D: IdentityStatements + LineageStatements>(
    d: &D,
    tx: &mut D::Tx,
    family: &[u8],
    now: Millis,
) -> StoreResult<bool> {
    let Some((tenant, _)) = d.family_tenant(tx, family).await? else {
        return Ok(false);
    };
    Ok(lineage::revoke_tree(d, tx, tenant, &[family.to_vec()], now).await? > 0)
}

/// Records what a successful grant issues: the next refresh token of `family` and
/// the access token.
pub(crate) async fn record_issue<D: IdentityStatements>(
    d: &D,
    tx: &mut D::Tx,
    family: &[u8],
    tenant: TenantId,
    issue: &Issue<'_>,
    now: Millis,
) -> StoreResult<()> {
    d.insert_refresh_row(tx, issue.refresh_hash, family, now)
        .await?;
    if let Some(key) = &issue.key {
        d.insert_request_key_row(tx, tenant, family, key, now)
            .await?;
    }
    d.insert_access_token_row(
        tx,
        &NewAccessToken {
            jti: issue.jti,
            tenant,
            parent_hash: family,
            issued_at: now,
            expires_at: issue.expires_at,
        },
    )
    .await
}

/// The grant of a family, after the commit that issued its tokens; `None` when
/// the family was revoked in between (a reuse racing this use revokes it at once).
pub(crate) async fn grant_of<D: IdentityStatements>(
    d: &D,
    family: &[u8],
) -> StoreResult<Option<AccessGrant>> {
    Ok(d.live_token(family).await?.map(|record| AccessGrant {
        record,
        parent_hash: family.to_vec(),
    }))
}

async fn poll<D: IdentityStatements>(
    d: &D,
    device_hash: &str,
    client_id: &str,
    now: Millis,
    issue: &Issue<'_>,
) -> StoreResult<DevicePoll> {
    let mut tx = d.begin_write().await?;
    let Some(row) = d.device_for_update(&mut tx, device_hash).await? else {
        return Ok(DevicePoll::Unknown);
    };
    if row.client_id != client_id || row.status == "used" {
        return Ok(DevicePoll::Unknown);
    }
    if now >= row.expires_at {
        return Ok(DevicePoll::Expired);
    }
    let too_soon = row.polled_at.is_some_and(|at| now - at < row.interval_ms);
    let interval = row.interval_ms + if too_soon { SLOW_DOWN_MS } else { 0 };
    d.set_device_polled(&mut tx, device_hash, now, interval)
        .await?;
    let outcome = if too_soon {
        DevicePoll::SlowDown
    } else {
        match row.status.as_str() {
            "pending" => DevicePoll::Pending,
            "approved" => {
                let family = row.family_hash.clone().ok_or(StoreError::NotFound)?;
                let Some((tenant, _)) = d.family_tenant(&mut tx, &family).await? else {
                    // The login was revoked before its tokens were taken.
                    d.commit(tx, &[]).await?;
                    return Ok(DevicePoll::Denied);
                };
                let used = DeviceStatus {
                    from: "approved",
                    to: "used",
                    decided: None,
                    agent: None,
                    family_hash: None,
                };
                if !d.set_device_status(&mut tx, device_hash, &used).await? {
                    return Ok(DevicePoll::Unknown);
                }
                record_issue(d, &mut tx, &family, tenant, issue, now).await?;
                d.commit(tx, &[]).await?;
                return Ok(match grant_of(d, &family).await? {
                    Some(grant) => DevicePoll::Approved(grant),
                    None => DevicePoll::Denied,
                });
            }
            _ => DevicePoll::Denied,
        }
    };
    d.commit(tx, &[]).await?;
    Ok(outcome)
}

store_area! {
    pub trait IdentityStore for Engine<
        D: IdentityStatements + AuditStatements + LineageStatements + TrimStatements,
    > {
        /// Every stored signing key, oldest first.
        async fn signing_keys(&self) -> StoreResult<Vec<SigningKeyRow>> {
            self.0.signing_key_rows().await
        }

        async fn insert_signing_key(&self, key: &SigningKeyRow) -> StoreResult<()> {
            self.0.retrying(|| self.0.insert_signing_key_row(key)).await
        }

        /// Removes the signing key `kid` (one no token it signed can still be live with).
        async fn delete_signing_key(&self, kid: &str) -> StoreResult<()> {
            self.0.retrying(|| self.0.delete_signing_key_row(kid)).await
        }

        async fn insert_access_token(&self, token: &NewAccessToken<'_>) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.insert_access_token_row(&mut tx, token).await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// Who the access token `jti` acts for: its parent credential's record, while
        /// the token is unexpired at `now` and neither it nor its parent is revoked.
        async fn access_token(&self, jti: &str, now: Millis) -> StoreResult<Option<AccessGrant>> {
            self.0.live_access_token(jti, now).await
        }

        /// Revokes `tenant`'s access token `jti`; whether it was live.
        async fn revoke_access_token(
            &self,
            tenant: TenantId,
            jti: &str,
            now: Millis,
        ) -> StoreResult<bool> {
            self.0
                .retrying(|| self.0.revoke_access_token_row(tenant, jti, now))
                .await
        }

        /// Forgets the records of access tokens expired before `before`, and device
        /// requests expired a day before it; how many access tokens.
        async fn forget_access_tokens(&self, before: Millis) -> StoreResult<u64> {
            trim::trim(&self.0, &trim::DEVICE_REQUESTS, before - DEVICE_FORGET_MS).await?;
            trim::trim(&self.0, &trim::ACCESS_TOKENS, before).await
        }

        // --- device login (RFC 8628) and refresh tokens ---
        /// Stores a device request; `false` when its user code is taken (make another).
        async fn insert_device_request(&self, request: &NewDeviceRequest<'_>) -> StoreResult<bool> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                if !d.insert_device_row(&mut tx, request).await? {
                    return Ok(false);
                }
                d.commit(tx, &[]).await?;
                Ok(true)
            })
            .await
        }

        /// `tenant`'s device requests that have not expired at `now`, newest first.
        async fn device_requests(
            &self,
            tenant: TenantId,
            now: Millis,
        ) -> StoreResult<Vec<DeviceRequestRow>> {
            self.0.device_rows(tenant, now).await
        }

        /// Approves (`Some`) or denies `tenant`'s pending, unexpired request with this
        /// user code, once: `None` when there is none (another tenant's, decided
        /// already, expired, unknown). An approval makes the agent when it does not
        /// exist, and the login's credential, in the same transaction.
        async fn decide_device_request(
            &self,
            tenant: TenantId,
            user_code: &str,
            approval: Option<&Approval<'_>>,
            note: &AuditNote,
            now: Millis,
        ) -> StoreResult<Option<DeviceRequestRow>> {
            let d = &self.0;
            d.retrying(|| async {
                let decided_by = note.actor.as_str();
                let mut tx = d.begin_write().await?;
                let Some((device_hash, asked)) = d
                    .pending_device_for_update(&mut tx, tenant, user_code, now)
                    .await?
                else {
                    return Ok(None);
                };
                let (to, agent_id, family) = match approval {
                    None => ("denied", None, None),
                    Some(a) => {
                        let name = a.agent_name.unwrap_or(&asked);
                        // Agents are never deleted: one read now is there at commit, and one
                        // created meanwhile meets the unique index below.
                        let agent = match d.agent_by_key(tenant, name).await? {
                            Some(agent) => agent,
                            None => {
                                let agent = AgentRecord::created(AgentId::new(), tenant, name, now);
                                if !d.insert_agent(&mut tx, &agent).await? {
                                    return Err(StoreError::Conflict(format!(
                                        "an agent named {name:?} was created meanwhile; approve again"
                                    )));
                                }
                                agent
                            }
                        };
                        let (scopes, _) = agent.token_grant(a.scopes);
                        let label = format!("device login: {}", agent.name);
                        d.insert_token_row(
                            &mut tx,
                            &NewToken {
                                hash: a.family_hash,
                                tenant,
                                agent: Some(agent.id),
                                scopes: &scopes,
                                label: &label,
                                now,
                                // The approving credential: revoking it ends this login.
                                parent: Some(a.parent),
                            },
                        )
                        .await?;
                        ("approved", Some(agent.id), Some(a.family_hash))
                    }
                };
                let change = DeviceStatus {
                    from: "pending",
                    to,
                    decided: Some((decided_by, now)),
                    agent: agent_id,
                    family_hash: family,
                };
                d.set_device_status(&mut tx, &device_hash, &change).await?;
                let row = d.device_by_code(&mut tx, user_code).await?;
                let detail = row.as_ref().map(|r| format!("agent:{}", r.agent_name));
                let note = AuditNote {
                    detail,
                    ..note.clone()
                };
                let action = match approval {
                    Some(_) => "device_approved",
                    None => "device_denied",
                };
                audit::write(d, &mut tx, tenant, &note, action, 1, now).await?;
                d.commit(tx, &[]).await?;
                Ok(row)
            })
            .await
        }

        /// The token endpoint's poll with a device code by `client_id`.
        async fn poll_device_request(
            &self,
            device_hash: &str,
            client_id: &str,
            now: Millis,
            issue: &Issue<'_>,
        ) -> StoreResult<DevicePoll> {
            self.0
                .retrying(|| poll(&self.0, device_hash, client_id, now, issue))
                .await
        }

        /// Uses the refresh token with this hash: once, within the login's lifetimes.
        async fn refresh(
            &self,
            hash: &[u8],
            now: Millis,
            lifetimes: RefreshLifetimes,
            issue: &Issue<'_>,
        ) -> StoreResult<Refreshed> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                let Some(row) = d.refresh_for_update(&mut tx, hash).await? else {
                    return Ok(Refreshed::Unknown);
                };
                let family = row.family;
                if row.used_at.is_some() || !d.mark_refresh_used(&mut tx, hash, now).await? {
                    // Used before: whoever holds it now may have stolen it. End the login.
                    let revoked = end_family(d, &mut tx, &family, now).await?;
                    d.commit(tx, &[]).await?;
                    return Ok(if revoked {
                        Refreshed::Reused
                    } else {
                        Refreshed::Revoked
                    });
                }
                let Some((tenant, started)) = d.family_tenant(&mut tx, &family).await? else {
                    return Ok(Refreshed::Revoked);
                };
                // A login lives at most its absolute lifetime from its start, and ends when it
                // went unused (no refresh) for its idle lifetime: ended here, on the server's
                // clock, whichever backend.
                if let Some(why) = lifetimes.ended(started, row.created_at, now) {
                    end_family(d, &mut tx, &family, now).await?;
                    d.commit(tx, &[]).await?;
                    return Ok(Refreshed::Expired(why));
                }
                record_issue(d, &mut tx, &family, tenant, issue, now).await?;
                d.commit(tx, &[]).await?;
                Ok(match grant_of(d, &family).await? {
                    Some(grant) => Refreshed::Rotated(grant),
                    None => Refreshed::Revoked,
                })
            })
            .await
        }

        /// Revokes the login (family) the refresh token with this hash belongs to;
        /// whether it was live.
        async fn revoke_refresh_family(&self, hash: &[u8], now: Millis) -> StoreResult<bool> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                let Some(row) = d.refresh_for_update(&mut tx, hash).await? else {
                    return Ok(false);
                };
                let revoked = end_family(d, &mut tx, &row.family, now).await?;
                d.commit(tx, &[]).await?;
                Ok(revoked)
            })
            .await
        }
    }
}
