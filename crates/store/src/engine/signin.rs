//! Authorization codes, once for every backend. What must hold between rows:
//!
//! - a code is redeemed once: the redemption locks its row, marks it used and
//!   makes the sign-in's credential and first tokens in one transaction, so two
//!   token requests racing with one code cannot both get tokens;
//! - every attempt spends it (a wrong verifier too: a stolen code gets one guess,
//!   RFC 7636 §1), and a second redemption of a code that worked revokes the
//!   sign-in it made (RFC 6749 §4.1.2).

use super::area::store_area;
use super::audit::{self, AuditStatements};
use super::directory::NewToken;
use super::identity::{IdentityStatements, end_family, grant_of, record_issue};
use super::lineage::LineageStatements;
use super::trim::TrimStatements;
use crate::clock::Millis;
use crate::pkce;
use crate::*;
use async_trait::async_trait;

/// A code's row, as its redemption reads it.
#[derive(Debug, Clone)]
pub(crate) struct CodeRow {
    pub(crate) tenant: TenantId,
    pub(crate) client_id: String,
    pub(crate) redirect_uri: String,
    pub(crate) code_challenge: String,
    pub(crate) scopes: Vec<String>,
    pub(crate) expires_at: Millis,
    pub(crate) used_at: Option<Millis>,
    pub(crate) family_hash: Option<Vec<u8>>,
    /// The consenting credential (none for a code made before it was kept).
    pub(crate) parent_hash: Option<Vec<u8>>,
}

/// The statements of authorization codes (`store/statements/signin.rs`).
#[async_trait]
pub(crate) trait SignInStatements: IdentityStatements {
    async fn insert_code_row(
        &self,
        tx: &mut Self::Tx,
        code: &NewAuthorizationCode<'_>,
    ) -> StoreResult<()>;
    /// The code's row, locked.
    async fn code_for_update(&self, tx: &mut Self::Tx, hash: &[u8])
    -> StoreResult<Option<CodeRow>>;
    /// Marks the code used (with the sign-in it made), unless it was; whether it
    /// was not.
    async fn mark_code_used(
        &self,
        tx: &mut Self::Tx,
        hash: &[u8],
        now: Millis,
        family_hash: Option<&[u8]>,
    ) -> StoreResult<bool>;
}

/// The label of a sign-in's credential in the tenant's token list.
fn label(client_id: &str) -> String {
    format!("sign-in: {client_id}")
}

async fn redeem<D: SignInStatements + LineageStatements>(
    d: &D,
    r: &Redemption<'_>,
    now: Millis,
    issue: &Issue<'_>,
) -> StoreResult<Redeemed> {
    let mut tx = d.begin_write().await?;
    let Some(row) = d.code_for_update(&mut tx, r.code_hash).await? else {
        return Ok(Redeemed::Unknown);
    };
    if row.used_at.is_some() {
        if let Some(family) = &row.family_hash {
            end_family(d, &mut tx, family, now).await?;
            d.commit(tx, &[]).await?;
        }
        return Ok(Redeemed::Reused);
    }
    let fits = row.client_id == r.client_id
        && row.redirect_uri == r.redirect_uri
        && pkce::verifies(&row.code_challenge, r.code_verifier);
    if now >= row.expires_at || !fits {
        // Spent either way.
        if d.mark_code_used(&mut tx, r.code_hash, now, None).await? {
            d.commit(tx, &[]).await?;
        }
        return Ok(if fits {
            Redeemed::Expired
        } else {
            Redeemed::Mismatch
        });
    }
    if !d
        .mark_code_used(&mut tx, r.code_hash, now, Some(r.family_hash))
        .await?
    {
        return Ok(Redeemed::Reused);
    }
    d.insert_token_row(
        &mut tx,
        &NewToken {
            hash: r.family_hash,
            tenant: row.tenant,
            agent: None,
            scopes: &row.scopes,
            label: &label(&row.client_id),
            now,
            // The consenting credential: revoking it ends the sign-in.
            parent: row.parent_hash.as_deref(),
        },
    )
    .await?;
    record_issue(d, &mut tx, r.family_hash, row.tenant, issue, now).await?;
    d.commit(tx, &[]).await?;
    Ok(match grant_of(d, r.family_hash).await? {
        Some(grant) => Redeemed::Issued(grant),
        // Revoked in the moment since (by an operator, or a reuse of this code).
        None => Redeemed::Reused,
    })
}

store_area! {
    pub trait SignInStore for Engine<
        D: SignInStatements + AuditStatements + LineageStatements + TrimStatements,
    > {
        /// Stores the code of an operator's consent, with its audit row.
        async fn insert_authorization_code(
            &self,
            code: &NewAuthorizationCode<'_>,
            note: &AuditNote,
        ) -> StoreResult<()> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.insert_code_row(&mut tx, code).await?;
                audit::write(
                    d,
                    &mut tx,
                    code.tenant,
                    note,
                    "signin_consented",
                    1,
                    code.created_at,
                )
                .await?;
                d.commit(tx, &[]).await
            })
            .await
        }

        /// Redeems a code: once, by the client and redirect URI it was made for, with
        /// the verifier of its challenge, before it expires. Any attempt spends it.
        async fn redeem_authorization_code(
            &self,
            redemption: &Redemption<'_>,
            now: Millis,
            issue: &Issue<'_>,
        ) -> StoreResult<Redeemed> {
            self.0
                .retrying(|| redeem(&self.0, redemption, now, issue))
                .await
        }

        /// Forgets codes that expired before `before`; how many.
        async fn forget_authorization_codes(&self, before: Millis) -> StoreResult<u64> {
            super::trim::trim(&self.0, &super::trim::AUTHORIZATION_CODES, before).await
        }
    }
}
