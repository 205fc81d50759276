//! Test seams: points where a test can pause or fail a request in flight, to show
//! that wake-ups follow commits (I1) and that in-flight idempotency keys answer 409
//! (I8). Empty in production, where each hook is a no-op. The store's own part
//! ([`StoreHooks`](crate::store::StoreHooks)) is handed to it when it opens.

use futures::future::BoxFuture;
use std::sync::Arc;

pub use crate::store::hooks::BeforeCommit;

/// Called after an idempotency key was recorded as in flight, before the work runs.
pub type AfterKeyRecorded = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// Called before a background task; `Err` fails it.
pub type BeforeTask = Arc<dyn Fn(&'static str) -> Result<(), String> + Send + Sync>;

/// Name lookups, injectable for tests (DNS rebinding): the webhook targets' resolver
/// (`webhooks::target::SystemLookup` uses `tokio::net::lookup_host`).
pub trait Lookup: Send + Sync + 'static {
    /// The addresses `host` resolves to, in preference order.
    fn lookup(&self, host: &str) -> BoxFuture<'static, std::io::Result<Vec<std::net::IpAddr>>>;
}

#[derive(Clone, Default)]
pub struct Hooks {
    pub before_send_commit: Option<BeforeCommit>,
    pub after_key_recorded: Option<AfterKeyRecorded>,
    /// Called before each background task of a worker pass (its name, e.g.
    /// `retention`); an `Err` fails that task as a database error would.
    pub before_background_task: Option<BeforeTask>,
    /// Replaces the system resolver of webhook targets (DNS rebinding tests).
    pub webhook_lookup: Option<Arc<dyn Lookup>>,
}

impl Hooks {
    /// Runs `before_background_task`, if set.
    pub(crate) fn before_background_task(&self, task: &'static str) -> Result<(), String> {
        match &self.before_background_task {
            Some(hook) => hook(task),
            None => Ok(()),
        }
    }

    /// The part of these the store runs, inside its transactions.
    pub fn store(&self) -> crate::store::StoreHooks {
        crate::store::StoreHooks {
            before_send_commit: self.before_send_commit.clone(),
        }
    }
}
