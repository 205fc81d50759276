//! Request-signing keys and the tenant's signature policy as use cases (issue 39).
//! An agent registers, lists and revokes the keys of the credential it calls with;
//! operators see every agent's keys and set the policy. When a request must be
//! signed, and with which key, is `http/signatures.rs`.
//!
//! A key changed on this instance is seen from the next request here (the cached
//! keys are forgotten) and within the lookup cache's TTL on every other.

use super::AppState;
use crate::access::Principal;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
pub use crate::store::{NewRequestKey, RequestKey, SignaturePolicy};
use std::collections::BTreeMap;
use switchboard_proto::*;
use switchboard_webhook::agent::{Jwk, PublicKey};

/// The public key of a JWK given as JSON text (the token endpoint's
/// `signing_key`), or what is wrong with it.
pub fn parse_jwk(text: &str) -> Result<PublicKey, String> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("signing_key is not JSON ({e}); {EXPECTED}"))?;
    jwk_key(&value)
}

/// What a presented key must look like.
const EXPECTED: &str =
    "send the public key as a JWK: {\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"<base64url>\"}";

fn jwk_key(value: &serde_json::Value) -> Result<PublicKey, String> {
    if value.get("d").is_some() {
        return Err(
            "the JWK holds a private key (\"d\"): send the public key only, and keep the \
             private key on the agent's machine"
                .to_owned(),
        );
    }
    let jwk: Jwk = serde_json::from_value(value.clone())
        .map_err(|e| format!("the JWK is incomplete ({e}); {EXPECTED}"))?;
    PublicKey::from_jwk(&jwk).map_err(|e| format!("{e}; {EXPECTED}"))
}

fn view(key: &RequestKey) -> SigningKeyView {
    SigningKeyView {
        jkt: key.jkt.clone(),
        binds_credential: key.binds_parent,
        created_at: to_timestamp(key.created_at),
    }
}

/// The agent the principal works as, or 403: keys belong to an agent's own
/// credential (an operator's calls are not signed; a read-only token changes
/// nothing).
fn agent_of(principal: &Principal) -> ApiResult<()> {
    principal.refuse_read_only()?;
    match principal.working_agent() {
        Some(_) => Ok(()),
        None => Err(ApiError::new(
            ErrorCode::Forbidden,
            "signing keys belong to an agent's credential; call with the agent's token",
        )),
    }
}

/// The audit note of a change to the key `jkt` of the principal's credential.
fn key_note(principal: &Principal, jkt: &str) -> crate::store::AuditNote {
    principal
        .note(format!(
            "agent:{}",
            principal.agent_name.as_deref().unwrap_or_default()
        ))
        .detail(format!("key:{jkt}"))
}

/// Binds the key to the credential the principal calls with (audited): `true` when
/// it is new, `false` when the credential has it already (live). A key it had and
/// revoked is refused: make a new one.
pub async fn register(
    state: &AppState,
    principal: &Principal,
    body: &RegisterKey,
) -> ApiResult<(bool, SigningKeyView)> {
    agent_of(principal)?;
    let public = jwk_key(&body.jwk).map_err(ApiError::unprocessable)?;
    let jkt = public.thumbprint();
    let now = state.now();
    let key = NewRequestKey {
        jkt: &jkt,
        public_key: public.as_bytes(),
        binds_parent: true,
    };
    let note = key_note(principal, &jkt);
    let created = state
        .store
        .bind_request_key(
            principal.tenant_id,
            &principal.token_hash,
            &key,
            Some(&note),
            now,
        )
        .await?;
    if created {
        state.lookups.forget_signing();
        tracing::info!(agent = principal.agent_name.as_deref().unwrap_or("-"), jkt = %jkt, "request-signing key registered");
        let view = SigningKeyView {
            jkt,
            binds_credential: true,
            created_at: to_timestamp(now),
        };
        return Ok((true, view));
    }
    // Bound before: live (its view), or revoked (never again).
    let keys = state.store.request_keys(&principal.token_hash).await?;
    match keys.iter().find(|k| k.jkt == jkt) {
        Some(stored) => Ok((false, view(stored))),
        None => Err(ApiError::new(
            ErrorCode::Conflict,
            format!(
                "the key {jkt:?} was registered for this credential before and revoked; a \
                 revoked key is never bound again: generate a new key pair"
            ),
        )),
    }
}

/// The live keys of the credential the principal calls with, newest first.
pub async fn own(state: &AppState, principal: &Principal) -> ApiResult<Vec<SigningKeyView>> {
    agent_of(principal)?;
    let keys = state.store.request_keys(&principal.token_hash).await?;
    Ok(keys.iter().map(view).collect())
}

/// Revokes the key `jkt` of the credential the principal calls with (audited).
/// Revoking the key a request was signed with is allowed: it is the last request
/// that key signs.
pub async fn revoke(state: &AppState, principal: &Principal, jkt: &str) -> ApiResult<()> {
    agent_of(principal)?;
    let note = key_note(principal, jkt);
    let revoked = state
        .store
        .revoke_request_key(
            principal.tenant_id,
            &principal.token_hash,
            jkt,
            &note,
            state.now(),
        )
        .await?;
    state.lookups.forget_signing();
    if revoked {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "the key {jkt:?} of this credential"
        )))
    }
}

/// The tenant's policy and every agent's keys (agents without one listed too).
pub async fn overview(state: &AppState, principal: &Principal) -> ApiResult<SignatureOverview> {
    let tenant = principal.tenant_id;
    let policy = state.store.signature_policy(tenant).await?;
    // By name (unique in a tenant): the order the overview lists them in.
    let mut agents: BTreeMap<String, AgentKeys> = state
        .store
        .agents(tenant)
        .await?
        .into_iter()
        .map(|a| {
            let keys = AgentKeys {
                agent_id: a.id,
                name: a.name.clone(),
                keys: Vec::new(),
            };
            (a.name, keys)
        })
        .collect();
    for row in state.store.agent_keys(tenant).await? {
        if let Some(agent) = agents.get_mut(&row.agent_name) {
            agent.keys.push(AgentKey {
                key: SigningKeyView {
                    jkt: row.jkt,
                    binds_credential: row.binds_parent,
                    created_at: to_timestamp(row.created_at),
                },
                credential: row.credential_label,
            });
        }
    }
    let agents = agents.into_values().collect();
    Ok(SignatureOverview {
        policy: policy.as_str().to_owned(),
        agents,
    })
}

/// Sets the tenant's policy (audited), and answers the new overview.
pub async fn set_policy(
    state: &AppState,
    principal: &Principal,
    body: &SetSignaturePolicy,
) -> ApiResult<SignatureOverview> {
    let policy = SignaturePolicy::parse(&body.policy).ok_or_else(|| {
        ApiError::unprocessable(format!(
            "policy must be \"off\", \"optional\" or \"required\", got {:?}",
            body.policy
        ))
    })?;
    let note = principal.note("signatures");
    state
        .store
        .set_signature_policy(principal.tenant_id, policy, &note, state.now())
        .await?;
    state.lookups.forget_signing();
    tracing::info!(policy = %policy, "signature policy set");
    overview(state, principal).await
}

/// The key a login's new access tokens are bound to (`cnf.jkt`): the newest key
/// bound to the credential `parent_hash`, if it has one.
pub async fn login_key(state: &AppState, parent_hash: &[u8]) -> ApiResult<Option<String>> {
    let keys = state.store.request_keys(parent_hash).await?;
    Ok(keys.into_iter().find(|k| k.binds_parent).map(|k| k.jkt))
}

/// Binds a key presented at a token exchange to the subject `parent_hash`, for the
/// one access token that exchange makes (the subject itself need not sign).
pub async fn bind_exchange_key(
    state: &AppState,
    tenant: TenantId,
    parent_hash: &[u8],
    key: &NewRequestKey<'_>,
) -> ApiResult<()> {
    state
        .store
        .bind_request_key(tenant, parent_hash, key, None, state.now())
        .await?;
    state.lookups.forget_signing();
    Ok(())
}

/// Whether a verified signature's `(keyid, nonce)` is used for the first time
/// (`access/replays.rs`); kept until `expires_at` either way.
pub async fn first_use(
    state: &AppState,
    keyid: &str,
    nonce: &str,
    expires_at: crate::clock::Millis,
) -> ApiResult<bool> {
    Ok(state
        .replays
        .first_use(state.store.as_ref(), keyid, nonce, expires_at)
        .await?)
}
