//! Tenants as the deployment admin makes and lists them. Each tenant is a world of
//! its own (I9).

use super::AppState;
use crate::access::{Principal, generate_token, hash_token, operator_scopes};
use crate::clock::to_timestamp;
use crate::error::ApiResult;
use crate::store::NewOperator;
use switchboard_proto::{TenantCreated, TenantSummary};

/// Makes tenant `name` with an operator token (shown once, in the answer).
pub async fn create(
    state: &AppState,
    principal: &Principal,
    name: &str,
) -> ApiResult<TenantCreated> {
    let token = generate_token("sb_op_");
    let scopes = operator_scopes();
    let operator = NewOperator {
        token_hash: &hash_token(&token),
        scopes: &scopes,
        label: "operator",
    };
    let tenant = state
        .store
        .create_tenant(
            name,
            &operator,
            Some((
                principal.tenant_id,
                &principal.note(format!("tenant:{name}")),
            )),
            state.now(),
        )
        .await?;
    tracing::info!(tenant = %tenant.name, tenant_id = %tenant.id, "tenant created");
    Ok(TenantCreated {
        tenant_id: tenant.id,
        name: tenant.name,
        operator_token: token,
        created_at: to_timestamp(tenant.created_at),
    })
}

/// Every tenant with its number of agents.
pub async fn list(state: &AppState) -> ApiResult<Vec<TenantSummary>> {
    let tenants = state.store.tenants().await?;
    Ok(tenants
        .into_iter()
        .map(|t| TenantSummary {
            tenant_id: t.id,
            name: t.name,
            created_at: to_timestamp(t.created_at),
            agents: t.agents,
        })
        .collect())
}
