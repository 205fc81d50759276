//! Wake-ups committed by other instances sharing the database (PostgreSQL's
//! LISTEN, MariaDB's wake table), handed to this instance's hub.

use crate::app::AppState;
use tokio_util::sync::CancellationToken;

/// Listens until `shutdown`.
pub(super) async fn run(state: AppState, shutdown: CancellationToken) {
    let remote = state.hub.remote_feed();
    state.store.listen(remote, shutdown).await;
}
