//! [`Follower`]: reads an inbox by cursor without claiming (what `switchboard agent
//! tail` does), saving the cursor after each page so a restart goes on where it
//! stopped.
//!
//! A cursor below the server's retention low-water mark gets `410 cursor_gone`:
//! the follower fetches the snapshot, calls the resync hook with it (the caller
//! rebuilds whatever it derived from the events it missed), moves the cursor to the
//! snapshot's `resume_cursor` and reads on.

use std::time::Duration;

use switchboard_proto::{ErrorCode, InboxEvent, Snapshot};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::wake::{self, Mode, PollSchedule, Waker};
use super::{ConsumerError, is_fatal};
use crate::local::LocalDb;
use crate::{Client, Error};

/// Follower settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FollowerConfig {
    /// Events per page (100).
    pub page: u32,
    /// Subscribe to wake-ups (true).
    pub sse: bool,
    /// See [`super::ConsumerConfig::heartbeat_timeout`].
    pub heartbeat_timeout: Duration,
    /// Polling after activity (1 s)…
    pub min_poll: Duration,
    /// …up to (5 min).
    pub max_poll: Duration,
}

impl Default for FollowerConfig {
    fn default() -> Self {
        Self {
            page: 100,
            sse: true,
            heartbeat_timeout: Duration::from_secs(75),
            min_poll: Duration::from_secs(1),
            max_poll: Duration::from_secs(300),
        }
    }
}

/// Reads an agent's inbox in order, by cursor.
#[derive(Debug)]
pub struct Follower {
    client: Client,
    agent: String,
    db: LocalDb,
    cursor_name: String,
    config: FollowerConfig,
    /// How [`Follower::run`] learns of new events now, for whoever reports it (an
    /// MCP session's client report).
    mode: watch::Sender<Mode>,
}

impl Follower {
    /// A follower of `agent` whose cursor is saved in `db` as `cursor_name`.
    pub fn new(
        client: Client,
        agent: impl Into<String>,
        db: LocalDb,
        cursor_name: impl Into<String>,
        config: FollowerConfig,
    ) -> Self {
        Self {
            client,
            agent: agent.into(),
            db,
            cursor_name: cursor_name.into(),
            config,
            mode: watch::channel(Mode::Starting).0,
        }
    }

    /// Watches how [`Follower::run`] learns of new events: the SSE stream, or
    /// polling (and how often), or stopped.
    pub fn mode(&self) -> watch::Receiver<Mode> {
        self.mode.subscribe()
    }

    /// The saved cursor (0 when none: from the start).
    pub async fn cursor(&self) -> Result<u64, ConsumerError> {
        Ok(self.db.cursor(&self.cursor_name).await?.unwrap_or(0))
    }

    /// Moves the saved cursor (to start elsewhere).
    pub async fn set_cursor(&self, cursor: u64) -> Result<(), ConsumerError> {
        Ok(self.db.save_cursor(&self.cursor_name, cursor).await?)
    }

    /// Reads every page there is now: `on_event` for each event in order, the
    /// cursor saved after each page, `on_resync` after a `410`. Returns the number
    /// of events read.
    pub async fn catch_up(
        &self,
        on_event: &mut (impl FnMut(&InboxEvent) + Send),
        on_resync: &mut (impl FnMut(&Snapshot) + Send),
    ) -> Result<usize, FollowError> {
        let mut read = 0;
        loop {
            let cursor = self.cursor().await?;
            let page = match self
                .client
                .poll(&self.agent, cursor, Some(self.config.page))
                .await
            {
                Ok(page) => page,
                Err(error) if error.code() == Some(ErrorCode::CursorGone) => {
                    let snapshot = self.client.snapshot(&self.agent).await?;
                    tracing::info!(
                        from = cursor,
                        to = snapshot.resume_cursor,
                        "cursor below retention; resyncing from the snapshot"
                    );
                    on_resync(&snapshot);
                    self.set_cursor(snapshot.resume_cursor).await?;
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            for event in &page.events {
                on_event(event);
            }
            read += page.events.len();
            if page.next_cursor != cursor {
                self.set_cursor(page.next_cursor).await?;
            }
            if !page.has_more {
                return Ok(read);
            }
        }
    }

    /// Follows until `cancel` fires: [`Follower::catch_up`] on every wake-up, or on
    /// an adaptive poll while the stream is down.
    pub async fn run(
        &self,
        mut on_event: impl FnMut(&InboxEvent) + Send,
        mut on_resync: impl FnMut(&Snapshot) + Send,
        cancel: CancellationToken,
    ) -> Result<(), ConsumerError> {
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
        let result = loop {
            if cancel.is_cancelled() {
                break Ok(());
            }
            // The polling ceiling the server last sent (remote client settings).
            let ceiling = settings.borrow_and_update().poll_ceiling_ms;
            schedule.obey(ceiling.map(Duration::from_millis));
            match self.catch_up(&mut on_event, &mut on_resync).await {
                Ok(0) => schedule.idle(),
                Ok(_) => schedule.activity(),
                Err(FollowError::Local(e)) => break Err(e),
                Err(FollowError::Server(error)) if is_fatal(&error) => {
                    break Err(ConsumerError::Refused(error));
                }
                Err(FollowError::Server(error)) => {
                    tracing::debug!(%error, "reading the inbox failed; trying again later");
                    schedule.idle();
                }
            }
            self.mode
                .send_replace(wake::mode(waker.as_ref(), &schedule));
            wake::wait(waker.as_ref(), &schedule, None, &mut settings, &cancel).await;
        };
        stop_waker.cancel();
        self.mode.send_replace(Mode::Stopped);
        result
    }
}

/// Why a catch-up stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Server(#[from] Error),
    #[error(transparent)]
    Local(#[from] ConsumerError),
}
