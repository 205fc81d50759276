//! The heartbeat, where several instances share the database: one silent for 10 s
//! is taken for dead, and its in-flight keys and live jobs are taken over
//! (`store/engine/instances.rs`). A room of its own, so that a long pass of another
//! never makes a live instance look dead.

use super::Workers;
use crate::store::StoreResult;
use tokio_util::sync::CancellationToken;

/// How often an instance of a shared database beats.
const EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One heartbeat at the configured clock's now.
pub(super) async fn once(w: &Workers) -> StoreResult<()> {
    w.state.store.beat(w.state.now()).await
}

/// Beats every second until `shutdown` (nothing on SQLite, which has one instance).
pub(super) async fn run(w: Workers, shutdown: CancellationToken) {
    if w.state.store.instance_name().is_none() {
        return;
    }
    super::every(EVERY, shutdown, || {
        let w = w.clone();
        async move {
            if let Err(e) = once(&w).await {
                tracing::warn!(error = %e, "heartbeat failed; beating again in a second");
            }
        }
    })
    .await;
}
