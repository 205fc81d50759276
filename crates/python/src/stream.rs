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
//! released, waiting acks sent) and its awaitable ends when that is done. The
//! agent keeps each stream's [`Control`]: `Agent.close()` (and so `AsyncAgent`
//! leaving `async with`) shuts every stream it made and waits for its consumer,
//! even one whose Python object is already gone (its drop only starts the stop).

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
/// `async with`, or the agent closing) releases an event left without an outcome
/// and stops the consumer; nothing claimed is lost.
#[pyclass(frozen, module = "switchboard")]
pub(crate) struct EventStream {
    /// Events the consumer hands out (at most one waits here).
    events: Arc<tokio::sync::Mutex<mpsc::Receiver<Handed>>>,
    /// Starting and stopping the consumer; the agent holds it too, to stop the
    /// consumer and wait for it when it closes, whether or not this object is
    /// still alive.
    control: Arc<Control>,
    /// Why the consumer stopped, if it failed; raised once, by `__anext__`.
    failure: Arc<Mutex<Option<ConsumerError>>>,
}

/// What starts and stops one stream's consumer.
pub(crate) struct Control {
    /// The slot of the last event handed out, held weakly: only the event object
    /// keeps it alive, so a collected event counts as released.
    current: Mutex<Weak<Outlet>>,
    /// The consumer's run until the first `__anext__`; `None` once started or
    /// shut.
    run: Mutex<Option<Run>>,
    /// Stops the consumer.
    stop: CancellationToken,
    /// Fired once the consumer's run has returned (its releases and acks sent),
    /// or when it is shut before it started.
    finished: CancellationToken,
}

impl Control {
    /// Releases the event handed out without an outcome, and stops the consumer
    /// (or drops it unstarted). Returns at once; [`Control::finished`] says when
    /// it is done. Idempotent.
    pub(crate) fn shut(&self) {
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

    /// Ends once the consumer has stopped (after [`Control::shut`], or on its own).
    pub(crate) async fn finished(&self) {
        self.finished.cancelled().await;
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.finished.is_cancelled()
    }
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
                // `run` dropped the handler, and with it the channel's sender, so a
                // waiting `__anext__` sees the end; dropping the consumer closes
                // its status, so an `ack()` still waiting fails instead of hanging.
                drop(consumer);
                if let Err(error) = ran {
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                }
                finished.cancel();
            })
        };
        Self {
            events: Arc::new(tokio::sync::Mutex::new(events)),
            control: Arc::new(Control {
                current: Mutex::default(),
                run: Mutex::new(Some(run)),
                stop,
                finished,
            }),
            failure,
        }
    }

    /// What the agent keeps to stop this stream's consumer when it closes.
    pub(crate) fn control(&self) -> Arc<Control> {
        self.control.clone()
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
        let control = &self.control;
        let unsettled = control
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
        let run = control.run.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(run) = run {
            runtime().spawn(run);
        }
        let (events, control, failure) = (
            self.events.clone(),
            self.control.clone(),
            self.failure.clone(),
        );
        awaitable(py, async move {
            let next = {
                let mut events = events.lock().await;
                tokio::select! {
                    biased;
                    () = control.stop.cancelled() => None,
                    next = events.recv() => next,
                }
            };
            if let Some(handed) = next {
                *control.current.lock().unwrap_or_else(|e| e.into_inner()) =
                    Arc::downgrade(&handed.slot);
                return Ok(handed);
            }
            control.finished().await;
            let failed = failure.lock().unwrap_or_else(|e| e.into_inner()).take();
            Err(failed.map_or_else(|| PyStopAsyncIteration::new_err(()), consumer_error))
        })
    }

    /// Closes the stream (awaitable; idempotent): an event handed out without an
    /// outcome is released at once, claimed events not handed out are released,
    /// waiting acks are sent, and the consumer stops. Ends when that is done.
    fn aclose<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.control.shut();
        let control = self.control.clone();
        awaitable(py, async move {
            control.finished().await;
            Ok(())
        })
    }

    /// Whether the stream is closed (or its consumer has ended).
    #[getter]
    fn closed(&self) -> bool {
        self.control.stop.is_cancelled() || self.control.is_finished()
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
        self.control.shut();
    }
}
