//! [`Agent`]: one agent's client, durable outbox, privacy gate and inbox consumer,
//! all the SDK's, over one local state file.
//!
//! Sending: `send`/`post` run the privacy gate and write the message to the outbox
//! (SQLite, `synchronous=FULL`) before any network I/O, and return a `Receipt`.
//! A background task on the package's runtime delivers the outbox (the SDK's
//! `Outbox::run`: per-lane order, retries with decorrelated jitter honouring
//! `Retry-After`, one idempotency key per entry for all its attempts); `flush`
//! drives delivery itself until nothing is left. An entry a killed process left
//! behind is sent by the next `Agent` on the same state directory, with its key.

mod setup;

use setup::{drain, message, seconds};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use switchboard_sdk::broker::Broker;
use switchboard_sdk::consumer::{Delivery, local_poison};
use switchboard_sdk::outbox::{EntryState, OutboxError};
use switchboard_sdk::{Client, LocalDb, Outbox, Target};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::errors::{
    api_error, consumer_error, flush_timeout, local_error, outbox_error, privacy_refused,
};
use crate::event::call_handler;
use crate::json::{to_json, to_py};
use crate::results::{Receipt, RunStats};
use crate::stream::{Control, EventStream};
use crate::wait::{block_on, quick};

/// The `User-Agent` of the package's requests.
const USER_AGENT: &str = concat!("switchboard-python/", env!("CARGO_PKG_VERSION"));
/// The state file's name inside the `state` directory.
const STATE_FILE: &str = "switchboard.db";
/// The message type payloads are checked as when none is given (the built-in
/// schemas' only type).
const DEFAULT_MESSAGE_TYPE: &str = "message";

/// A Switchboard agent: send through the durable outbox, consume the inbox.
///
/// `Agent(server=URL, token=TOKEN, state=DIR, name=NAME)`. `state` is a directory
/// for the local state file (outbox, consumer cursors, dedup table, local
/// quarantine); one directory per agent. `name` (the agent's name on the server)
/// is needed by `run()` only. `schemas` is the privacy gate's schema document (a
/// JSON string or a dict; default: the built-in `message` type with `text`,
/// `subject`, `tags` and `priority`). With `deliver=False` nothing is sent in the
/// background; `flush()` sends. `request_timeout` (seconds) bounds each HTTP
/// call, and so how long `flush` or Ctrl-C can wait for an attempt in flight.
///
/// `Agent.from_broker(agent=NAME, state=DIR)` gets its tokens from the local
/// token broker instead of holding one.
///
/// Use it as a context manager, or call `close()`, to stop the background
/// delivery cleanly.
#[pyclass(frozen, module = "switchboard")]
pub(crate) struct Agent {
    name: Option<String>,
    client: Client,
    db: LocalDb,
    outbox: Outbox,
    /// Stops the background delivery (close, or the object going away).
    stop_delivery: CancellationToken,
    /// The background delivery; `close` waits for it, so entries in flight go
    /// back to QUEUED before it returns.
    delivering: Mutex<Option<JoinHandle<Result<(), OutboxError>>>>,
    /// Entries this object enqueued and has not seen end yet: `flush` raises for
    /// the ones the server refused.
    mine: Mutex<Vec<(i64, String)>>,
    /// The parent of the cancellation token of every `flush` and `run` in
    /// progress: `stop` fires it (ending them at their next safe point) and puts
    /// a fresh one in its place for later calls.
    calls: Mutex<CancellationToken>,
    /// The consumers of the `events()` streams this object made that may still
    /// run: `close` shuts them and waits until their releases and acks are sent.
    streams: Mutex<Vec<Arc<Control>>>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop_delivery.cancel();
        for stream in self.streams.get_mut().unwrap_or_else(|e| e.into_inner()) {
            stream.shut();
        }
    }
}

#[pymethods]
impl Agent {
    #[new]
    #[pyo3(signature = (*, server, token, state, name=None, schemas=None, deliver=true, request_timeout=30.0))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn new(
        py: Python<'_>,
        server: &str,
        token: String,
        state: PathBuf,
        name: Option<String>,
        schemas: Option<&Bound<'_, PyAny>>,
        deliver: bool,
        request_timeout: f64,
    ) -> PyResult<Self> {
        let client = Client::builder()
            .user_agent(USER_AGENT)
            .request_timeout(seconds(request_timeout, "request_timeout")?)
            .build(server, token)
            .map_err(|e| api_error(&e))?;
        Self::open(py, client, name, &state, schemas, deliver)
    }

    /// An agent whose tokens come from the local token broker
    /// (`switchboard agent broker`) instead of a token of its own: short-lived,
    /// no wider than the broker's policy allows `agent` (and `scope`, space-separated,
    /// when given), bound to a key made in memory for this object, so every request
    /// is signed with it. They are renewed before they expire and when the server
    /// refuses one, without losing an outbox entry or an event. `socket` is the
    /// broker's socket (default `$SWITCHBOARD_BROKER_SOCKET`, else
    /// `$XDG_RUNTIME_DIR/switchboard/broker.sock`, else
    /// `/tmp/switchboard-<uid>/broker.sock`). The other arguments are `Agent`'s;
    /// `name` is `agent`. A refusal raises `ApiError` with the broker's `code`
    /// (`executable_not_allowed`, `agent_not_allowed`, `scope_not_allowed`,
    /// `peer_refused`, `host_login_ended`, …); a broker that cannot be reached
    /// raises `ApiError` with `kind == "login"`.
    #[staticmethod]
    #[pyo3(signature = (*, agent, state, socket=None, scope=None, schemas=None, deliver=true, request_timeout=30.0))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn from_broker(
        py: Python<'_>,
        agent: String,
        state: PathBuf,
        socket: Option<PathBuf>,
        scope: Option<String>,
        schemas: Option<&Bound<'_, PyAny>>,
        deliver: bool,
        request_timeout: f64,
    ) -> PyResult<Self> {
        let builder = Client::builder()
            .user_agent(USER_AGENT)
            .request_timeout(seconds(request_timeout, "request_timeout")?);
        let broker = Broker::new(socket.as_deref());
        let client = quick(py, broker.client(builder, &agent, scope.as_deref()))
            .map_err(|e| api_error(&e))?;
        Self::open(py, client, Some(agent), &state, schemas, deliver)
    }

    /// The agent's name, as given.
    #[getter]
    fn name(&self) -> Option<String> {
        self.name.clone()
    }

    /// The local state file.
    #[getter]
    fn state_file(&self) -> PathBuf {
        self.db.path().to_path_buf()
    }

    /// Sends `payload` to the agent `to`: checks it with the privacy gate, stores it
    /// in the local outbox, and returns a `Receipt` once it is durable there.
    /// Raises `PrivacyRefused` (nothing stored, nothing sent), `MessageTooLarge`
    /// or `OutboxFull`.
    #[pyo3(signature = (to, payload, *, message_type=None, correlation_id=None, priority=None))]
    fn send(
        &self,
        py: Python<'_>,
        to: String,
        payload: &Bound<'_, PyAny>,
        message_type: Option<&str>,
        correlation_id: Option<String>,
        priority: Option<i32>,
    ) -> PyResult<Receipt> {
        let message = message(payload, correlation_id, priority)?;
        self.enqueue(py, Target::Agent(to), message_type, message)
    }

    /// Posts `payload` to the room `room` (one event per member), the same way as
    /// `send`. Messages to one room go out in the order they were posted.
    #[pyo3(signature = (room, payload, *, message_type=None, correlation_id=None, priority=None))]
    fn post(
        &self,
        py: Python<'_>,
        room: String,
        payload: &Bound<'_, PyAny>,
        message_type: Option<&str>,
        correlation_id: Option<String>,
        priority: Option<i32>,
    ) -> PyResult<Receipt> {
        let message = message(payload, correlation_id, priority)?;
        self.enqueue(py, Target::Room(room), message_type, message)
    }

    /// Checks `payload` with the privacy gate without storing or sending anything.
    /// Returns the payload as it would be sent (members the schema does not allow
    /// removed); raises `PrivacyRefused`.
    #[pyo3(signature = (payload, *, message_type=None))]
    fn check<'py>(
        &self,
        py: Python<'py>,
        payload: &Bound<'py, PyAny>,
        message_type: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let payload = to_json(payload)?;
        let message_type = message_type.unwrap_or(DEFAULT_MESSAGE_TYPE);
        let cleared = py
            .detach(|| self.outbox.gate().check(message_type, payload))
            .map_err(|blocked| privacy_refused(&blocked))?;
        to_py(py, &cleared.payload)
    }

    /// Delivers the outbox until nothing is left to send, for at most `timeout`
    /// seconds. Raises `FlushTimeout` when entries are still unsent then (they stay
    /// queued), and `DeliveryRefused` when the server refused one of this object's
    /// messages for good. An attempt in flight is finished first (at most
    /// `request_timeout`), so no entry is left half-sent; Ctrl-C stops it the same
    /// way.
    #[pyo3(signature = (timeout = 10.0))]
    fn flush(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        let timeout = seconds(timeout, "timeout")?;
        let cancel = self.call_token();
        let pending =
            block_on(py, &cancel, drain(&self.outbox, timeout, &cancel))?.map_err(outbox_error)?;
        self.refused(py)?;
        match pending {
            0 => Ok(()),
            n => {
                let last = quick(py, self.outbox.entries(Some(EntryState::Retryable), 1))
                    .ok()
                    .and_then(|e| e.into_iter().next())
                    .and_then(|e| e.last_error);
                Err(flush_timeout(n, last))
            }
        }
    }

    /// Outbox entries not yet sent (queued, being sent, or waiting for a retry).
    fn pending(&self, py: Python<'_>) -> PyResult<u64> {
        let counts = quick(py, self.outbox.counts()).map_err(outbox_error)?;
        Ok(counts.open())
    }

    /// The outbox entry `outbox_id` as a dict (`state`, `attempts`, `last_error`,
    /// `receipt` — the server's answer once sent — …), or None once it is gone
    /// (sent entries are kept for an hour).
    fn entry<'py>(&self, py: Python<'py>, outbox_id: i64) -> PyResult<Bound<'py, PyAny>> {
        let entry = quick(py, self.outbox.entry(outbox_id)).map_err(outbox_error)?;
        let value =
            serde_json::to_value(entry).map_err(|e| PyValueError::new_err(e.to_string()))?;
        to_py(py, &value)
    }

    /// Consumes the inbox of `name`: claims events, calls `handler(event)`, acks
    /// when it returns. An exception releases the event (a local failure, retried
    /// after a backoff from `retry_base` seconds); at `max_local_failures` the event
    /// is quarantined locally and released as a terminal failure, so the server
    /// quarantines it too. A redelivered event already handled is acked without
    /// calling the handler. Leases (`lease_seconds`) are extended while the handler
    /// runs. `batch` events are claimed at a time (1..=100), handled one after
    /// another in order; their acks ride with the next claim.
    ///
    /// With `stop_when_idle` it returns once nothing is claimable; otherwise it runs
    /// until Ctrl-C, which finishes the event in flight, releases the rest, and
    /// raises `KeyboardInterrupt`. Raises `ApiError` when the server refuses the
    /// consumer for good (unknown agent, bad token).
    #[pyo3(signature = (handler, *, stop_when_idle=true, lease_seconds=60, batch=1, max_local_failures=3, retry_base=1.0))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn run(
        &self,
        py: Python<'_>,
        handler: Py<PyAny>,
        stop_when_idle: bool,
        lease_seconds: u64,
        batch: u32,
        max_local_failures: u32,
        retry_base: f64,
    ) -> PyResult<RunStats> {
        if !handler.bind(py).is_callable() {
            return Err(PyValueError::new_err(
                "handler must be callable: handler(event)",
            ));
        }
        let consumer = self.consumer(
            "run",
            stop_when_idle,
            lease_seconds,
            batch,
            max_local_failures,
            retry_base,
        )?;
        let status = consumer.status();
        let handler = Arc::new(handler);
        let handle = move |delivery: Delivery| {
            let handler = handler.clone();
            async move {
                let called =
                    tokio::task::spawn_blocking(move || call_handler(&handler, &delivery)).await;
                called.unwrap_or_else(|e| {
                    switchboard_sdk::Outcome::Failed(format!("the handler did not finish: {e}"))
                })
            }
        };
        let cancel = self.call_token();
        let ran = block_on(py, &cancel, consumer.run(handle, cancel.clone()))?;
        ran.map_err(consumer_error)?;
        let s = status.borrow().clone();
        Ok(RunStats {
            handled: s.handled,
            acked: s.acked,
            deduplicated: s.deduplicated,
            poisoned: s.poisoned,
            claims: s.claims,
        })
    }

    /// The inbox of `name` as an async iterator (asyncio): `async for event in
    /// agent.events(): ...; await event.ack()`. The same consumer as `run()` (and
    /// the same arguments), but the caller gives each event its outcome:
    /// `await event.ack()`, `await event.release(error=None, delay=None)` or
    /// `await event.quarantine(reason)`; the next event comes once the previous
    /// one has one. By default it waits for events forever (`stop_when_idle=False`);
    /// with `stop_when_idle=True` it ends once nothing is claimable. Use it with
    /// `async with` (or call `aclose()`): closing releases an event left without an
    /// outcome and stops the consumer. Needs `name`.
    #[pyo3(signature = (*, stop_when_idle=false, lease_seconds=60, batch=1, max_local_failures=3, retry_base=1.0))]
    fn events(
        &self,
        stop_when_idle: bool,
        lease_seconds: u64,
        batch: u32,
        max_local_failures: u32,
        retry_base: f64,
    ) -> PyResult<EventStream> {
        let consumer = self.consumer(
            "events",
            stop_when_idle,
            lease_seconds,
            batch,
            max_local_failures,
            retry_base,
        )?;
        let stream = EventStream::new(consumer);
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.retain(|s| !s.is_finished());
        streams.push(stream.control());
        Ok(stream)
    }

    /// Events quarantined locally (newest first, at most `limit`), as dicts with
    /// `event_id`, `seq`, `failures`, `reason` and `at` (Unix ms).
    #[pyo3(signature = (limit = 100))]
    fn quarantined<'py>(&self, py: Python<'py>, limit: u32) -> PyResult<Bound<'py, PyAny>> {
        let poisoned = quick(py, local_poison(&self.db, limit)).map_err(|e| local_error(&e))?;
        let value =
            serde_json::to_value(poisoned).map_err(|e| PyValueError::new_err(e.to_string()))?;
        to_py(py, &value)
    }

    /// Ends every `flush` and `run` in progress on this agent (from another thread,
    /// or an asyncio task being cancelled) at its next safe point: `run` finishes
    /// the event in flight, releases the rest and returns; `flush` finishes its
    /// pass and raises `FlushTimeout` if entries are left. Later calls are not
    /// affected.
    fn stop(&self) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *calls).cancel();
    }

    /// Stops the background delivery (entries in flight go back to the queue, to
    /// be sent by the next `Agent` on this state directory) and every `events()`
    /// stream of this object: an event handed out without an outcome is released,
    /// waiting acks are sent. Returns when that is done. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let streams = std::mem::take(&mut *self.streams.lock().unwrap_or_else(|e| e.into_inner()));
        for stream in &streams {
            stream.shut();
        }
        quick(py, async {
            for stream in &streams {
                stream.finished().await;
            }
        });
        self.stop_delivery.cancel();
        let task = self
            .delivering
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match task.map(|task| quick(py, task)) {
            Some(Ok(Err(error))) => Err(outbox_error(error)),
            _ => Ok(()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _type: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "Agent(server={:?}, name={:?}, state={:?})",
            self.client.base_url().as_str(),
            self.name,
            self.db.path()
        )
    }
}
