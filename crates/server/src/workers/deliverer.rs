//! The delivery room: when to deliver. After the wake-ups of inboxes and every
//! 500 ms, it starts a delivery (`app/deliveries.rs`) for each due callback, as many
//! at a time as the configured concurrency.

use crate::app::AppState;
use crate::app::deliveries::deliver;
use crate::error::ApiResult;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_proto::CallbackState;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A pass runs at least this often (releases come due, missed wake-ups).
const PASS_EVERY: Duration = Duration::from_millis(500);

pub use crate::app::deliveries::Delivered;

/// The room: delivers in the background until `shutdown`, unless the
/// configuration leaves delivery to tests (`deliver_in_background` off).
pub(super) async fn run(state: AppState, shutdown: CancellationToken) {
    if state.webhooks.config.deliver_in_background {
        Deliverer::new(state).run(shutdown).await;
    }
}

#[derive(Clone)]
pub struct Deliverer {
    state: AppState,
    permits: Arc<Semaphore>,
}

impl Deliverer {
    pub fn new(state: AppState) -> Self {
        let permits = Arc::new(Semaphore::new(state.webhooks.config.concurrency.max(1)));
        Self { state, permits }
    }

    /// Runs passes until shutdown: after the wake-ups of inboxes (from this instance
    /// or another: the store's sink, the hub, the same road as SSE), and every 500 ms; none while no callback is active
    /// anywhere (counted again every 5 s, and when one of this instance changes), so a
    /// deployment without webhooks pays no query per send, claim or ack.
    async fn run(self, shutdown: CancellationToken) {
        let mut work = self.state.hub.subscribe_work();
        let mut seen = *work.borrow_and_update();
        let mut active = Active::default();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                // A burst of wake-ups is one change of the watch: one pass.
                Ok(()) = work.changed() => {
                    let now = *work.borrow_and_update();
                    if now.callbacks != seen.callbacks {
                        active.stale();
                    }
                    seen = now;
                }
                _ = tokio::time::sleep(PASS_EVERY) => {}
            }
            if !active.any(&self.state).await {
                continue;
            }
            if let Err(e) = self.start_due().await {
                tracing::warn!(error = %e, "webhook pass failed; retrying");
            }
        }
    }

    /// Starts a delivery for each due callback, as many as there are free slots,
    /// each in the background.
    async fn start_due(&self) -> ApiResult<()> {
        let free = self.permits.available_permits();
        if free == 0 {
            return Ok(());
        }
        let due = self
            .state
            .store
            .due_callbacks(self.state.now(), free as u32)
            .await?;
        for callback in due {
            let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                break;
            };
            let me = self.clone();
            self.state.tasks.spawn(async move {
                if let Err(e) = deliver(&me.state, &callback).await {
                    tracing::warn!(error = %e, callback_id = %callback.callback.callback_id, "webhook delivery failed in the store");
                }
                drop(permit);
            });
        }
        Ok(())
    }

    /// One pass that waits for its deliveries (tests drive the worker with this and a
    /// manual clock).
    pub async fn pass(&self) -> ApiResult<Vec<Delivered>> {
        let due = self.state.store.due_callbacks(self.state.now(), 64).await?;
        let mut done = Vec::with_capacity(due.len());
        for callback in &due {
            done.push(deliver(&self.state, callback).await?);
        }
        Ok(done)
    }
}

/// Whether any callback is active, every tenant, as last counted.
#[derive(Default)]
struct Active {
    /// When it was counted, and what it found; `None`: count again.
    counted: Option<(Instant, bool)>,
}

impl Active {
    /// Counted at most every this often (another instance's registrations).
    const RECOUNT: Duration = Duration::from_secs(5);

    /// A callback changed: count again if none was active (a registration or an
    /// enable). While some are, the passes run anyway; the next count sees a disable.
    fn stale(&mut self) {
        if matches!(self.counted, Some((_, false))) {
            self.counted = None;
        }
    }

    async fn any(&mut self, state: &AppState) -> bool {
        if let Some((at, any)) = self.counted
            && at.elapsed() < Self::RECOUNT
        {
            return any;
        }
        // A failed count is taken as "some": the pass then reports the error.
        let any = state
            .store
            .count_callbacks(CallbackState::Active)
            .await
            .map_or(true, |n| n > 0);
        self.counted = Some((Instant::now(), any));
        any
    }
}
