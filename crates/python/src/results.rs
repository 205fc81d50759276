//! What the `Agent`'s calls return: [`Receipt`] (`send`, `post`) and [`RunStats`]
//! (`run`). Read-only values.

use pyo3::prelude::*;

/// What `send` and `post` return: the message is in the local outbox (durable);
/// it is delivered in the background, or by `flush()`.
#[pyclass(frozen, module = "switchboard", get_all)]
pub(crate) struct Receipt {
    /// The entry's id in the local outbox (see `Agent.entry`).
    pub(crate) outbox_id: i64,
    /// Where it goes: `agent:<name>` or `room:<name>`.
    pub(crate) target: String,
    /// JSON paths the privacy gate removed (not in the message type's schema).
    pub(crate) stripped: Vec<String>,
}

#[pymethods]
impl Receipt {
    fn __repr__(&self) -> String {
        format!(
            "Receipt(outbox_id={}, target={:?}, stripped={:?})",
            self.outbox_id, self.target, self.stripped
        )
    }
}

/// What a `run()` did.
#[pyclass(frozen, module = "switchboard", get_all)]
pub(crate) struct RunStats {
    /// Handler calls that returned (the event is acked).
    pub(crate) handled: u64,
    /// Acks the server confirmed.
    pub(crate) acked: u64,
    /// Redeliveries of already handled events, acked without calling the handler.
    pub(crate) deduplicated: u64,
    /// Events quarantined locally (the local attempt limit).
    pub(crate) poisoned: u64,
    /// Claim requests sent.
    pub(crate) claims: u64,
}

#[pymethods]
impl RunStats {
    fn __repr__(&self) -> String {
        format!(
            "RunStats(handled={}, acked={}, deduplicated={}, poisoned={}, claims={})",
            self.handled, self.acked, self.deduplicated, self.poisoned, self.claims
        )
    }
}
