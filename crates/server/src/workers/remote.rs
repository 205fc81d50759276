//! Wake-ups committed by other instances sharing the database (PostgreSQL's
//! LISTEN, MariaDB's wake table): the store delivers them to its sink, the hub.

use crate::app::AppState;
use tokio_util::sync::CancellationToken;

/// Listens until `shutdown`.
pub(super) async fn run(state: AppState, shutdown: CancellationToken) {
    state.store.listen(shutdown).await;
}
