//! The store's test seams: points where a test can pause or fail a transaction in
//! flight, to show that wake-ups follow commits (I1). Empty in production, where
//! each hook is a no-op. The server's `Hooks` holds these and its own (the HTTP
//! layer's and the workers'), and hands the store this part when it opens it.

use futures::future::BoxFuture;
use std::sync::Arc;

/// Called inside the send transaction after its writes, before commit. Returning
/// `Err` rolls the transaction back.
pub type BeforeCommit = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// The seams inside the store's transactions.
#[derive(Clone, Default)]
pub struct StoreHooks {
    pub before_send_commit: Option<BeforeCommit>,
}

impl StoreHooks {
    /// Runs `before_send_commit`, if set; its `Err` aborts the transaction.
    pub(crate) async fn before_send_commit(&self) -> crate::StoreResult<()> {
        if let Some(hook) = &self.before_send_commit {
            hook().await.map_err(crate::StoreError::Aborted)?;
        }
        Ok(())
    }
}
