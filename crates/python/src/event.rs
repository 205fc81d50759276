//! [`Event`], what a `run()` handler or an `events()` stream hands out, and the
//! bridge that calls a Python handler for the SDK's consumer.
//!
//! An event from `events()` carries a [`Settle`]: the way back to the consumer that
//! claimed it. `ack()`, `release()` and `quarantine()` send its outcome there, then
//! wait until the consumer has applied it (`ConsumerStatus::settled` moved).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use switchboard_sdk::consumer::{ConsumerStatus, Delivery, Outcome};
use switchboard_sdk::proto::Sender;
use tokio::sync::{oneshot, watch};

use crate::errors::consumer_stopped;
use crate::json::to_py;
use crate::wait::awaitable;

/// Where an `events()` event's outcome goes: the consumer's handler call waits on
/// the receiving end. The first of `ack`/`release`/`quarantine` (or the stream's
/// close) takes the sender; dropping it unused (the event object garbage
/// collected) releases the event at once.
pub(crate) type Slot = Arc<Outlet>;

/// The sender of one event's outcome, until it is used.
pub(crate) type Outlet = Mutex<Option<oneshot::Sender<Outcome>>>;

/// How an `events()` event reaches the consumer that claimed it.
pub(crate) struct Settle {
    /// The only strong reference: the stream keeps a weak one, so a dropped event
    /// drops its sender (and is released).
    pub(crate) slot: Slot,
    /// The consumer's status; the outcome is applied once `settled` passes `before`.
    pub(crate) status: watch::Receiver<ConsumerStatus>,
    /// `settled` when the consumer handed this event out.
    pub(crate) before: u64,
}

/// One inbox event, handed to a `run()` handler or by an `events()` stream.
///
/// From `run()`: returning from the handler acks it; raising releases it (counted
/// as a local failure: after the agent's local attempt limit it is quarantined).
/// From `events()`: `await event.ack()`, `await event.release(...)` or
/// `await event.quarantine(reason)`.
#[pyclass(frozen, module = "switchboard")]
pub(crate) struct Event {
    /// The event's id (a UUID string); the same on every redelivery.
    #[pyo3(get)]
    event_id: String,
    /// Its sequence number in the agent's inbox (increasing, no gaps behind a cursor).
    #[pyo3(get)]
    sequence_number: u64,
    /// The message payload (JSON as dict, list, str, …), or None.
    #[pyo3(get)]
    payload: Py<PyAny>,
    /// The sending agent's name, or "operator".
    #[pyo3(get)]
    sender: String,
    /// Deliveries so far, this one included (the server's count).
    #[pyo3(get)]
    attempts: u32,
    /// Local failures of this event so far (the handler raised).
    #[pyo3(get)]
    local_failures: u32,
    /// -1000..=1000; higher is claimed first.
    #[pyo3(get)]
    priority: i32,
    /// The sender's correlation id, if any.
    #[pyo3(get)]
    correlation_id: Option<String>,
    /// The room (UUID string) for a room message.
    #[pyo3(get)]
    room_id: Option<String>,
    /// The way back to the consumer, for an `events()` event.
    settle: Option<Settle>,
}

#[pymethods]
impl Event {
    /// Acks the event (`events()` only): awaitable; returns once the consumer has
    /// recorded it as handled in the state file (the ack goes to the server with
    /// the next claim, or when the stream closes; a redelivery meanwhile is acked
    /// without being handed out again).
    fn ack<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.settle_with(py, Outcome::Ack)
    }

    /// Releases the event (`events()` only), so it is claimable again; awaitable,
    /// returns once the server has it back. Without `error`: "not now", after
    /// `delay` seconds (default: a backoff), not counted as a failure. With
    /// `error`: a failure, released after a backoff; the agent's
    /// `max_local_failures`th quarantines it. The error (200 characters at most)
    /// goes to the server.
    #[pyo3(signature = (error=None, *, delay=None))]
    fn release<'py>(
        &self,
        py: Python<'py>,
        error: Option<String>,
        delay: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let outcome = match (error, delay) {
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err(
                    "release() takes an error (a failure: released after a backoff) or a \
                     delay (not a failure), not both",
                ));
            }
            (Some(error), None) => Outcome::Failed(error.chars().take(200).collect()),
            (None, None) => Outcome::RetryLater(None),
            (None, Some(delay)) => {
                Outcome::RetryLater(Some(Duration::try_from_secs_f64(delay).map_err(|_| {
                    PyValueError::new_err("delay must be a number of seconds >= 0")
                })?))
            }
        };
        self.settle_with(py, outcome)
    }

    /// Quarantines the event now (`events()` only): it can never succeed. Locally
    /// and on the server (a terminal release); awaitable.
    fn quarantine<'py>(&self, py: Python<'py>, reason: String) -> PyResult<Bound<'py, PyAny>> {
        self.settle_with(py, Outcome::Poison(reason.chars().take(200).collect()))
    }

    fn __repr__(&self) -> String {
        format!(
            "Event(event_id={:?}, sequence_number={}, sender={:?}, attempts={})",
            self.event_id, self.sequence_number, self.sender, self.attempts
        )
    }
}

impl Event {
    pub(crate) fn new(
        py: Python<'_>,
        delivery: &Delivery,
        settle: Option<Settle>,
    ) -> PyResult<Self> {
        let event = &delivery.event;
        let payload = match &event.payload {
            Some(payload) => to_py(py, payload)?.unbind(),
            None => py.None(),
        };
        Ok(Self {
            event_id: event.event_id.to_string(),
            sequence_number: event.seq,
            payload,
            sender: match &event.sender {
                Sender::Agent { name, .. } => name.clone(),
                Sender::Operator => "operator".to_owned(),
            },
            attempts: event.attempts,
            local_failures: delivery.local_failures,
            priority: event.priority,
            correlation_id: event.correlation_id.clone(),
            room_id: event.room_id.map(|r| r.to_string()),
            settle,
        })
    }

    /// Hands `outcome` to the consumer now (so a cancelled wait loses nothing), and
    /// returns an awaitable that ends when the consumer has applied it.
    fn settle_with<'py>(&self, py: Python<'py>, outcome: Outcome) -> PyResult<Bound<'py, PyAny>> {
        let Some(settle) = &self.settle else {
            return Err(PyRuntimeError::new_err(
                "this event was handed to a run() handler, which acks it by returning and \
                 releases it by raising; ack(), release() and quarantine() are for events()",
            ));
        };
        let sender = settle
            .slot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| {
                PyRuntimeError::new_err(format!(
                    "event {} already has its outcome (acked, released or quarantined, or \
                     released when its stream closed)",
                    self.event_id
                ))
            })?;
        if sender.send(outcome).is_err() {
            return Err(consumer_stopped(&self.event_id));
        }
        let (mut status, before) = (settle.status.clone(), settle.before);
        let event_id = self.event_id.clone();
        awaitable(py, async move {
            match status.wait_for(|s| s.settled > before).await {
                Ok(_) => Ok(()),
                Err(_) => Err(consumer_stopped(&event_id)),
            }
        })
    }
}

/// Calls `handler(event)` on this (blocking-pool) thread. A return acks; an
/// exception is printed with its traceback (stderr) and is a local failure whose
/// reason is the exception's type and message, cut to 200 characters (it travels
/// to the server with the release).
pub(crate) fn call_handler(handler: &Py<PyAny>, delivery: &Delivery) -> Outcome {
    Python::attach(|py| {
        let called = Event::new(py, delivery, None)
            .and_then(|event| Bound::new(py, event))
            .and_then(|event| handler.call1(py, (event,)));
        match called {
            Ok(_) => Outcome::Ack,
            Err(error) => {
                error.display(py);
                let kind = error
                    .get_type(py)
                    .name()
                    .map_or_else(|_| "Exception".to_owned(), |n| n.to_string());
                let reason: String = format!("{kind}: {}", error.value(py))
                    .chars()
                    .take(200)
                    .collect();
                Outcome::Failed(reason)
            }
        }
    })
}
