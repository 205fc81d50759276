//! Test seams: points where a test can pause or fail a request in flight, to show
//! that wake-ups follow commits (I1) and that in-flight idempotency keys answer 409
//! (I8). Empty in production, where each hook is a no-op.

use futures::future::BoxFuture;
use std::sync::Arc;

/// Called inside the send transaction after its writes, before commit. Returning
/// `Err` rolls the transaction back.
pub type BeforeCommit = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

/// Called after an idempotency key was recorded as in flight, before the work runs.
pub type AfterKeyRecorded = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// Called before a background task; `Err` fails it.
pub type BeforeTask = Arc<dyn Fn(&'static str) -> Result<(), String> + Send + Sync>;

#[derive(Clone, Default)]
pub struct Hooks {
    pub before_send_commit: Option<BeforeCommit>,
    pub after_key_recorded: Option<AfterKeyRecorded>,
    /// Called before each background task of a worker pass (its name, e.g.
    /// `retention`); an `Err` fails that task as a database error would.
    pub before_background_task: Option<BeforeTask>,
    /// Replaces the system resolver of webhook targets (DNS rebinding tests).
    pub webhook_lookup: Option<std::sync::Arc<dyn crate::webhooks::target::Lookup>>,
}

impl Hooks {
    /// Runs `before_background_task`, if set.
    pub(crate) fn before_background_task(&self, task: &'static str) -> Result<(), String> {
        match &self.before_background_task {
            Some(hook) => hook(task),
            None => Ok(()),
        }
    }

    /// Runs `before_send_commit`, if set; its `Err` aborts the transaction.
    pub(crate) async fn before_send_commit(&self) -> crate::store::StoreResult<()> {
        if let Some(hook) = &self.before_send_commit {
            hook().await.map_err(crate::store::StoreError::Aborted)?;
        }
        Ok(())
    }
}
