//! Static credentials as use cases: the tenant's bearer tokens listed (without the
//! token: a public id derived from its hash), minted for scrapers, revoked one by
//! one or every one of an agent; agents deleted. A revoked token is refused at once
//! on this instance (its lookups are forgotten) and within the lookup cache's TTL
//! (`lookups.rs`) on every other; the console sessions made from it end with it.

use super::AppState;
use crate::access::{Principal, SCOPE_ADMIN, SCOPE_OPS_READ, generate_token, hash_token, token_id};
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::CredentialRow;
use switchboard_proto::*;

fn kind(row: &CredentialRow) -> &'static str {
    let has = |s: &str| row.scopes.iter().any(|x| x == s);
    if let Some(agent) = row.agent_id
        && !has(&crate::access::inbox_scope(agent))
        && has(&crate::access::read_scope(agent))
    {
        "agent-read"
    } else if row.agent_id.is_some() {
        "agent"
    } else if has(SCOPE_ADMIN) {
        "admin"
    } else if has(SCOPE_OPS_READ) {
        "operator"
    } else {
        "read-only"
    }
}

fn credential(row: CredentialRow) -> Credential {
    Credential {
        approved_by: row.parent_hash.as_deref().map(token_id),
        token_id: token_id(&row.hash),
        kind: kind(&row).to_owned(),
        label: row.label,
        agent_id: row.agent_id,
        agent_name: row.agent_name,
        scopes: row.scopes,
        created_at: to_timestamp(row.created_at),
        revoked_at: row.revoked_at.map(to_timestamp),
    }
}

/// The tenant's credentials.
pub async fn list(state: &AppState, tenant: TenantId) -> ApiResult<Vec<Credential>> {
    let rows = state.store.credentials(tenant).await?;
    Ok(rows.into_iter().map(credential).collect())
}

/// Revokes the token whose public id is `id` (and what was made from it).
pub async fn revoke(state: &AppState, principal: &Principal, id: &str) -> ApiResult<u64> {
    let rows = state.store.credentials(principal.tenant_id).await?;
    let Some(row) = rows.iter().find(|r| token_id(&r.hash) == id) else {
        return Err(ApiError::not_found("the token"));
    };
    let note = principal
        .note(format!("token:{id}"))
        .detail(row.label.clone());
    let revoked = state
        .store
        .revoke_credential(principal.tenant_id, &row.hash, &note, state.now())
        .await?;
    // This instance refuses it from the next request; the others within the TTL.
    state.lookups.forget_tokens();
    if revoked > 0 {
        tracing::info!(token_id = %id, label = %row.label, revoked, "token revoked");
    }
    Ok(revoked)
}

/// Revokes every token of the agent named `agent`.
pub async fn revoke_agent(state: &AppState, principal: &Principal, agent: &str) -> ApiResult<u64> {
    let agent = state.store.agent(principal.tenant_id, agent).await?;
    let note = principal.note(format!("agent:{}", agent.name));
    let revoked = state
        .store
        .revoke_agent_credentials(principal.tenant_id, agent.id, &note, state.now())
        .await?;
    state.lookups.forget_tokens();
    tracing::info!(agent = %agent.name, agent_id = %agent.id, revoked, "agent's tokens revoked");
    Ok(revoked)
}

/// What a minted token is for.
pub enum Minted {
    /// A machine's token with these scopes (`metrics:read`), of no agent.
    Machine(Vec<String>),
    /// The read-only token of the agent named (id or name) `.0`: its one scope is
    /// `agent:{id}:read`.
    AgentReader(String),
}

/// Mints a token (its scopes sorted, each once) with `label`; the token is in the
/// answer, once. An agent's reader token is the agent's (404 for an agent the
/// tenant does not have), and revoked with the agent's other tokens.
pub async fn mint(
    state: &AppState,
    principal: &Principal,
    minted: Minted,
    label: &str,
) -> ApiResult<TokenCreated> {
    let (agent, mut scopes) = match minted {
        Minted::Machine(scopes) => (None, scopes),
        Minted::AgentReader(key) => {
            let agent = super::inbox::agent(state, principal.tenant_id, &key).await?;
            (Some(agent.id), vec![crate::access::read_scope(agent.id)])
        }
    };
    scopes.sort();
    scopes.dedup();
    let token = generate_token(if agent.is_some() { "sb_ag_" } else { "sb_mt_" });
    let hash = hash_token(&token);
    let note = principal
        .note(format!("token:{}", token_id(&hash)))
        .detail(format!("{label}: {}", scopes.join(" ")));
    state
        .store
        .insert_token_of(
            &hash,
            principal.tenant_id,
            agent,
            &scopes,
            label,
            Some(&note),
            state.now(),
        )
        .await?;
    tracing::info!(label, "read-only token minted");
    Ok(TokenCreated {
        token,
        scopes,
        label: label.to_owned(),
    })
}

/// Deletes the agent named `agent`: its tokens revoked, its inbox purged.
pub async fn delete_agent(
    state: &AppState,
    principal: &Principal,
    agent: &str,
) -> ApiResult<AgentDeleted> {
    let agent = state.store.agent(principal.tenant_id, agent).await?;
    let note = principal.note(format!("agent:{}", agent.name));
    let deleted = state
        .store
        .delete_agent(principal.tenant_id, agent.id, &note, state.now())
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent {:?}", agent.name)))?;
    state.lookups.forget_agents();
    state.lookups.forget_tokens();
    tracing::info!(
        agent = %agent.name,
        agent_id = %agent.id,
        revoked = deleted.revoked,
        purged = deleted.purged,
        "agent deleted"
    );
    Ok(AgentDeleted {
        agent_id: agent.id,
        name: agent.name,
        revoked: deleted.revoked,
        purged: deleted.purged,
    })
}
