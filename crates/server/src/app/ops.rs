//! The operator's use cases: agents made and summarized, the overview, events
//! listed and shown, bulk actions (replay, release, purge) and the audit log.

use super::{AppState, or_not_found};
use crate::access::{
    Principal, SCOPE_ADMIN, SCOPE_OPS_READ, agent_scopes, generate_token, hash_token,
};
use crate::clock::to_timestamp;
use crate::error::ApiResult;
use crate::metrics::quantile;
use crate::store::DepthRow;
use switchboard_proto::*;

/// Makes agent `name` with a new token (shown once, in the answer).
pub async fn create_agent(
    state: &AppState,
    principal: &Principal,
    name: &str,
) -> ApiResult<AgentCreated> {
    let token = generate_token("sb_ag_");
    let agent = state
        .store
        .create_agent(
            principal.tenant_id,
            name,
            &hash_token(&token),
            &agent_scopes(),
            Some(&principal.note(format!("agent:{name}"))),
            state.now(),
        )
        .await?;
    tracing::info!(agent = %agent.name, agent_id = %agent.id, "agent created");
    Ok(AgentCreated {
        agent_id: agent.id,
        name: agent.name,
        token,
    })
}

fn summaries(
    state: &AppState,
    depth: Vec<DepthRow>,
    agents: Vec<crate::store::AgentRecord>,
    now: i64,
) -> Vec<AgentSummary> {
    let mut out = Vec::with_capacity(agents.len());
    for a in agents {
        let d = depth.iter().find(|d| d.agent_id == a.id);
        out.push(AgentSummary {
            agent_id: a.id,
            name: a.name,
            counts: d.map(|d| d.counts.clone()).unwrap_or_default(),
            head_cursor: a.head_seq,
            oldest_cursor: a.low_water,
            oldest_pending_age_seconds: d
                .and_then(|d| d.oldest_pending_at)
                .map(|at| ((now - at).max(0)) as f64 / 1000.0),
            subscribers: state.hub.subscribers(a.id),
            last_seen_at: a.last_seen_at.map(to_timestamp),
            created_at: to_timestamp(a.created_at),
        });
    }
    out
}

/// Every agent of the principal's tenant with its inbox's counts.
pub async fn agents(state: &AppState, principal: &Principal) -> ApiResult<Vec<AgentSummary>> {
    principal.require(SCOPE_OPS_READ)?;
    let depth = state.store.depth(Some(principal.tenant_id)).await?;
    let agents = state.store.agents(principal.tenant_id).await?;
    Ok(summaries(state, depth, agents, state.now()))
}

/// The console's overview: totals, agents, the database's and retention's health,
/// the counters and their rates.
pub async fn overview(state: &AppState, principal: &Principal) -> ApiResult<Overview> {
    let agents = agents(state, principal).await?;
    let mut totals = StatusCounts::default();
    for a in &agents {
        let c = &a.counts;
        totals.pending += c.pending;
        totals.claimed += c.claimed;
        totals.completed += c.completed;
        totals.quarantined += c.quarantined;
        totals.expired += c.expired;
        totals.purged += c.purged;
    }
    // The database's and retention's state: for the deployment's own tenant (its
    // console shows the queue table's tiles). Its numbers of events archived are the
    // tenant's own, every tenant's only for the deployment admin (I9).
    let (queue_table, retention) = if principal.tenant_id == state.tenant {
        (
            state.queue_health().await,
            Some(retention_health(state, principal)),
        )
    } else {
        (None, None)
    };
    Ok(Overview {
        queue_table,
        retention,
        subscribers: agents.iter().map(|a| a.subscribers).sum(),
        oldest_pending_age_seconds: agents
            .iter()
            .filter_map(|a| a.oldest_pending_age_seconds)
            .reduce(f64::max),
        totals,
        agents,
        server_time: to_timestamp(state.now()),
        counters: Some(counters(state, principal.tenant_id)),
    })
}

/// Retention's archive and whether it holds retention back.
fn retention_health(state: &AppState, principal: &Principal) -> switchboard_proto::RetentionHealth {
    let held = state
        .retention_held
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    switchboard_proto::RetentionHealth {
        archiving: state.archive.is_some(),
        archived_total: match principal.has(SCOPE_ADMIN) {
            true => state.metrics.archived_total(),
            false => state.metrics.tenant(principal.tenant_id).archived.get(),
        },
        held_back: held.map(|(since, why)| switchboard_proto::RetentionHeldBack {
            since: to_timestamp(since),
            reason: format!("{why}; {}", crate::archive::HELD_BACK_FIX),
        }),
    }
}

/// The overview's counters, read from the server's metrics, with the rates over the
/// last minute from the sample history.
fn counters(state: &AppState, tenant: TenantId) -> OpsCounters {
    let m = state.metrics.tenant(tenant);
    let buckets = m.latency_buckets();
    let c = m.counters();
    OpsCounters {
        lease_expirations_total: c.lease_expirations,
        stale_claim_rejections_total: c.stale_claim_rejections,
        fencing_rejections_total: c.fencing_rejections,
        quarantined_total: c.quarantined,
        delivered_total: c.delivered,
        delivery_latency_p50_seconds: quantile(&buckets, 0.5),
        delivery_latency_p99_seconds: quantile(&buckets, 0.99),
        per_minute: state.history.rates(tenant, state.now(), c),
    }
}

/// Quarantined events per agent name of `tenant` (agents with none count 0): what
/// the desktop app's tray counts.
pub async fn quarantined(
    state: &AppState,
    tenant: TenantId,
) -> ApiResult<std::collections::BTreeMap<String, u64>> {
    let depth = state.store.depth(Some(tenant)).await?;
    Ok(depth
        .into_iter()
        .map(|d| (d.agent_name, d.counts.quarantined))
        .collect())
}

/// A page of the tenant's events.
pub async fn events(
    state: &AppState,
    tenant: TenantId,
    q: &EventListQuery,
    limit: u32,
) -> ApiResult<OpsEventPage> {
    Ok(state.store.list_events(tenant, q, limit).await?)
}

/// One event with its history.
pub async fn event(state: &AppState, tenant: TenantId, id: EventId) -> ApiResult<EventDetail> {
    or_not_found(
        state.store.event_detail(tenant, id).await,
        format_args!("event {id}"),
    )
}

/// Replays, releases or purges the events `ids` or `filter` names, up to `most` of
/// them: how many, and the audit entry's id.
pub async fn bulk(
    state: &AppState,
    principal: &Principal,
    action: BulkAction,
    ids: Option<&[EventId]>,
    filter: Option<&EventFilter>,
    most: u64,
) -> ApiResult<(u64, i64)> {
    let scope = crate::store::Scope {
        action,
        ids,
        filter,
    };
    let done = state
        .store
        .bulk(
            principal.tenant_id,
            &scope,
            most,
            &principal.actor(),
            state.now(),
        )
        .await?;
    let (affected, audit_id) = done.value;
    tracing::info!(
        action = action.as_str(),
        affected,
        audit_id,
        "operator bulk action"
    );
    Ok((affected, audit_id))
}

/// The last `limit` entries of the tenant's audit log.
pub async fn audit(state: &AppState, tenant: TenantId, limit: u32) -> ApiResult<Vec<AuditEntry>> {
    Ok(state.store.audit(tenant, limit).await?)
}
