//! Idle rate-limit buckets (full again) are dropped once a minute, so the limiter's
//! memory follows the active credentials.

use crate::app::AppState;
use tokio_util::sync::CancellationToken;

const EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Forgets idle buckets every minute until `shutdown`.
pub(super) async fn run(state: AppState, shutdown: CancellationToken) {
    super::every(EVERY, shutdown, || {
        state.limiter.forget_idle();
        std::future::ready(())
    })
    .await;
}
