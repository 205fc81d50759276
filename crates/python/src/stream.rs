//! [`EventStream`]: the inbox as an asyncio async iterator (`agent.events()`).
//!
//! The SDK's consumer runs as a task on the package's runtime with a handler that
//! hands each event to the stream and waits for its outcome (the event's
//! [`Settle`]). So `events()` gets everything `run()` has, from the same code:
//! leases extended while Python holds an event, local dedup (a redelivery of a
//! handled event is acked without being handed out), the local attempt limit and
//! quarantine, acks riding with the next claim. Events come one at a time: the
//! next is handed out once the previous one has its outcome.
//!
//! Nothing is lost on cancellation or close. Cancelling `__anext__` drops a
//! channel receive (nothing taken). An event that was handed out without an
//! outcome is released at once (not counted as a failure) when the stream closes
//! (`aclose`, `async with`, the object going away) or when the event object is
//! garbage collected; if the whole process dies, its lease ends instead. Closing
//! stops the consumer the way `run()` stops (claimed events not handed out are
//! released, waiting acks sent) and its awaitable ends when that is done.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pyo3::exceptions::{PyRuntimeError, PyStopAsyncIteration};
use pyo3::prelude::*;
use switchboard_sdk::Consumer;
use switchboard_sdk::consumer::{ConsumerError, ConsumerStatus, Delivery, Outcome};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::errors::consumer_error;
use crate::event::{Event, Outlet, Settle, Slot};
use crate::wait::{awaitable, runtime};

/// What an event without an outcome gets: released for a new claim at once, not
/// counted as a failure.
const GIVE_BACK: Outcome = Outcome::RetryLater(Some(Duration::ZERO));

/// One event on its way from the consumer's handler to `__anext__`.
struct Handed {
    delivery: Delivery,
    slot: Slot,
    before: u64,
    status: watch::Receiver<ConsumerStatus>,
}

impl<'py> IntoPyObject<'py> for Handed {
    type Target = Event;
    type Output = Bound<'py, Event>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, Event>> {
        let settle = Settle {
            slot: self.slot,
            status: self.status,
            before: self.before,
        };
        Bound::new(py, Event::new(py, &self.delivery, Some(settle))?)
    }
}

/// The consumer's run, not yet started (it starts at the first `__anext__`).
type Run = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The inbox of the agent, as an async iterator of `Event`s (`agent.events()`).
///
/// ```python
/// async with agent.events() as events:
///     async for event in events:
///         ...
///         await event.ack()       # or: await event.release(...)
/// ```
///
/// Events come one at a time, in the order the server hands them out; take the
/// next once the previous has its outcome. Closing (`aclose()`, leaving
/// `async with`, or the `AsyncAgent` closing) releases an event left without an
/// outcome and stops the consumer; nothing claimed is lost.
#[pyclass(frozen, weakref, module = "switchboard")]
pub(crate) struct EventStream {
    /// Events the consumer hands out (at most one waits here).
    events: Arc<tokio::sync::Mutex<mpsc::Receiver<Handed>>>,
    /// The slot of the last event handed out, held weakly: only the event object
    /// keeps it alive, so a collected event counts as released.
    current: Arc<Mutex<Weak<Outlet>>>,
    /// The consumer's run until the first `__anext__`; `None` once started or
    /// closed.
    run: Mutex<Option<Run>>,
    /// Stops the consumer: close, or the stream going away.
    stop: CancellationToken,
    /// Fired once the consumer's run has returned (its releases and acks sent),
    /// or at close if it never started.
    finished: CancellationToken,
    /// Why the consumer stopped, if it failed; raised once, by `__anext__`.
    failure: Arc<Mutex<Option<ConsumerError>>>,
}

impl EventStream {
    /// The stream of `consumer`'s events; nothing is claimed until the first
    /// `__anext__`.
    pub(crate) fn new(consumer: Consumer) -> Self {
        let (sender, events) = mpsc::channel::<Handed>(1);
        let status = consumer.status();
        let stop = CancellationToken::new();
        let finished = CancellationToken::new();
        let failure = Arc::new(Mutex::new(None));
        let handler = {
            let stop = stop.clone();
            move |delivery: Delivery| {
                let (sender, stop, status) = (sender.clone(), stop.clone(), status.clone());
                async move { hand_out(delivery, &sender, &stop, status).await }
            }
        };
        let run: Run = {
            let (stop, finished, failure) = (stop.clone(), finished.clone(), failure.clone());
            Box::pin(async move {
                let ran = consumer.run(handler, stop).await;
                // The handler (and with it the channel's sender) goes with the
                // consumer: a waiting `__anext__` then sees the end.
                drop(consumer);
                if let Err(error) = ran {
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                }
                finished.cancel();
            })
        };
        Self {
            events: Arc::new(tokio::sync::Mutex::new(events)),
            current: Arc::default(),
            run: Mutex::new(Some(run)),
            stop,
            finished,
            failure,
        }
    }

    /// Releases the event handed out without an outcome, and stops the consumer
    /// (or drops it unstarted). Returns at once; `finished` fires when it is done.
    fn shut(&self) {
        let current = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade();
        if let Some(slot) = current {
            let sender = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(sender) = sender {
                let _ = sender.send(GIVE_BACK);
            }
        }
        self.stop.cancel();
        let unstarted = self.run.lock().unwrap_or_else(|e| e.into_inner()).take();
        if unstarted.is_some() {
            self.finished.cancel();
        }
    }
}

/// The consumer's handler: hands `delivery` to the stream and waits for its
/// outcome. An event the stream never takes, or that loses its outcome (the event
/// object collected, the stream closed), is given back.
async fn hand_out(
    delivery: Delivery,
    sender: &mpsc::Sender<Handed>,
    stop: &CancellationToken,
    status: watch::Receiver<ConsumerStatus>,
) -> Outcome {
    let (tx, rx) = oneshot::channel();
    // Called only after the previous outcome was applied: this is the count the
    // event's own outcome moves past.
    let before = status.borrow().settled;
    let handed = Handed {
        delivery,
        slot: Arc::new(Mutex::new(Some(tx))),
        before,
        status,
    };
    tokio::select! {
        biased;
        () = stop.cancelled() => return GIVE_BACK,
        sent = sender.send(handed) => {
            if sent.is_err() {
                return GIVE_BACK;
            }
        }
    }
    // An outcome given before the close wins over the close.
    let mut rx = rx;
    tokio::select! {
        biased;
        outcome = &mut rx => outcome.unwrap_or(GIVE_BACK),
        () = stop.cancelled() => rx.try_recv().unwrap_or(GIVE_BACK),
    }
}

#[pymethods]
impl EventStream {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next event (awaitable). Raises `StopAsyncIteration` when the consumer
    /// ended (`stop_when_idle=True` and nothing claimable, or the stream closed),
    /// the consumer's error when it failed (`ApiError` for a bad token or unknown
    /// agent, `LocalStateError`), and `RuntimeError` while the previous event has
    /// no outcome yet.
    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let unsettled = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .upgrade()
            .is_some_and(|slot| slot.lock().unwrap_or_else(|e| e.into_inner()).is_some());
        if unsettled {
            return Err(PyRuntimeError::new_err(
                "the previous event has no outcome yet: await event.ack(), \
                 event.release(...) or event.quarantine(reason) before taking the next",
            ));
        }
        let run = self.run.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(run) = run {
            runtime().spawn(run);
        }
        let events = self.events.clone();
        let current = self.current.clone();
        let (stop, finished, failure) = (
            self.stop.clone(),
            self.finished.clone(),
            self.failure.clone(),
        );
        awaitable(py, async move {
            let next = {
                let mut events = events.lock().await;
                tokio::select! {
                    biased;
                    () = stop.cancelled() => None,
                    next = events.recv() => next,
                }
            };
            if let Some(handed) = next {
                *current.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&handed.slot);
                return Ok(handed);
            }
            finished.cancelled().await;
            let failed = failure.lock().unwrap_or_else(|e| e.into_inner()).take();
            Err(failed.map_or_else(|| PyStopAsyncIteration::new_err(()), consumer_error))
        })
    }

    /// Closes the stream (awaitable; idempotent): an event handed out without an
    /// outcome is released at once, claimed events not handed out are released,
    /// waiting acks are sent, and the consumer stops. Ends when that is done.
    fn aclose<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.shut();
        let finished = self.finished.clone();
        awaitable(py, async move {
            finished.cancelled().await;
            Ok(())
        })
    }

    /// Whether the stream is closed (or its consumer has ended).
    #[getter]
    fn closed(&self) -> bool {
        self.stop.is_cancelled() || self.finished.is_cancelled()
    }

    fn __aenter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let this = slf.clone().unbind();
        awaitable(slf.py(), async move { Ok(this) })
    }

    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _type: Option<&Bound<'py, PyAny>>,
        _value: Option<&Bound<'py, PyAny>>,
        _traceback: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.aclose(py)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.shut();
    }
}
