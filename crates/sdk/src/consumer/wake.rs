//! When to look at the inbox: the SSE wake-up stream while it is up, adaptive
//! polling while it is down.
//!
//! [`Waker`] keeps one subscription open in a task of its own and reconnects by
//! itself (decorrelated jitter, 1 s to 30 s). Each `inbox_updated` wakes the reader.
//! A silence longer than the heartbeat timeout counts as a dead connection, and so
//! does a subscribe not answered within it. While
//! the stream is down, [`PollSchedule`] spaces the reader's polls: about
//! `min_poll` after activity, doubling while idle, up to `max_poll`, each wait
//! jittered ±20 % so a fleet does not poll in lockstep. While the stream is up the
//! reader still looks every `max_poll`, a safety net for a wake-up lost in a
//! reconnect (the reader also looks right after every reconnect).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::proto::EffectiveClientSettings;
use crate::retry::{DecorrelatedJitter, uniform_random};
use crate::{Client, SseEvent};

/// How the reader learns about new events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Mode {
    /// Not connected yet.
    Starting,
    /// The SSE stream is up: woken on every commit.
    Sse,
    /// The stream is down (or off): polling every `interval_ms`.
    Polling { interval_ms: u64 },
    /// The consumer has stopped.
    Stopped,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Starting => f.write_str("starting"),
            Self::Sse => f.write_str("SSE"),
            Self::Stopped => f.write_str("stopped"),
            Self::Polling { interval_ms } => {
                write!(f, "polling every {:.1} s", *interval_ms as f64 / 1000.0)
            }
        }
    }
}

/// Adaptive polling intervals.
#[derive(Debug, Clone)]
pub(crate) struct PollSchedule {
    /// The consumer's own bounds (its config).
    own_min: Duration,
    own_max: Duration,
    /// The bounds in force: the own ones, or the server's polling ceiling.
    min: Duration,
    max: Duration,
    current: Duration,
}

impl PollSchedule {
    pub(crate) fn new(min: Duration, max: Duration) -> Self {
        let min = min.max(Duration::from_millis(10));
        let max = max.max(min);
        Self {
            own_min: min,
            own_max: max,
            min,
            max,
            current: min,
        }
    }

    /// Obeys the server's polling ceiling (remote client settings), or the own
    /// bounds again for `None`. A ceiling below the own minimum lowers it too.
    pub(crate) fn obey(&mut self, ceiling: Option<Duration>) {
        self.max = ceiling
            .unwrap_or(self.own_max)
            .max(Duration::from_millis(10));
        self.min = self.own_min.min(self.max);
        self.current = self.current.clamp(self.min, self.max);
    }

    /// Something was found: poll again soon.
    pub(crate) fn activity(&mut self) {
        self.current = self.min;
    }

    /// Nothing was found: back off.
    pub(crate) fn idle(&mut self) {
        self.current = (self.current * 2).min(self.max);
    }

    /// The interval before jitter.
    pub(crate) fn interval(&self) -> Duration {
        self.current
    }

    /// The next wait: the interval ±20 %, never above `max`.
    pub(crate) fn next_wait(&self, uniform: f64) -> Duration {
        self.current
            .mul_f64(0.8 + 0.4 * uniform.clamp(0.0, 1.0))
            .min(self.max)
    }

    pub(crate) fn max(&self) -> Duration {
        self.max
    }

    pub(crate) fn min(&self) -> Duration {
        self.min
    }
}

/// The SSE side: a task that keeps the subscription open and wakes the reader.
pub(crate) struct Waker {
    pub(crate) wake: Arc<Notify>,
    pub(crate) connected: watch::Receiver<bool>,
}

impl Waker {
    /// Starts the subscription task for `agent`; it stops when `cancel` fires.
    /// `heartbeat_timeout` is the longest silence taken for a live connection.
    pub(crate) fn spawn(
        client: Client,
        agent: String,
        heartbeat_timeout: Duration,
        cancel: CancellationToken,
    ) -> Self {
        let wake = Arc::new(Notify::new());
        let (connected_tx, connected) = watch::channel(false);
        let task_wake = wake.clone();
        tokio::spawn(async move {
            let mut backoff =
                DecorrelatedJitter::new(Duration::from_secs(1), Duration::from_secs(30));
            while !cancel.is_cancelled() {
                // The answer's head must come within the heartbeat timeout too: a
                // subscribe lost in a dead network (no RST) would otherwise wait
                // forever (a stream has no request timeout), and the reader would
                // poll on after the network healed, never back on SSE.
                let subscribed = tokio::select! {
                    () = cancel.cancelled() => break,
                    s = tokio::time::timeout(heartbeat_timeout, client.subscribe(&agent)) => s,
                };
                let mut retry = None;
                let subscribed = match subscribed {
                    Ok(subscribed) => subscribed,
                    Err(_) => {
                        tracing::debug!("no answer to the subscribe within the heartbeat timeout");
                        let delay = backoff.next_delay();
                        tokio::select! {
                            () = cancel.cancelled() => break,
                            () = tokio::time::sleep(delay) => {}
                        }
                        continue;
                    }
                };
                match subscribed {
                    Ok(mut stream) => {
                        connected_tx.send_replace(true);
                        backoff = DecorrelatedJitter::new(
                            Duration::from_secs(1),
                            Duration::from_secs(30),
                        );
                        // Wake-ups sent while we were away are lost: look now.
                        task_wake.notify_one();
                        loop {
                            let next = tokio::select! {
                                () = cancel.cancelled() => break,
                                next = tokio::time::timeout(heartbeat_timeout, stream.next()) => next,
                            };
                            match next {
                                Ok(Some(Ok(event))) => {
                                    if event.event == SseEvent::INBOX_UPDATED {
                                        task_wake.notify_one();
                                    }
                                }
                                Ok(Some(Err(error))) => {
                                    tracing::debug!(%error, "wake-up stream failed; reconnecting");
                                    break;
                                }
                                Ok(None) => break,
                                Err(_) => {
                                    tracing::debug!(
                                        "wake-up stream silent past the heartbeat; reconnecting"
                                    );
                                    break;
                                }
                            }
                        }
                        retry = stream.retry();
                        connected_tx.send_replace(false);
                    }
                    Err(error) => {
                        tracing::debug!(%error, "cannot subscribe; polling meanwhile");
                    }
                }
                let delay = retry.unwrap_or_default().max(backoff.next_delay());
                tokio::select! {
                    () = cancel.cancelled() => break,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            connected_tx.send_replace(false);
        });
        Self { wake, connected }
    }

    /// [`Waker::spawn`] when `sse` is on, else `None` (polling only).
    pub(crate) fn start(
        sse: bool,
        client: &Client,
        agent: &str,
        heartbeat_timeout: Duration,
        stop: &CancellationToken,
    ) -> Option<Self> {
        sse.then(|| {
            Self::spawn(
                client.clone(),
                agent.to_owned(),
                heartbeat_timeout,
                stop.clone(),
            )
        })
    }
}

/// The mode a wait starting now runs in, for the consumer's status (which says what
/// it does while it waits, not what it did before).
pub(crate) fn mode(waker: Option<&Waker>, schedule: &PollSchedule) -> Mode {
    mode_of(waker.is_some_and(|w| *w.connected.borrow()), schedule)
}

fn mode_of(connected: bool, schedule: &PollSchedule) -> Mode {
    if connected {
        Mode::Sse
    } else {
        Mode::Polling {
            interval_ms: u64::try_from(schedule.interval().as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Waits for whichever comes first: a wake-up, the schedule's next poll (or the
/// safety-net interval while SSE is up), `due` (when the server said a waiting
/// event becomes available), or cancellation. Returns the mode it waited in.
///
/// A change of the remote client settings (`settings`) ends the wait too, so a new
/// polling ceiling takes effect at once rather than after the old one.
pub(crate) async fn wait(
    waker: Option<&Waker>,
    schedule: &PollSchedule,
    due: Option<time::OffsetDateTime>,
    settings: &mut watch::Receiver<EffectiveClientSettings>,
    cancel: &CancellationToken,
) -> Mode {
    // The connection state, taken as seen: `changed` below then fires only on a
    // later change. (A clone of the receiver that was never marked seen took the
    // first connect as a change on every call: an SSE consumer claimed in a busy
    // loop instead of waiting for a wake-up.)
    let mut connected_changed = waker.map(|w| w.connected.clone());
    let connected = connected_changed
        .as_mut()
        .is_some_and(|rx| *rx.borrow_and_update());
    let mode = mode_of(connected, schedule);
    let wait = if connected {
        schedule.max()
    } else {
        schedule.next_wait(uniform_random())
    };
    // Not past the moment the server said the next waiting event becomes available,
    // but not sooner than the shortest poll either: with a clock ahead of the
    // server's, the moment looks past while the server still says "not yet".
    let wait = match due {
        Some(due) => wait.min(
            Duration::try_from(due - time::OffsetDateTime::now_utc())
                .unwrap_or(Duration::ZERO)
                .max(schedule.min()),
        ),
        None => wait,
    };
    let woken = async {
        match waker {
            Some(waker) => waker.wake.notified().await,
            None => std::future::pending().await,
        }
    };
    let reconnected = async {
        match connected_changed.as_mut() {
            Some(rx) => {
                let _ = rx.changed().await;
            }
            None => std::future::pending().await,
        }
    };
    let resettled = async {
        if settings.changed().await.is_err() {
            // The client is gone; nothing will change any more.
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = cancel.cancelled() => {}
        () = woken => {}
        () = reconnected => {}
        () = resettled => {}
        () = tokio::time::sleep(wait) => {}
    }
    mode
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected waker with nothing to say keeps the reader waiting (the SSE
    /// safety-net interval), and a change of connection wakes it.
    #[tokio::test]
    async fn a_connected_stream_waits_for_a_wake_up() {
        let (tx, connected) = watch::channel(false);
        tx.send_replace(true);
        let waker = Waker {
            wake: Arc::new(Notify::new()),
            connected,
        };
        let schedule = PollSchedule::new(Duration::from_secs(1), Duration::from_secs(300));
        let cancel = CancellationToken::new();
        let (_settings_tx, mut settings) = watch::channel(EffectiveClientSettings::default());
        for _ in 0..3 {
            let waited = tokio::time::timeout(
                Duration::from_millis(200),
                wait(Some(&waker), &schedule, None, &mut settings, &cancel),
            )
            .await;
            assert!(waited.is_err(), "returned at once: {waited:?}");
        }
        let dropped = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send_replace(false);
            tx
        });
        let mode = tokio::time::timeout(
            Duration::from_secs(5),
            wait(Some(&waker), &schedule, None, &mut settings, &cancel),
        )
        .await
        .expect("a lost connection ends the wait");
        assert_eq!(mode, Mode::Sse, "it waited as connected");
        let _tx = dropped.await.expect("task");
        assert!(!*waker.connected.borrow());
        waker.wake.notify_one();
        let mode = tokio::time::timeout(
            Duration::from_secs(5),
            wait(Some(&waker), &schedule, None, &mut settings, &cancel),
        )
        .await
        .expect("a wake-up ends the wait");
        assert!(matches!(mode, Mode::Polling { .. }), "{mode:?}");
    }

    #[test]
    fn polling_starts_near_the_minimum_and_backs_off_to_the_ceiling() {
        let mut schedule = PollSchedule::new(Duration::from_secs(1), Duration::from_secs(300));
        assert_eq!(schedule.interval(), Duration::from_secs(1));
        let mut last = Duration::ZERO;
        for _ in 0..20 {
            schedule.idle();
            assert!(schedule.interval() >= last);
            last = schedule.interval();
        }
        assert_eq!(schedule.interval(), Duration::from_secs(300));
        assert_eq!(
            schedule.next_wait(1.0),
            Duration::from_secs(300),
            "never above max"
        );
        assert_eq!(schedule.next_wait(0.0), Duration::from_secs(240));
        schedule.activity();
        assert_eq!(schedule.interval(), Duration::from_secs(1));
        let wait = schedule.next_wait(0.5);
        assert_eq!(wait, Duration::from_secs(1));
        assert_eq!(schedule.next_wait(0.0), Duration::from_millis(800));
        assert_eq!(schedule.next_wait(1.0), Duration::from_millis(1200));
    }

    /// The server's polling ceiling replaces the own maximum (and lowers the
    /// minimum under it); `None` restores the own bounds.
    #[test]
    fn a_remote_ceiling_bounds_the_schedule() {
        let mut schedule = PollSchedule::new(Duration::from_secs(5), Duration::from_secs(300));
        for _ in 0..20 {
            schedule.idle();
        }
        schedule.obey(Some(Duration::from_secs(2)));
        assert_eq!(
            schedule.interval(),
            Duration::from_secs(2),
            "cut to the ceiling"
        );
        assert_eq!(schedule.max(), Duration::from_secs(2));
        assert_eq!(
            schedule.min(),
            Duration::from_secs(2),
            "the minimum follows it down"
        );
        assert!(schedule.next_wait(1.0) <= Duration::from_secs(2));
        schedule.obey(Some(Duration::from_secs(3600)));
        assert_eq!(
            schedule.min(),
            Duration::from_secs(5),
            "the own minimum again"
        );
        for _ in 0..20 {
            schedule.idle();
        }
        assert_eq!(
            schedule.interval(),
            Duration::from_secs(3600),
            "a raised ceiling"
        );
        schedule.obey(None);
        assert_eq!(
            (schedule.min(), schedule.max(), schedule.interval()),
            (
                Duration::from_secs(5),
                Duration::from_secs(300),
                Duration::from_secs(300)
            )
        );
    }

    /// A change of the settings ends a wait that would otherwise last the old
    /// ceiling.
    #[tokio::test]
    async fn a_settings_change_ends_the_wait() {
        let schedule = PollSchedule::new(Duration::from_secs(300), Duration::from_secs(300));
        let (tx, mut settings) = watch::channel(EffectiveClientSettings::default());
        let cancel = CancellationToken::new();
        let waited = tokio::time::timeout(
            Duration::from_millis(200),
            wait(None, &schedule, None, &mut settings, &cancel),
        )
        .await;
        assert!(waited.is_err(), "returned at once: {waited:?}");
        let changer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tx.send_replace(EffectiveClientSettings {
                poll_ceiling_ms: Some(1000),
                reports_paused: false,
            });
            tx
        });
        tokio::time::timeout(
            Duration::from_secs(5),
            wait(None, &schedule, None, &mut settings, &cancel),
        )
        .await
        .expect("the change ends the wait");
        let _tx = changer.await.expect("task");
    }

    #[test]
    fn mode_reads_well() {
        assert_eq!(
            Mode::Polling { interval_ms: 8000 }.to_string(),
            "polling every 8.0 s"
        );
        assert_eq!(Mode::Sse.to_string(), "SSE");
    }
}
