//! The system's own use cases: readiness and the Prometheus scrape.

use super::AppState;
use crate::access::{Principal, SCOPE_ADMIN};
use crate::error::{ApiError, ApiResult};
use switchboard_proto::ErrorCode;

/// How long `/readyz` waits for the database.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether this instance takes requests: not shutting down, and its database
/// answers within [`READY_WITHIN`]. Readiness answers quickly: a request would wait
/// up to the pool's acquire timeout for a database that is down, a load balancer
/// should not.
pub async fn ready(state: &AppState) -> ApiResult<()> {
    if state.shutdown.is_cancelled() {
        return Err(ApiError::new(
            ErrorCode::Unavailable,
            "the server is shutting down",
        ));
    }
    match tokio::time::timeout(READY_WITHIN, state.store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => {
            let mut e = ApiError::new(
                ErrorCode::Unavailable,
                format!(
                    "the database did not answer within {} s; requests are answered 503 until it does",
                    READY_WITHIN.as_secs()
                ),
            );
            e.retry_after = Some(1);
            Err(e)
        }
    }
}

/// The Prometheus exposition `principal` may see: its tenant's series, or, for the
/// deployment admin, every tenant's and the process's own (I9).
pub async fn metrics(state: &AppState, principal: &Principal) -> ApiResult<String> {
    let admin = principal.has(SCOPE_ADMIN);
    let (scope, tenant) = match admin {
        true => (crate::metrics::Scope::All, None),
        false => (
            crate::metrics::Scope::Tenant(principal.tenant_id),
            Some(principal.tenant_id),
        ),
    };
    let depth = state.store.depth(tenant).await?;
    let disabled = disabled_callbacks(state, tenant).await?;
    let (health, retries) = match admin {
        true => (state.queue_health().await, state.transaction_retries()),
        false => (None, Vec::new()),
    };
    let scrape = crate::metrics::Scrape {
        scope,
        depth: &depth,
        disabled_callbacks: &disabled,
        health: health.as_ref(),
        retries: &retries,
    };
    Ok(state.metrics.render(&scrape))
}

/// Disabled webhook callbacks of `tenant` (or of every tenant), per tenant.
async fn disabled_callbacks(
    state: &AppState,
    tenant: Option<switchboard_proto::TenantId>,
) -> crate::store::StoreResult<Vec<(switchboard_proto::TenantId, u64)>> {
    let tenants = match tenant {
        Some(t) => vec![t],
        None => state.store.tenants().await?.iter().map(|t| t.id).collect(),
    };
    let mut out = Vec::with_capacity(tenants.len());
    for t in tenants {
        let disabled = state
            .store
            .callbacks(t, None)
            .await?
            .iter()
            .filter(|c| c.state == switchboard_proto::CallbackState::Disabled)
            .count() as u64;
        out.push((t, disabled));
    }
    Ok(out)
}
