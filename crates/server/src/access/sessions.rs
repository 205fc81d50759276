//! Console sessions and one-time login tickets: grants made from an operator
//! token, never with more scopes than the token, ended with it (its revocation
//! ends them). Only a grant's SHA-256 is stored, with its expiry; session ids,
//! tickets and tokens never reach logs, errors or audit rows (I11). `http/session.rs`
//! puts a session in its cookie and takes a ticket from its link.

use super::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE, generate_token, hash_token};
use crate::clock::{Millis, to_timestamp};
use crate::error::{ApiError, ApiResult};
use crate::store::{GrantKind, NewGrant, Store};
use std::time::Duration;
use switchboard_proto::{ErrorCode, LoginLink, SessionInfo, TenantId};

/// How long a console session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// How long a login link's ticket may wait to be redeemed (once).
pub const TICKET_TTL: Duration = Duration::from_secs(120);

fn millis(d: Duration) -> Millis {
    d.as_millis() as Millis
}

/// The sessions of one store, at one moment (`now`, from the server's clock).
pub struct Sessions<'a> {
    store: &'a dyn Store,
    now: Millis,
}

impl<'a> Sessions<'a> {
    pub fn new(store: &'a dyn Store, now: Millis) -> Self {
        Self { store, now }
    }

    /// A new session of `tenant` under the token hashed `token_hash` with `scopes`:
    /// its id (for the cookie) and expiry.
    async fn start(
        &self,
        tenant: TenantId,
        token_hash: &[u8],
        scopes: &[String],
    ) -> ApiResult<(String, Millis)> {
        let session = generate_token("sb_ses_");
        let expires_at = self.now + millis(SESSION_TTL);
        self.store
            .insert_grant(
                &NewGrant {
                    hash: &hash_token(&session),
                    kind: GrantKind::Session,
                    tenant,
                    token_hash,
                    scopes,
                    expires_at,
                },
                None,
                self.now,
            )
            .await?;
        Ok((session, expires_at))
    }

    /// A session from an operator `token` pasted into the login page: its id and
    /// what it is. 401 for an unknown or revoked token, 403 for one that is not an
    /// operator's.
    pub async fn from_token(&self, token: &str) -> ApiResult<(String, SessionInfo)> {
        let token = token.trim();
        let token_hash = hash_token(token);
        let record = match self.store.token(&token_hash).await? {
            Some(r) if !token.is_empty() => r,
            _ => {
                return Err(ApiError::new(
                    ErrorCode::Unauthorized,
                    "that token is unknown or revoked; paste the operator token (the \
                     operator-token file next to the database, or what `switchboard serve` wrote)",
                ));
            }
        };
        if record.agent_id.is_some() || !record.scopes.iter().any(|s| s == SCOPE_OPS_READ) {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                "this is not an operator token (it lacks the \"ops:read\" scope); the console \
                 needs an operator token",
            ));
        }
        let (session, expires_at) = self
            .start(record.tenant_id, &token_hash, &record.scopes)
            .await?;
        tracing::info!("console session started");
        let info = SessionInfo {
            read_only: !record.scopes.iter().any(|s| s == SCOPE_OPS_WRITE),
            scopes: record.scopes,
            via: "cookie".to_owned(),
            expires_at: Some(to_timestamp(expires_at)),
        };
        Ok((session, info))
    }

    /// Ends the session with id `session`.
    pub async fn end(&self, session: &str) -> ApiResult<()> {
        self.store.delete_grant(&hash_token(session)).await?;
        tracing::info!("console session ended");
        Ok(())
    }

    /// A one-time login link for `principal` with `scopes` (at most its own).
    pub async fn mint_ticket(
        &self,
        principal: &Principal,
        scopes: &[String],
    ) -> ApiResult<LoginLink> {
        let ticket = generate_token("sb_tk_");
        let expires_at = self.now + millis(TICKET_TTL);
        self.store
            .insert_grant(
                &NewGrant {
                    hash: &hash_token(&ticket),
                    kind: GrantKind::Ticket,
                    tenant: principal.tenant_id,
                    token_hash: &principal.token_hash,
                    scopes,
                    expires_at,
                },
                Some(&principal.note("console").detail(scopes.join(" "))),
                self.now,
            )
            .await?;
        tracing::info!(
            read_only = !scopes.iter().any(|s| s == SCOPE_OPS_WRITE),
            "console login link minted"
        );
        Ok(LoginLink {
            path: format!("/login?ticket={ticket}"),
            expires_at: to_timestamp(expires_at),
        })
    }

    /// A login link from the operator `token` itself (the server's start, the desktop
    /// app): what `switchboard serve` prints.
    pub async fn login_link(&self, token: &str, read_only: bool) -> ApiResult<LoginLink> {
        let token_hash = hash_token(token);
        let record = self.store.token(&token_hash).await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthorized,
                "the operator token is unknown or revoked",
            )
        })?;
        let principal = Principal::of_token(record, token_hash);
        let scopes = link_scopes(&principal, read_only);
        self.mint_ticket(&principal, &scopes).await
    }

    /// Redeems `ticket` (once): a new session's id.
    pub async fn redeem(&self, ticket: &str) -> ApiResult<String> {
        let grant = self
            .store
            .take_grant(&hash_token(ticket.trim()), GrantKind::Ticket, self.now)
            .await?
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Unauthorized,
                    "this login link was already used or has expired (links work once, for two \
                     minutes); ask for a new one, or log in with the operator token",
                )
            })?;
        let (session, _) = self
            .start(
                grant.record.tenant_id,
                &grant.token_hash,
                &grant.record.scopes,
            )
            .await?;
        tracing::info!("console login link redeemed");
        Ok(session)
    }
}

/// What `principal` is, as the console asks it.
pub fn info(principal: &Principal) -> SessionInfo {
    SessionInfo {
        read_only: !principal.has(SCOPE_OPS_WRITE),
        scopes: principal.scopes.clone(),
        via: if principal.session.is_some() {
            "cookie"
        } else {
            "bearer"
        }
        .to_owned(),
        expires_at: principal
            .session
            .as_ref()
            .map(|s| to_timestamp(s.expires_at)),
    }
}

/// The scopes a login link asked `read_only` (or not) carries for `principal`.
pub fn link_scopes(principal: &Principal, read_only: bool) -> Vec<String> {
    if read_only {
        vec![SCOPE_OPS_READ.to_owned()]
    } else {
        principal.scopes.clone()
    }
}
