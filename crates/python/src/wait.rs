//! Blocking calls from Python: the SDK's async code runs on one process-wide tokio
//! runtime while the calling thread waits with the GIL released, checking for
//! Python signals (Ctrl-C) as it waits.
//!
//! A signal does not drop the work half done: it fires the call's cancellation
//! token, the work stops at its next safe point (the consumer finishes the event in
//! flight; flush ends its pass), and only then is the signal's exception
//! (`KeyboardInterrupt`) raised. So no outbox entry is left `SENDING` behind.

use std::future::Future;
use std::sync::{Once, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// How often a waiting call looks for Python signals.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// The process-wide runtime: the outbox's background delivery, every call's work,
/// and the asyncio awaitables' futures (pyo3-async-runtimes is given this one
/// rather than starting its own). Two workers: the SDK's work is I/O, and Python
/// code runs elsewhere. Started on first use, not at import, so a process that
/// forks before using the package forks without threads.
pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    static BRIDGED: Once = Once::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("switchboard")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime")
    });
    BRIDGED.call_once(|| {
        // Fails only if pyo3-async-runtimes started a runtime already, which
        // `awaitable` (the package's one way in) prevents.
        let _ = pyo3_async_runtimes::tokio::init_with_runtime(runtime);
    });
    runtime
}

/// An asyncio awaitable of `future`, run on [`runtime`]. Cancelling the awaitable
/// drops the future, so `future` must be safe to drop at any await point: the work
/// that must not be lost is started before (as `event.ack()` hands its outcome
/// over before it returns the awaitable).
pub(crate) fn awaitable<'py, T>(
    py: Python<'py>,
    future: impl Future<Output = PyResult<T>> + Send + 'static,
) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    runtime();
    pyo3_async_runtimes::tokio::future_into_py(py, future)
}

/// Runs `future` to its end with the GIL released. On a Python signal (checked
/// every 100 ms; Python runs its handlers on the main thread only) it cancels
/// `cancel`, waits for `future` to finish (it must stop soon once `cancel` fires),
/// and returns the signal's exception.
pub(crate) fn block_on<T: Send>(
    py: Python<'_>,
    cancel: &CancellationToken,
    future: impl Future<Output = T> + Send,
) -> PyResult<T> {
    py.detach(|| {
        runtime().block_on(async {
            let mut future = std::pin::pin!(future);
            let mut interrupted: Option<PyErr> = None;
            let mut tick = tokio::time::interval(SIGNAL_CHECK);
            loop {
                tokio::select! {
                    out = &mut future => return interrupted.map_or(Ok(out), Err),
                    _ = tick.tick(), if interrupted.is_none() => {
                        if let Err(signal) = Python::attach(|py| py.check_signals()) {
                            cancel.cancel();
                            interrupted = Some(signal);
                        }
                    }
                }
            }
        })
    })
}

/// Runs a short `future` (a local write, a lookup) with the GIL released.
pub(crate) fn quick<T: Send>(py: Python<'_>, future: impl Future<Output = T> + Send) -> T {
    py.detach(|| runtime().block_on(future))
}
