//! [`Event`], what a handler gets, and the bridge that calls a Python handler for
//! the SDK's consumer.

use pyo3::prelude::*;
use switchboard_sdk::consumer::{Delivery, Outcome};
use switchboard_sdk::proto::Sender;

use crate::json::to_py;

/// One inbox event handed to a `run()` handler.
///
/// Returning from the handler acks it; raising releases it (counted as a local
/// failure: after the agent's local attempt limit it is quarantined).
#[pyclass(frozen, module = "switchboard", get_all)]
pub(crate) struct Event {
    /// The event's id (a UUID string); the same on every redelivery.
    event_id: String,
    /// Its sequence number in the agent's inbox (increasing, no gaps behind a cursor).
    sequence_number: u64,
    /// The message payload (JSON as dict, list, str, …), or None.
    payload: Py<PyAny>,
    /// The sending agent's name, or "operator".
    sender: String,
    /// Deliveries so far, this one included (the server's count).
    attempts: u32,
    /// Local failures of this event so far (the handler raised).
    local_failures: u32,
    /// -1000..=1000; higher is claimed first.
    priority: i32,
    /// The sender's correlation id, if any.
    correlation_id: Option<String>,
    /// The room (UUID string) for a room message.
    room_id: Option<String>,
}

#[pymethods]
impl Event {
    fn __repr__(&self) -> String {
        format!(
            "Event(event_id={:?}, sequence_number={}, sender={:?}, attempts={})",
            self.event_id, self.sequence_number, self.sender, self.attempts
        )
    }
}

impl Event {
    fn new(py: Python<'_>, delivery: &Delivery) -> PyResult<Self> {
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
        })
    }
}

/// Calls `handler(event)` on this (blocking-pool) thread. A return acks; an
/// exception is printed with its traceback (stderr) and is a local failure whose
/// reason is the exception's type and message, cut to 200 characters (it travels
/// to the server with the release).
pub(crate) fn call_handler(handler: &Py<PyAny>, delivery: &Delivery) -> Outcome {
    Python::attach(|py| {
        let called = Event::new(py, delivery)
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
