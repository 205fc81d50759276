//! Server-sent events: [`SseEvent`] and the [`SseStream`] of them.
//!
//! Parsing is done by the `eventsource-stream` crate (the WHATWG algorithm); this
//! module maps its events and errors to ours and gives Switchboard's events types.
//!
//! Switchboard sends these events:
//! - `heartbeat` (data `{}`), every `heartbeat_seconds` (see capabilities): the
//!   connection is alive.
//! - `inbox_updated` (data `{"cursor_hint": N}`) on `/agents/{agent}/subscribe`, after
//!   a commit touched the inbox: poll or claim now. It carries no payload.
//! - `changed` (data [`OpsChange`]) on `/ops/stream`.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use eventsource_stream::{EventStream, EventStreamError};
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use switchboard_proto::{InboxUpdated, OpsChange};

use crate::Error;

mod text;

use text::TextDecoder;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type; `message` when the server named none.
    pub event: String,
    /// The data lines, joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream (ids persist across events); empty if
    /// none. Switchboard does not send ids today.
    pub id: String,
    /// The reconnection delay the server asked for in this event, if any.
    pub retry: Option<Duration>,
}

impl SseEvent {
    /// Event type of the keep-alive.
    pub const HEARTBEAT: &'static str = "heartbeat";
    /// Event type of the agent inbox wake-up.
    pub const INBOX_UPDATED: &'static str = "inbox_updated";
    /// Event type of the console's change notification.
    pub const CHANGED: &'static str = "changed";

    /// Whether this is a `heartbeat`.
    pub fn is_heartbeat(&self) -> bool {
        self.event == Self::HEARTBEAT
    }

    /// The data of an `inbox_updated` event; `None` for other events (or bad data).
    pub fn inbox_updated(&self) -> Option<InboxUpdated> {
        (self.event == Self::INBOX_UPDATED)
            .then(|| self.json().ok())
            .flatten()
    }

    /// The data of a `changed` event of the ops stream; `None` for other events.
    pub fn ops_change(&self) -> Option<OpsChange> {
        (self.event == Self::CHANGED)
            .then(|| self.json().ok())
            .flatten()
    }

    /// The data parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.data)
            .map_err(|e| Error::Decode(format!("{} event data: {e}", self.event)))
    }
}

impl From<eventsource_stream::Event> for SseEvent {
    fn from(event: eventsource_stream::Event) -> Self {
        Self {
            event: event.event,
            data: event.data,
            id: event.id,
            retry: event.retry,
        }
    }
}

type BoxedEvents = Pin<Box<dyn Stream<Item = Result<SseEvent, Error>> + Send>>;

/// A stream of [`SseEvent`]s. It ends when the connection closes; an error item
/// (transport failure, bad UTF-8) means the connection is unusable: drop the stream
/// and reconnect.
pub struct SseStream {
    events: BoxedEvents,
    /// Kept so a reconnect can send `Last-Event-ID` and wait the asked delay.
    last_event_id: String,
    retry: Option<Duration>,
}

impl SseStream {
    /// Parses a `text/event-stream` byte stream (chunks may split lines and UTF-8
    /// sequences anywhere). Used by [`crate::Client::subscribe`]; public so any
    /// byte source can be read the same way.
    pub fn new<S, B, E>(bytes: S) -> Self
    where
        S: Stream<Item = Result<B, E>> + Send + 'static,
        B: AsRef<[u8]> + Send + 'static,
        E: Into<Error> + Send + 'static,
    {
        let events = EventStream::new(decode(bytes)).map(|item| match item {
            Ok(event) => Ok(SseEvent::from(event)),
            Err(EventStreamError::Transport(e)) => Err(e.into()),
            Err(EventStreamError::Utf8(e)) => {
                Err(Error::Decode(format!("event stream is not UTF-8: {e}")))
            }
            Err(EventStreamError::Parser(e)) => {
                Err(Error::Decode(format!("malformed event stream: {e}")))
            }
        });
        Self {
            events: Box::pin(events),
            last_event_id: String::new(),
            retry: None,
        }
    }

    /// The id of the last event received; empty if none.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The last reconnection delay the server asked for (`retry:`), if any.
    pub fn retry(&self) -> Option<Duration> {
        self.retry
    }
}

/// The bytes as text (see [`TextDecoder`]), one text chunk per byte chunk.
fn decode<S, B, E>(bytes: S) -> impl Stream<Item = Result<String, E>> + Send
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: Send + 'static,
{
    let state = (Box::pin(bytes), TextDecoder::default(), false);
    futures::stream::unfold(state, |(mut bytes, mut decoder, ended)| async move {
        if ended {
            return None;
        }
        let item = match bytes.next().await {
            Some(Ok(chunk)) => Ok(decoder.push(chunk.as_ref())),
            Some(Err(e)) => Err(e),
            None => {
                let rest = decoder.finish();
                return (!rest.is_empty()).then_some((Ok(rest), (bytes, decoder, true)));
            }
        };
        Some((item, (bytes, decoder, false)))
    })
}

impl std::fmt::Debug for SseStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseStream")
            .field("last_event_id", &self.last_event_id)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Stream for SseStream {
    type Item = Result<SseEvent, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        let item = this.events.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(event))) = &item {
            this.last_event_id.clone_from(&event.id);
            if event.retry.is_some() {
                this.retry = event.retry;
            }
        }
        item
    }
}

#[cfg(test)]
mod tests;
