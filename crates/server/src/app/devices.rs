//! Device login requests (RFC 8628) as a tenant's operators decide them: the list,
//! approve (naming the agent, created when it does not exist) and deny.

use super::AppState;
use crate::access::{Principal, agent_scopes, generate_token, hash_token};
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::{Approval, DeviceRequestRow};
use switchboard_proto::*;

fn request(row: DeviceRequestRow) -> DeviceRequest {
    DeviceRequest {
        user_code: row.user_code,
        client_id: row.client_id,
        agent_name: row.agent_name,
        source: row.source,
        user_agent: row.user_agent,
        created_at: to_timestamp(row.created_at),
        expires_at: to_timestamp(row.expires_at),
        status: row.status,
        decided_by: row.decided_by,
        decided_at: row.decided_at.map(to_timestamp),
        agent_id: row.agent_id,
    }
}

fn nothing_pending() -> ApiError {
    ApiError::not_found("a pending device request with this user code")
}

/// The tenant's device requests.
pub async fn list(state: &AppState, tenant: TenantId) -> ApiResult<Vec<DeviceRequest>> {
    let rows = state.store.device_requests(tenant, state.now()).await?;
    Ok(rows.into_iter().map(request).collect())
}

/// Approves the pending request `code` for `agent` (the one the device asked for
/// when `None`): a new login family under the approving operator's token.
pub async fn approve(
    state: &AppState,
    principal: &Principal,
    code: &str,
    agent: Option<&str>,
) -> ApiResult<DeviceRequest> {
    let family = hash_token(&generate_token("sb_fam_"));
    let scopes = agent_scopes();
    let row = state
        .store
        .decide_device_request(
            principal.tenant_id,
            code,
            Some(&Approval {
                agent_name: agent,
                family_hash: &family,
                scopes: &scopes,
                parent: &principal.token_hash,
            }),
            &principal.note(format!("device:{code}")),
            state.now(),
        )
        .await?
        .ok_or_else(nothing_pending)?;
    let agent = agent.unwrap_or(&row.agent_name);
    tracing::info!(agent, client = %row.client_id, "device login approved");
    Ok(request(row))
}

/// Denies the pending request `code`.
pub async fn deny(state: &AppState, principal: &Principal, code: &str) -> ApiResult<DeviceRequest> {
    let row = state
        .store
        .decide_device_request(
            principal.tenant_id,
            code,
            None,
            &principal.note(format!("device:{code}")),
            state.now(),
        )
        .await?
        .ok_or_else(nothing_pending)?;
    tracing::info!(client = %row.client_id, "device login denied");
    Ok(request(row))
}
