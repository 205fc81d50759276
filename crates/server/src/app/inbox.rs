//! An agent's inbox as use cases: find the agent a principal may work, subscribe,
//! read, claim, ack, release, extend, snapshot. Each runs its store transaction and
//! then its after-commit effects (metrics, the console's signal); the wake-ups went
//! out with the commit (the store hands them to the hub).

use super::{AppState, or_not_found};
use crate::access::{Principal, SCOPE_OPS_WRITE};
use crate::error::{ApiError, ApiResult};
use crate::hub;
use crate::metrics::TenantMetrics;
use crate::store::StoreError;
use std::sync::Arc;
use switchboard_proto::*;

pub use crate::store::{AgentRecord, ClaimArgs, Claimed, ReleaseArgs};

/// An agent of `tenant` by id or name; 404 names it when it is not there.
pub async fn agent(state: &AppState, tenant: TenantId, key: &str) -> ApiResult<AgentRecord> {
    or_not_found(
        state.store.agent(tenant, key).await,
        format_args!("agent {key:?}"),
    )
}

/// The agent named `key` if `principal` may use its inbox; 404 otherwise, the same
/// answer for "foreign" and "unknown" (I9). Recent lookups come from the cache.
pub async fn inbox_agent(
    state: &AppState,
    principal: &Principal,
    key: &str,
) -> ApiResult<AgentRecord> {
    // An operator who may not work inboxes (a read-only console session) and an
    // agent's read-only token are refused before any lookup: 403 for every name
    // alike tells them nothing.
    principal.refuse_read_only()?;
    visible_agent(state, principal, key, Principal::may_use_inbox).await
}

/// The agent named `key` if `principal` may read its inbox (poll, subscribe, the
/// snapshot): as [`inbox_agent`], and also with the agent's read scope.
pub async fn reading_agent(
    state: &AppState,
    principal: &Principal,
    key: &str,
) -> ApiResult<AgentRecord> {
    visible_agent(state, principal, key, Principal::may_read_inbox).await
}

/// The agent named `key` if `may` lets `principal` at it; 404 otherwise. An operator
/// without `ops:write` is refused (403) before the lookup.
async fn visible_agent(
    state: &AppState,
    principal: &Principal,
    key: &str,
    may: fn(&Principal, &AgentRecord) -> bool,
) -> ApiResult<AgentRecord> {
    if principal.agent_id.is_none() {
        principal.require(SCOPE_OPS_WRITE)?;
    }
    let agent = cached_agent(state, principal, key).await?;
    if !may(principal, &agent) {
        return Err(ApiError::not_found(format_args!("agent {key:?}")));
    }
    Ok(agent)
}

async fn cached_agent(
    state: &AppState,
    principal: &Principal,
    key: &str,
) -> ApiResult<AgentRecord> {
    Ok(match state.lookups.agent(principal.tenant_id, key) {
        Some(agent) => agent,
        None => {
            let agent = agent(state, principal.tenant_id, key).await?;
            state.lookups.put_agent(principal.tenant_id, key, &agent);
            agent
        }
    })
}

/// Maps store errors of claim-token operations, counting stale claims (I4).
fn claim_error(state: &AppState, tenant: TenantId, e: StoreError, event: EventId) -> ApiError {
    match e {
        StoreError::StaleClaim(_) => {
            state.metrics.tenant(tenant).stale_claim_rejections.inc();
            e.into()
        }
        StoreError::NotFound => ApiError::not_found(format_args!("event {event}")),
        e => e.into(),
    }
}

/// A subscriber of one inbox: its wake-ups, and the head when it subscribed. It
/// counts in the `sse_subscribers` gauge while it lives.
pub struct Subscription {
    pub wakes: hub::Subscription,
    pub head: u64,
    _gauge: SubscriberGauge,
}

struct SubscriberGauge(Arc<TenantMetrics>);

impl Drop for SubscriberGauge {
    fn drop(&mut self) {
        self.0.sse_subscribers.dec();
    }
}

/// Subscribes to `agent`'s wake-ups. Registers first, then reads the head: a send
/// that commits in between is then either in the head or delivered on the channel,
/// never lost.
pub async fn subscribe(state: &AppState, agent: &AgentRecord) -> ApiResult<Subscription> {
    let wakes = state.hub.subscribe(agent.id);
    let agent = state
        .store
        .agent(agent.tenant_id, &agent.id.to_string())
        .await?;
    let metrics = state.metrics.tenant(agent.tenant_id);
    metrics.sse_subscribers.inc();
    let _ = state.store.touch_agent(agent.id, state.now()).await;
    Ok(Subscription {
        wakes,
        head: agent.head_seq,
        _gauge: SubscriberGauge(metrics),
    })
}

/// A page of the inbox after `after` (read-only).
pub async fn poll(
    state: &AppState,
    agent: &AgentRecord,
    after: u64,
    limit: u32,
) -> ApiResult<InboxPage> {
    Ok(state.store.poll(agent.id, after, limit).await?)
}

/// Claims pending events under a visibility lease.
pub async fn claim(state: &AppState, agent: &AgentRecord, args: ClaimArgs) -> ApiResult<Claimed> {
    let done = state
        .store
        .claim(agent, args.limit, args.lease_ms, args.attempt, state.now())
        .await?;
    claimed(state, agent, &done);
    Ok(done)
}

/// After a claim committed: its expired leases count as the scavenger's would, and
/// the console hears of it.
fn claimed(state: &AppState, agent: &AgentRecord, done: &Claimed) {
    state.reaped(&done.reaped);
    state.hub.changed(agent.wake(agent.head_seq));
}

/// Acks a claimed event. A retry of the same ack succeeds again.
pub async fn ack(
    state: &AppState,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
) -> ApiResult<EventState> {
    let acked = state
        .store
        .ack(agent, event, token, state.now())
        .await
        .map_err(|e| claim_error(state, agent.tenant_id, e, event))?;
    state.acked(agent.tenant_id, &acked);
    state.hub.changed(agent.wake(agent.head_seq));
    Ok(acked.state)
}

/// Acks several claimed events in one transaction, each with its own outcome (the
/// event's state or the problem a single ack would have answered); with `claim`, the
/// same transaction then claims the next events.
pub async fn ack_batch(
    state: &AppState,
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    claim: Option<ClaimArgs>,
) -> ApiResult<(Vec<Result<EventState, ApiError>>, Option<Claimed>)> {
    let now = state.now();
    let (outcomes, next) = match claim {
        Some(args) => {
            let (outcomes, done) = state.store.ack_and_claim(agent, entries, args, now).await?;
            (outcomes, Some(done))
        }
        None => (state.store.ack_batch(agent, entries, now).await?, None),
    };
    let results = entries
        .iter()
        .zip(outcomes)
        .map(|(&(event, _), outcome)| match outcome {
            Ok(acked) => {
                state.acked(agent.tenant_id, &acked);
                Ok(acked.state)
            }
            Err(e) => Err(claim_error(state, agent.tenant_id, e, event)),
        })
        .collect();
    match &next {
        Some(done) => claimed(state, agent, done),
        None => state.hub.changed(agent.wake(agent.head_seq)),
    }
    Ok((results, next))
}

/// Gives a claimed event back: pending again after the delay, or quarantined.
pub async fn release(
    state: &AppState,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    args: &ReleaseArgs,
) -> ApiResult<EventState> {
    let done = state
        .store
        .release(agent, event, token, args, state.now())
        .await
        .map_err(|e| claim_error(state, agent.tenant_id, e, event))?;
    state.released(agent.tenant_id, &done);
    state.hub.changed(agent.wake(agent.head_seq));
    Ok(done.value)
}

/// Extends the lease of a claimed event by `lease_ms` from now.
pub async fn extend(
    state: &AppState,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    lease_ms: i64,
) -> ApiResult<EventState> {
    state
        .store
        .extend(agent, event, token, lease_ms, state.now())
        .await
        .map_err(|e| claim_error(state, agent.tenant_id, e, event))
}

/// The baseline for a full state sync.
pub async fn snapshot(state: &AppState, agent: &AgentRecord) -> ApiResult<Snapshot> {
    Ok(state.store.snapshot(agent, state.now()).await?)
}
