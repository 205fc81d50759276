//! Memory instances and their fenced data plane as use cases: register, branch,
//! read with lineage; records read and written under the current lease's fencing
//! token (a refusal counts in `fencing_rejections` and the console hears of it),
//! and listed by pages without one; subscriptions to `memory_updated` events. The
//! current fencing token is shown to operators only (I7).

use super::{AppState, or_not_found};
use crate::access::{Principal, SCOPE_OPS_READ, SCOPE_OPS_WRITE};
use crate::error::{ApiError, ApiResult};
use crate::store::{RecordCall, StoreError};
use switchboard_proto::*;

pub use crate::store::{RecordDone, RecordOp};

fn memory_not_found(id: MemoryId) -> impl FnOnce(StoreError) -> ApiError {
    move |e| match e {
        StoreError::NotFound => ApiError::not_found(format_args!("memory {id}")),
        e => e.into(),
    }
}

/// `memory` as `principal` may see it: the current fencing token only for operators
/// (I7). A holder has its token from its acquisition; anyone else must not learn it.
fn shown_to(principal: &Principal, mut memory: Memory) -> Memory {
    if !principal.has(SCOPE_OPS_READ) {
        memory.fencing_token = None;
    }
    memory
}

/// Makes a memory instance (its id a UUIDv7 the server picks).
/// Registers a memory: the server mints its id, or takes the client's (`id`, a
/// UUIDv7: 422 otherwise). The memory, and whether it is new (a retry of a
/// client's id gets the one it registered).
pub async fn register(
    state: &AppState,
    principal: &Principal,
    id: Option<MemoryId>,
    label: Option<&str>,
) -> ApiResult<(Memory, bool)> {
    let tenant = principal.tenant_id;
    let (memory, new) = match id {
        None => (
            state
                .store
                .register_memory(tenant, label, state.now())
                .await?,
            true,
        ),
        Some(id) if id.0.get_version_num() != 7 => {
            return Err(ApiError::unprocessable(format!(
                "memory_instance_id {id} is a version {} UUID; it must be a UUIDv7 (time \
                 ordered), or leave it out and the server mints one",
                id.0.get_version_num()
            )));
        }
        Some(id) => {
            state
                .store
                .register_memory_as(tenant, id, label, state.now())
                .await?
        }
    };
    Ok((shown_to(principal, memory), new))
}

/// Branches `parent` at the fencing token its branch starts from.
pub async fn branch(
    state: &AppState,
    principal: &Principal,
    parent: MemoryId,
    parent_token: u64,
    label: Option<&str>,
) -> ApiResult<Memory> {
    let memory = state
        .store
        .branch_memory(
            principal.tenant_id,
            parent,
            parent_token,
            label,
            state.now(),
        )
        .await
        .map_err(|e| match e {
            // A well-formed body with a token the parent has not reached.
            StoreError::Invalid(why) => ApiError::unprocessable(why),
            e => memory_not_found(parent)(e),
        })?;
    Ok(shown_to(principal, memory))
}

/// Memory `id`.
pub async fn get(state: &AppState, principal: &Principal, id: MemoryId) -> ApiResult<Memory> {
    let memory = state
        .store
        .memory(principal.tenant_id, id)
        .await
        .map_err(memory_not_found(id))?;
    Ok(shown_to(principal, memory))
}

/// Memory `id` with its ancestors and descendants.
pub async fn lineage(state: &AppState, principal: &Principal, id: MemoryId) -> ApiResult<Lineage> {
    let Lineage {
        memory,
        ancestors,
        descendants,
    } = state
        .store
        .lineage(principal.tenant_id, id)
        .await
        .map_err(memory_not_found(id))?;
    let shown = |list: Vec<Memory>| list.into_iter().map(|m| shown_to(principal, m)).collect();
    Ok(Lineage {
        memory: shown_to(principal, memory),
        ancestors: shown(ancestors),
        descendants: shown(descendants),
    })
}

/// One data-plane call on record `key` of `memory` with fencing `token`. A refusal
/// by the fence counts and tells the console.
pub async fn record(
    state: &AppState,
    principal: &Principal,
    memory: MemoryId,
    key: &str,
    token: u64,
    op: RecordOp,
) -> ApiResult<RecordDone> {
    let who = principal.actor();
    let call = RecordCall {
        tenant: principal.tenant_id,
        memory,
        key,
        token,
        who: &who,
        op,
    };
    match state.store.record(&call, state.now()).await {
        Ok(done) => Ok(done.value),
        Err(
            e
            @ (StoreError::StaleFence(_) | StoreError::LeaseExpired(_) | StoreError::NotHolder(_)),
        ) => {
            state
                .metrics
                .tenant(principal.tenant_id)
                .fencing_rejections
                .inc();
            state.hub.leases(principal.tenant_id);
            tracing::info!(memory = %memory, token, "data-plane call refused by the fence");
            Err(e.into())
        }
        Err(StoreError::NotFound) => Err(ApiError::not_found(format_args!(
            "record {key:?} of memory {memory}"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// A page of `memory`'s records in key order, after the key `after`: at most
/// `limit`, and whether more follow (one more is read to know). No fencing token:
/// this is the baseline state a reader resyncs from (after a 410, or on taking a
/// lease over), so it needs no lease. Only the principal's tenant's memories: any
/// other is the same 404 as one that does not exist (I9). Who may ask at all is the
/// handler's check.
pub async fn records(
    state: &AppState,
    principal: &Principal,
    memory: MemoryId,
    after: Option<&str>,
    limit: u32,
) -> ApiResult<(Vec<MemoryRecord>, bool)> {
    let mut page = state
        .store
        .records_page(principal.tenant_id, memory, after, limit.saturating_add(1))
        .await
        .map_err(memory_not_found(memory))?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    Ok((page, more))
}

/// Subscribes the agent named `agent` to `memory`'s `memory_updated` events (`on`),
/// or ends it. An agent subscribes itself; operators anyone.
pub async fn subscribe(
    state: &AppState,
    principal: &Principal,
    memory: MemoryId,
    agent: &str,
    on: bool,
) -> ApiResult<()> {
    let agent = state
        .store
        .agent(principal.tenant_id, agent)
        .await
        .map_err(|_| ApiError::not_found(format_args!("agent {agent}")))?;
    principal.refuse_read_only()?;
    if principal.working_agent() != Some(agent.id) {
        principal.require(SCOPE_OPS_WRITE)?;
    }
    let done = state
        .store
        .subscribe_memory(principal.tenant_id, memory, agent.id, on)
        .await;
    or_not_found(done, format_args!("memory {memory}"))
}

/// The tenant's last `limit` refusals by the fence.
pub async fn fencing_rejections(
    state: &AppState,
    tenant: TenantId,
    limit: u32,
) -> ApiResult<Vec<FencingRejection>> {
    Ok(state.store.fencing_rejections(tenant, limit).await?)
}
