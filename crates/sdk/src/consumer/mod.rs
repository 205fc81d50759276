//! The inbox consumer: claims events, hands each to a [`Handler`], and acks,
//! releases or quarantines it, with local dedup so an event is handled once.
//!
//! # The loop
//!
//! [`Consumer::run`] claims up to [`ConsumerConfig::batch`] events at a time,
//! whenever the SSE wake-up stream says the inbox changed, or on an adaptive poll
//! while the stream is down (see [`Mode`]). Claims go until the inbox has nothing
//! claimable; events of equal priority come in sequence order.
//!
//! # One event
//!
//! Local states, in the agent's state file: `delivered` (claimed) → `read` (the
//! handler started) → `handled` (it returned [`Outcome::Ack`]; committed before the
//! ack is sent) → `acked`. An event that comes back (the lease expired after a
//! crash between handling and acking, or the ack was lost) and is already
//! `handled` or `acked` is acked again **without** running the handler: that is the
//! dedup. The table is bounded by age ([`ConsumerConfig::dedup_ttl`]) and size.
//!
//! Acks ride with the next claim: once a batch's events are handled, one
//! `POST …/inbox/ack` with a `claim` acks them and claims the next batch in one
//! server transaction (one commit for both). An ack waits no longer than half a
//! lease: before a handler starts, acks whose leases are past half are sent alone;
//! so are the last ones when the consumer stops.
//!
//! While a handler runs, its lease is extended before it expires (at half the time
//! left), so long handlers keep their claim. The handler's [`Outcome`]:
//! - `Ack`: done.
//! - `RetryLater`: released, pending again after the given delay or a backoff.
//! - `Failed`: counts a local failure, and released with a backoff. The
//!   [`ConsumerConfig::max_local_failures`]th failure (3) quarantines the event
//!   locally and releases it as a terminal failure, so the server quarantines it at
//!   once: no crash loop. A panicking handler counts as a failure.
//! - `Poison`: quarantined at once, the same way.
//!
//! # Shutdown
//!
//! With [`ConsumerConfig::stop_when_idle`], `run` also returns (after sending the
//! waiting acks) once a claim finds nothing claimable.
//!
//! Cancelling the token stops claiming: the handler in flight finishes and its
//! outcome is applied (acked), and events claimed but not started are released
//! at once for another consumer.

mod follow;
mod seen;
mod types;
mod wake;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use switchboard_proto::{
    AckEntry, AckResult, ClaimRequest, ClaimResponse, ClaimedEvent, ErrorCode, ExtendRequest,
    InboxEvent, ReleaseRequest,
};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::local::{LocalDb, LocalError, clip};
use crate::retry::{DecorrelatedJitter, is_transient, uniform_random};
use crate::{Client, Error};

pub use follow::{Follower, FollowerConfig};
pub use seen::local_poison;
pub use types::{
    ConsumerConfig, ConsumerError, ConsumerStatus, Delivery, Handler, LocalPoison, Outcome,
};
pub use wake::Mode;
use wake::{PollSchedule, Waker};

/// See [`Consumer::crash_after_handled`].
type CrashSeam = Arc<dyn Fn(&InboxEvent) -> bool + Send + Sync>;

/// The inbox consumer of one agent.
pub struct Consumer {
    client: Client,
    agent: String,
    db: LocalDb,
    config: ConsumerConfig,
    status: watch::Sender<ConsumerStatus>,
    /// The attempt id of a claim that got no answer: the next claim sends it again,
    /// so that if the lost one took events, the server returns those (in order)
    /// instead of leasing more.
    unanswered_claim: std::sync::Mutex<Option<uuid::Uuid>>,
    /// When the last claim that found nothing said the next waiting event becomes
    /// available (a scheduled message, a release with a delay): no wake-up marks
    /// that moment, so the reader claims again then.
    next_due: std::sync::Mutex<Option<time::OffsetDateTime>>,
    /// Handled events whose acks wait for the next claim (or a flush), with their
    /// local failure counts.
    pending_acks: std::sync::Mutex<Vec<(ClaimedEvent, u32)>>,
    /// Test seam: simulate a crash right after an event is marked handled.
    crash_after_handled: Option<CrashSeam>,
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("agent", &self.agent)
            .field("db", &self.db.path())
            .finish_non_exhaustive()
    }
}

/// Where the claimed-events loop ended.
enum Drained {
    /// Nothing more is claimable; this many events were processed.
    Empty(usize),
    /// Cancelled (claims not started were released).
    Cancelled,
    /// A simulated crash (test seam).
    Crashed,
}

impl Consumer {
    /// A consumer of `agent`'s inbox (name or id), keeping its state in `db`.
    pub fn new(
        client: Client,
        agent: impl Into<String>,
        db: LocalDb,
        config: ConsumerConfig,
    ) -> Self {
        let (status, _) = watch::channel(ConsumerStatus {
            mode: Mode::Starting,
            handled: 0,
            acked: 0,
            deduplicated: 0,
            claims: 0,
            poisoned: 0,
            settled: 0,
            last_error: None,
        });
        Self {
            client,
            agent: agent.into(),
            db,
            config,
            status,
            unanswered_claim: std::sync::Mutex::default(),
            next_due: std::sync::Mutex::default(),
            pending_acks: std::sync::Mutex::default(),
            crash_after_handled: None,
        }
    }

    /// Test seam: when `crash` returns true for an event just marked handled, `run`
    /// returns at once without acking it, as if the process had died there.
    #[doc(hidden)]
    pub fn crash_after_handled(
        mut self,
        crash: impl Fn(&InboxEvent) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.crash_after_handled = Some(Arc::new(crash));
        self
    }

    /// Watches the consumer's status.
    pub fn status(&self) -> watch::Receiver<ConsumerStatus> {
        self.status.subscribe()
    }

    /// The name the consumer publishes its mode under in the state file.
    pub fn mode_key(agent: &str) -> String {
        format!("mode:{agent}")
    }

    /// Runs until `cancel` fires (then finishes the event in flight and releases
    /// the rest) or the server refuses the consumer for good.
    pub async fn run<H: Handler>(
        &self,
        handler: H,
        cancel: CancellationToken,
    ) -> Result<(), ConsumerError> {
        let handler = Arc::new(handler);
        let stop_waker = cancel.child_token();
        let waker = Waker::start(
            self.config.sse,
            &self.client,
            &self.agent,
            self.config.heartbeat_timeout,
            &stop_waker,
        );
        let mut schedule = PollSchedule::new(self.config.min_poll, self.config.max_poll);
        let mut settings = self.client.watch_client_settings();
        let mut crashed = false;
        let result = loop {
            if cancel.is_cancelled() {
                break Ok(());
            }
            // The polling ceiling the server last sent (remote client settings).
            let ceiling = settings.borrow_and_update().poll_ceiling_ms;
            schedule.obey(ceiling.map(Duration::from_millis));
            self.prune().await?;
            match self.drain(&handler, &cancel).await {
                Ok(Drained::Empty(_)) if self.config.stop_when_idle => break Ok(()),
                Ok(Drained::Empty(0)) => schedule.idle(),
                Ok(Drained::Empty(_)) => schedule.activity(),
                Ok(Drained::Cancelled) => break Ok(()),
                Ok(Drained::Crashed) => {
                    crashed = true;
                    break Ok(());
                }
                Err(DrainError::Local(e)) => break Err(e.into()),
                Err(DrainError::Server(error)) if is_fatal(&error) => {
                    break Err(ConsumerError::Refused(error));
                }
                Err(DrainError::Server(error)) => {
                    tracing::debug!(%error, "claiming failed; trying again later");
                    self.status
                        .send_modify(|s| s.last_error = Some(error.to_string()));
                    schedule.idle();
                }
            }
            let due = *self.next_due.lock().unwrap_or_else(|e| e.into_inner());
            // The status says how it waits now (a poll interval the operator's
            // ceiling just cut shows at once, not after the longer wait it replaced).
            self.set_mode(wake::mode(waker.as_ref(), &schedule)).await;
            let mode = wake::wait(waker.as_ref(), &schedule, due, &mut settings, &cancel).await;
            self.set_mode(mode).await;
        };
        stop_waker.cancel();
        if !crashed {
            self.flush_acks().await;
        }
        self.set_mode(Mode::Stopped).await;
        result
    }

    async fn set_mode(&self, mode: Mode) {
        let changed = self.status.borrow().mode != mode;
        self.status.send_modify(|s| s.mode = mode);
        if changed {
            let value = serde_json::to_string(&mode).unwrap_or_default();
            if let Err(error) = self.db.publish(&Self::mode_key(&self.agent), &value).await {
                tracing::warn!(%error, "cannot publish the consumer's mode");
            }
        }
    }

    /// Claims and processes until nothing is claimable.
    async fn drain<H: Handler>(
        &self,
        handler: &Arc<H>,
        cancel: &CancellationToken,
    ) -> Result<Drained, DrainError> {
        let mut processed = 0;
        // Stopped while a batch was handled: no next claim (its events, released at
        // once, would each have spent an attempt).
        while !cancel.is_cancelled() {
            let attempt = *self
                .unanswered_claim
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert_with(uuid::Uuid::new_v4);
            let request = ClaimRequest {
                limit: Some(self.config.batch.max(1)),
                lease_seconds: Some(
                    u32::try_from(self.config.lease.as_secs())
                        .unwrap_or(u32::MAX)
                        .max(1),
                ),
                attempt_id: Some(attempt),
            };
            self.status.send_modify(|s| s.claims += 1);
            let answer = self.claim(&request).await;
            // An answered claim frees its attempt id; after any failure the next
            // claim asks again with it (harmless if the failed one took nothing:
            // it then claims afresh).
            if answer.is_ok() {
                *self
                    .unanswered_claim
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = None;
            }
            let answer = answer?;
            let claimed = answer.events;
            if claimed.is_empty() {
                *self.next_due.lock().unwrap_or_else(|e| e.into_inner()) = answer.next_available_at;
                return Ok(Drained::Empty(processed));
            }
            self.status.send_modify(|s| s.last_error = None);
            if let Some(max_seq) = claimed.iter().map(|c| c.event.seq).max() {
                self.db
                    .save_cursor(&format!("claimed:{}", self.agent), max_seq)
                    .await?;
            }
            let mut claimed = claimed.into_iter();
            while let Some(event) = claimed.next() {
                if cancel.is_cancelled() {
                    for not_started in std::iter::once(event).chain(claimed) {
                        self.release(&not_started, Some(0), None, false).await;
                    }
                    self.flush_acks().await;
                    return Ok(Drained::Cancelled);
                }
                self.flush_due_acks().await;
                if !self.process(handler, event).await? {
                    return Ok(Drained::Crashed);
                }
                processed += 1;
            }
        }
        Ok(Drained::Cancelled)
    }

    /// Processes one claimed event; `false` when the crash seam fired.
    async fn process<H: Handler>(
        &self,
        handler: &Arc<H>,
        claimed: ClaimedEvent,
    ) -> Result<bool, DrainError> {
        let event_id = claimed.event.event_id;
        let seen = self.seen(event_id).await?;
        match seen.as_ref().map(|s| s.state.as_str()) {
            Some("handled" | "acked") => {
                let failures = seen.map_or(0, |s| s.failures);
                self.defer_ack(claimed, failures);
                self.status.send_modify(|s| s.deduplicated += 1);
                return Ok(true);
            }
            Some("poisoned") => {
                let reason = seen
                    .and_then(|s| s.last_error)
                    .unwrap_or_else(|| "quarantined locally".into());
                self.release(&claimed, None, Some(reason), true).await;
                return Ok(true);
            }
            _ => {}
        }
        let failures = seen.map_or(0, |s| s.failures);
        self.mark(&claimed.event, "read", failures, None).await?;
        let delivery = Delivery {
            event: claimed.event.clone(),
            lease_expires_at: claimed.lease_expires_at,
            local_failures: failures,
        };
        let outcome = self.run_handler(handler, delivery, &claimed).await;
        match outcome {
            Outcome::Ack => {
                self.mark(&claimed.event, "handled", failures, None).await?;
                self.status.send_modify(|s| s.handled += 1);
                if self
                    .crash_after_handled
                    .as_ref()
                    .is_some_and(|crash| crash(&claimed.event))
                {
                    return Ok(false);
                }
                self.defer_ack(claimed, failures);
            }
            Outcome::RetryLater(after) => {
                self.mark(&claimed.event, "delivered", failures, None)
                    .await?;
                let delay = after.unwrap_or_else(|| self.backoff(claimed.event.attempts));
                self.release(&claimed, Some(delay.as_secs()), None, false)
                    .await;
            }
            Outcome::Failed(reason) => {
                let failures = failures + 1;
                if failures >= self.config.max_local_failures {
                    let reason = format!("failed {failures} times locally; last: {reason}");
                    self.poison(&claimed, failures, reason).await?;
                } else {
                    self.mark(&claimed.event, "delivered", failures, Some(&reason))
                        .await?;
                    let delay = self.backoff(failures);
                    self.release(&claimed, Some(delay.as_secs()), Some(reason), false)
                        .await;
                }
            }
            Outcome::Poison(reason) => self.poison(&claimed, failures, reason).await?,
        }
        self.status.send_modify(|s| s.settled += 1);
        Ok(true)
    }

    /// Runs the handler in a task of its own (a panic is a failure, not the end of
    /// the consumer), extending the lease at half the time left until it returns.
    async fn run_handler<H: Handler>(
        &self,
        handler: &Arc<H>,
        delivery: Delivery,
        claimed: &ClaimedEvent,
    ) -> Outcome {
        let handler = handler.clone();
        let mut task = tokio::spawn(async move { handler.handle(delivery).await });
        let mut expires_at = claimed.lease_expires_at;
        loop {
            let left = expires_at - OffsetDateTime::now_utc();
            let half = Duration::try_from(left / 2)
                .unwrap_or_default()
                .max(Duration::from_millis(100));
            tokio::select! {
                joined = &mut task => {
                    return match joined {
                        Ok(outcome) => outcome,
                        Err(error) if error.is_panic() => Outcome::Failed("the handler panicked".into()),
                        Err(_) => Outcome::Failed("the handler was cancelled".into()),
                    };
                }
                () = tokio::time::sleep(half) => {
                    let request = ExtendRequest {
                        claim_token: claimed.claim_token,
                        lease_seconds: Some(u32::try_from(self.config.lease.as_secs()).unwrap_or(u32::MAX).max(1)),
                    };
                    match self.client.extend(&self.agent, claimed.event.event_id, &request).await {
                        Ok(state) => {
                            if let Some(until) = state.lease_expires_at {
                                expires_at = until;
                            }
                        }
                        Err(error) => {
                            tracing::warn!(%error, "cannot extend the lease; the event may be handled elsewhere");
                            // Stop trying; the ack will tell.
                            expires_at = OffsetDateTime::now_utc() + time::Duration::days(365);
                        }
                    }
                }
            }
        }
    }

    async fn poison(
        &self,
        claimed: &ClaimedEvent,
        failures: u32,
        reason: String,
    ) -> Result<(), DrainError> {
        tracing::warn!(event = %claimed.event.event_id, %reason, "event quarantined locally");
        self.mark(&claimed.event, "poisoned", failures, Some(&reason))
            .await?;
        self.status.send_modify(|s| s.poisoned += 1);
        self.release(claimed, None, Some(reason), true).await;
        Ok(())
    }

    /// Claims; with acks waiting, acks them in the same call (one transaction on the
    /// server). They stay waiting if the call fails (acks are safe to repeat).
    async fn claim(&self, request: &ClaimRequest) -> Result<ClaimResponse, Error> {
        let waiting = self.waiting_acks();
        if waiting.is_empty() {
            return self.client.claim(&self.agent, request).await;
        }
        let entries: Vec<AckEntry> = waiting.iter().map(|(c, _)| entry(c)).collect();
        let answer = self
            .client
            .ack_and_claim(&self.agent, &entries, request)
            .await?;
        self.take_acks(waiting.len());
        self.settle_acks(&waiting, &answer.results).await;
        Ok(answer.claimed.unwrap_or(ClaimResponse {
            events: Vec::new(),
            next_available_at: None,
        }))
    }

    /// Leaves `claimed`'s ack for the next claim.
    fn defer_ack(&self, claimed: ClaimedEvent, failures: u32) {
        self.pending_acks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((claimed, failures));
    }

    fn waiting_acks(&self) -> Vec<(ClaimedEvent, u32)> {
        self.pending_acks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn take_acks(&self, n: usize) {
        let mut pending = self.pending_acks.lock().unwrap_or_else(|e| e.into_inner());
        let n = n.min(pending.len());
        pending.drain(..n);
    }

    /// Sends the waiting acks alone when the first of them has used half its lease
    /// (a handler about to run may take long), or when 100 wait.
    async fn flush_due_acks(&self) {
        let half = time::Duration::try_from(self.config.lease / 2).unwrap_or_default();
        let due = {
            let pending = self.pending_acks.lock().unwrap_or_else(|e| e.into_inner());
            pending.len() >= 100
                || pending
                    .iter()
                    .any(|(c, _)| c.lease_expires_at - OffsetDateTime::now_utc() < half)
        };
        if due {
            self.flush_acks().await;
        }
    }

    /// Sends the waiting acks in one batch. A failure is logged: the events come
    /// back after their leases and are then acked by dedup.
    async fn flush_acks(&self) {
        let waiting = self.waiting_acks();
        if waiting.is_empty() {
            return;
        }
        self.take_acks(waiting.len());
        for chunk in waiting.chunks(100) {
            let entries: Vec<AckEntry> = chunk.iter().map(|(c, _)| entry(c)).collect();
            match self.client.ack_batch(&self.agent, &entries).await {
                Ok(answer) => self.settle_acks(chunk, &answer.results).await,
                Err(error) => {
                    tracing::warn!(%error, "acks failed; they will be acked on redelivery");
                }
            }
        }
    }

    /// Marks the confirmed acks locally; a refused one is logged (its event comes
    /// back, and dedup acks it then).
    async fn settle_acks(&self, sent: &[(ClaimedEvent, u32)], results: &[AckResult]) {
        for ((claimed, failures), result) in sent.iter().zip(results) {
            if result.state.is_some() {
                self.status.send_modify(|s| s.acked += 1);
                if let Err(error) = self.mark(&claimed.event, "acked", *failures, None).await {
                    tracing::warn!(%error, "cannot mark an acked event");
                }
            } else {
                let problem = result.problem.as_ref().and_then(|p| p.detail.clone());
                tracing::warn!(event = %claimed.event.event_id, ?problem, "ack refused; it will be acked on redelivery");
            }
        }
    }

    async fn release(
        &self,
        claimed: &ClaimedEvent,
        delay_seconds: Option<u64>,
        error: Option<String>,
        terminal: bool,
    ) {
        let request = ReleaseRequest {
            claim_token: claimed.claim_token,
            delay_seconds: delay_seconds.map(|d| u32::try_from(d).unwrap_or(u32::MAX)),
            error: error.map(|e| clip(&e, 1000)),
            terminal,
        };
        if let Err(error) = self
            .client
            .release(&self.agent, claimed.event.event_id, &request)
            .await
        {
            tracing::warn!(%error, event = %claimed.event.event_id, "release failed; the lease will expire instead");
        }
    }

    /// A release delay after `n` failures: decorrelated jitter grown `n` times.
    fn backoff(&self, n: u32) -> Duration {
        let mut jitter = DecorrelatedJitter::with_uniform(
            self.config.retry_base,
            self.config.retry_cap,
            uniform_random,
        );
        let mut delay = self.config.retry_base;
        for _ in 0..n.clamp(1, 16) {
            delay = jitter.next_delay();
        }
        delay
    }
}

fn entry(claimed: &ClaimedEvent) -> AckEntry {
    AckEntry {
        event_id: claimed.event.event_id,
        claim_token: claimed.claim_token,
    }
}

enum DrainError {
    Server(Error),
    Local(LocalError),
}

impl From<Error> for DrainError {
    fn from(error: Error) -> Self {
        Self::Server(error)
    }
}

impl From<LocalError> for DrainError {
    fn from(error: LocalError) -> Self {
        Self::Local(error)
    }
}

/// A refusal no retry fixes: unknown agent, bad token, missing scope.
fn is_fatal(error: &Error) -> bool {
    !is_transient(error)
        && matches!(
            error.code(),
            Some(ErrorCode::NotFound | ErrorCode::Unauthorized | ErrorCode::Forbidden)
        )
}
