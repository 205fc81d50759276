//! Remote client settings and client reports as use cases. An operator sets, for
//! the tenant or one agent, the SDK's polling ceiling and whether its client
//! reports are paused; a change clears this instance's token cache at once (the
//! settings ride on the token's read) and tells the console. Agents send reports
//! of their local state; operators list them.

use super::AppState;
use crate::access::Principal;
use crate::clock::to_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::{AgentRecord, ClientSettingsRow};
use switchboard_proto::*;

fn stored(row: ClientSettingsRow) -> StoredClientSettings {
    StoredClientSettings {
        agent_id: row.agent_id,
        name: row.name,
        settings: row.settings,
        updated_at: to_timestamp(row.updated_at),
        updated_by: row.updated_by,
    }
}

pub async fn list(state: &AppState, tenant: TenantId) -> ApiResult<ClientSettingsList> {
    let mut list = ClientSettingsList {
        tenant: None,
        agents: Vec::new(),
    };
    for row in state.store.client_settings(tenant).await? {
        match row.agent_id {
            None => list.tenant = Some(stored(row)),
            Some(_) => list.agents.push(stored(row)),
        }
    }
    Ok(list)
}

/// Stores `settings` for `agent` (`None`: the tenant) and lets SDKs and the console
/// know. The caller has checked `ops:write` (before loading the agent, so an agent
/// token gets 403, not 404).
pub async fn put(
    state: &AppState,
    principal: &Principal,
    agent: Option<&AgentRecord>,
    settings: ClientSettings,
) -> ApiResult<StoredClientSettings> {
    settings.check().map_err(ApiError::unprocessable)?;
    let now = state.now();
    let note = principal
        .note(target(agent))
        .detail(settings_detail(&settings));
    let by = note.actor.clone();
    state
        .store
        .put_client_settings(
            principal.tenant_id,
            agent.map(|a| a.id),
            settings,
            &note,
            now,
        )
        .await?;
    changed(state, principal.tenant_id);
    Ok(StoredClientSettings {
        agent_id: agent.map(|a| a.id),
        name: agent.map(|a| a.name.clone()),
        settings,
        updated_at: to_timestamp(now),
        updated_by: by,
    })
}

/// What settings are about, in the audit log.
fn target(agent: Option<&AgentRecord>) -> String {
    match agent {
        Some(a) => format!("agent:{}", a.name),
        None => "tenant".to_owned(),
    }
}

/// The settings, in the audit log's words.
fn settings_detail(s: &ClientSettings) -> String {
    format!(
        "poll_ceiling_ms={}, reports_paused={}",
        s.poll_ceiling_ms
            .map_or("default".to_owned(), |ms| ms.to_string()),
        s.reports_paused
            .map_or("default".to_owned(), |p| p.to_string())
    )
}

/// Removes the settings of `agent` (`None`: the tenant); `ops:write` is checked.
pub async fn delete(
    state: &AppState,
    principal: &Principal,
    agent: Option<&AgentRecord>,
) -> ApiResult<()> {
    if state
        .store
        .delete_client_settings(
            principal.tenant_id,
            agent.map(|a| a.id),
            &principal.note(target(agent)),
            state.now(),
        )
        .await?
    {
        changed(state, principal.tenant_id);
    }
    Ok(())
}

/// The next response of this instance carries the change (the token cache holds
/// the settings it read); the console's Agents page reloads.
fn changed(state: &AppState, tenant: TenantId) {
    state.lookups.forget_tokens();
    state.hub.client_settings(tenant);
}

/// Stores `agent`'s latest report; the console refreshes its Agents page.
pub async fn put_report(
    state: &AppState,
    agent: &AgentRecord,
    report: &ClientReport,
) -> ApiResult<()> {
    let json = serde_json::to_string(report)
        .map_err(|e| ApiError::unprocessable(format!("the report cannot be stored: {e}")))?;
    state
        .store
        .put_client_report(agent.id, &json, state.now())
        .await?;
    // The console refreshes its Agents page on the change stream.
    state.hub.changed(agent.wake(agent.head_seq));
    Ok(())
}

/// The latest report of every agent of `tenant` that sent one.
pub async fn reports(state: &AppState, tenant: TenantId) -> ApiResult<Vec<ReceivedReport>> {
    let rows = state.store.client_reports(tenant).await?;
    Ok(rows
        .into_iter()
        // A row that no longer parses (written by another version) is skipped
        // rather than failing the whole list.
        .filter_map(|row| {
            let report = serde_json::from_str(&row.report).ok()?;
            Some(ReceivedReport {
                agent_id: row.agent_id,
                name: row.name,
                received_at: to_timestamp(row.received_at),
                report,
            })
        })
        .collect())
}
