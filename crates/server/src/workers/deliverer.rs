//! The delivery worker: one event at a time per callback, in claim order, with the
//! HTTP request outside every transaction (a slow endpoint holds no lock and never
//! the SQLite writer; it holds its event's claim and its callback's lease).
//!
//! Outcomes, after Svix: 2xx acks the event. 410 releases it (for pull) and disables
//! the callback. Anything else (another status, a 3xx, a timeout, a refused
//! connection) releases it with the schedule's next delay, or the endpoint's
//! `Retry-After` on a 429 or 503, and the callback waits as long; the claim counts
//! towards the event's attempts, so a poison event ends in the quarantine. A
//! callback failing for `disable_after` is disabled.

use crate::app::AppState;
use crate::clock::to_timestamp;
use crate::metrics::Outcome;
use crate::store::{AttemptRecord, ReleaseArgs, StoreError, StoreResult, StoredCallback};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_proto::{CallbackAttempt, CallbackDelivery, CallbackState};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The claim's lease and the callback's: longer than the request may take.
const LEASE_MS: i64 = 60_000;
/// A pass runs at least this often (releases come due, missed wake-ups).
const PASS_EVERY: Duration = Duration::from_millis(500);
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What one delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Another instance holds the callback (or it was disabled meanwhile).
    NotLeased,
    /// The agent had nothing claimable after all.
    Nothing,
    /// This instance cannot open the secret (another webhook key).
    Unreadable(String),
    /// The endpoint took the event (2xx).
    Acked { status: u16 },
    /// Released for a retry after `delay`.
    Retried { error: String, delay: Duration },
    /// Released and the callback disabled.
    Disabled { reason: String },
}

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
    async fn start_due(&self) -> StoreResult<()> {
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
                if let Err(e) = me.deliver(&callback).await {
                    tracing::warn!(error = %e, callback_id = %callback.callback.callback_id, "webhook delivery failed in the store");
                }
                drop(permit);
            });
        }
        Ok(())
    }

    /// One pass that waits for its deliveries (tests drive the worker with this and a
    /// manual clock).
    pub async fn pass(&self) -> StoreResult<Vec<Delivered>> {
        let due = self.state.store.due_callbacks(self.state.now(), 64).await?;
        let mut done = Vec::with_capacity(due.len());
        for callback in &due {
            done.push(self.deliver(callback).await?);
        }
        Ok(done)
    }

    /// Delivers `callback`'s next event, if it can take the callback's lease.
    pub async fn deliver(&self, callback: &StoredCallback) -> StoreResult<Delivered> {
        let state = &self.state;
        let webhooks = &state.webhooks;
        let id = callback.callback.callback_id;
        let secret = match webhooks.secret(id, &callback.key_id, &callback.sealed) {
            Ok(secret) => secret,
            Err(e) => {
                tracing::warn!(callback_id = %id, error = %e, "cannot open a webhook secret");
                return Ok(Delivered::Unreadable(e));
            }
        };
        let Ok(url) = url::Url::parse(&callback.callback.url) else {
            return Ok(Delivered::Unreadable(
                "the stored URL does not parse".to_owned(),
            ));
        };
        let lease = uuid::Uuid::new_v4();
        let now = state.now();
        if !state
            .store
            .lease_callback(id, lease, now + LEASE_MS, now)
            .await?
        {
            return Ok(Delivered::NotLeased);
        }
        let agent = match state
            .store
            .agent(callback.tenant, &callback.callback.agent_id.to_string())
            .await
        {
            Ok(agent) => agent,
            Err(StoreError::NotFound) => {
                state.store.unlease_callback(id, lease).await?;
                return Ok(Delivered::Nothing);
            }
            Err(e) => return Err(e),
        };
        let claimed = state.store.claim(&agent, 1, LEASE_MS, None, now).await?;
        let m = state.metrics.tenant(agent.tenant_id);
        state.reaped(&claimed.reaped);
        let Some(event) = claimed.events.into_iter().next() else {
            state.store.unlease_callback(id, lease).await?;
            return Ok(Delivered::Nothing);
        };
        state.hub.changed(agent.wake(agent.head_seq));
        let event_id = event.event.event_id;
        let body = serde_json::to_vec(&CallbackDelivery {
            kind: "inbox.event".to_owned(),
            event: event.event.clone(),
        })
        .unwrap_or_default();
        let started = Instant::now();
        let (keyid, webhook_id) = (id.to_string(), event_id.to_string());
        let post = crate::webhooks::Post {
            url: &url,
            secret: &secret,
            keyid: &keyid,
            webhook_id: &webhook_id,
            now_secs: now / 1000,
            timeout: crate::webhooks::DELIVERY_TIMEOUT,
        };
        let sent = webhooks.post(&post, body).await;
        let latency = started.elapsed();
        m.webhook_latency.observe(latency.as_secs_f64());
        let now = state.now();
        let (status, retry_after) = match &sent {
            Ok(response) => {
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| switchboard_proto::parse_retry_after(v, to_timestamp(now)));
                (Some(response.status().as_u16()), retry_after)
            }
            Err(_) => (None, None),
        };
        let attempt = CallbackAttempt {
            at: to_timestamp(now),
            event_id: Some(event_id),
            kind: "delivery".to_owned(),
            status,
            error: None,
            latency_ms: latency.as_millis() as u64,
        };
        let mut record = AttemptRecord {
            tenant: callback.tenant,
            callback: id,
            lease_token: Some(lease),
            attempt,
            at: now,
            succeeded: false,
            next_attempt_at: now,
            disable: None,
        };
        let outcome = match (status, sent) {
            (Some(s), _) if (200..300).contains(&s) => {
                match state
                    .store
                    .ack(&agent, event_id, event.claim_token, now)
                    .await
                {
                    Ok(acked) => state.acked(agent.tenant_id, &acked),
                    // The claim's lease ran out meanwhile (a very slow answer): the
                    // event was handed out again and goes out again.
                    Err(StoreError::StaleClaim(_)) => {}
                    Err(e) => return Err(e),
                }
                state.hub.changed(agent.wake(agent.head_seq));
                record.succeeded = true;
                m.webhook_outcome(Outcome::Delivered);
                Delivered::Acked { status: s }
            }
            (Some(410), _) => {
                let reason = "the endpoint answered 410 Gone".to_owned();
                record.attempt.error = Some("HTTP 410 Gone".to_owned());
                record.disable = Some(reason.clone());
                self.release(
                    &agent,
                    &event,
                    0,
                    "HTTP 410 Gone: the callback is disabled",
                    now,
                )
                .await?;
                m.webhook_outcome(Outcome::Gone);
                Delivered::Disabled { reason }
            }
            (status, sent) => {
                let error = match (status, sent) {
                    (Some(s), _) => format!("HTTP {s}"),
                    (None, Err(failure)) => failure.to_string(),
                    (None, Ok(_)) => "no answer".to_owned(),
                };
                let streak = callback.callback.failure_streak.saturating_add(1);
                let delay = retry_after
                    .filter(|_| matches!(status, Some(429 | 503)))
                    .map(|d| d.min(MAX_RETRY_AFTER))
                    .unwrap_or_else(|| webhooks.retry_delay(streak));
                let delay_ms = delay.as_millis() as i64;
                record.attempt.error = Some(error.clone());
                record.next_attempt_at = now + delay_ms;
                let since = callback.failing_since.unwrap_or(now);
                let limit = webhooks.config.disable_after.as_millis() as i64;
                let detail = format!("webhook delivery failed: {error}");
                self.release(&agent, &event, delay_ms, &detail, now).await?;
                m.webhook_outcome(Outcome::Failed);
                if now - since >= limit {
                    let reason = format!(
                        "every delivery failed for {} (the last: {error})",
                        humanize(Duration::from_millis((now - since).max(0) as u64))
                    );
                    record.disable = Some(reason.clone());
                    Delivered::Disabled { reason }
                } else {
                    Delivered::Retried { error, delay }
                }
            }
        };
        let after = state.store.record_attempt(&record).await?;
        if let Some(after) = after
            && after.state == CallbackState::Disabled
            && record.disable.is_some()
        {
            tracing::warn!(
                callback_id = %id,
                agent = %after.agent,
                reason = after.disabled_reason.as_deref().unwrap_or_default(),
                "webhook callback disabled"
            );
        }
        state.hub.callbacks(callback.tenant);
        Ok(outcome)
    }

    /// Gives the event back for a retry (or for pull, after a 410).
    async fn release(
        &self,
        agent: &crate::store::AgentRecord,
        event: &switchboard_proto::ClaimedEvent,
        delay_ms: i64,
        error: &str,
        now: i64,
    ) -> StoreResult<()> {
        let args = ReleaseArgs {
            delay_ms,
            error: Some(error.to_owned()),
            terminal: false,
        };
        match self
            .state
            .store
            .release(agent, event.event.event_id, event.claim_token, &args, now)
            .await
        {
            Ok(done) => {
                self.state.released(agent.tenant_id, &done);
                self.state.hub.changed(agent.wake(agent.head_seq));
                Ok(())
            }
            // The lease ran out meanwhile: the scavenger has returned it.
            Err(StoreError::StaleClaim(_)) => Ok(()),
            Err(e) => Err(e),
        }
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

/// "5 days", "3 h", "40 min", "12 s".
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 3_600 => format!("{} h", s / 3_600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}
