//! The `switchboard` Python package: the Rust SDK (`switchboard-sdk`) through PyO3.
//!
//! Python gets the SDK's own outbox, privacy gate, inbox consumer and retry code,
//! not a second implementation. This crate only translates: Python values to JSON
//! and back ([`json`]), SDK errors to Python exceptions ([`errors`]), and blocking
//! calls into waits that release the GIL and still notice Ctrl-C ([`wait`]), and
//! the consumer into an asyncio async iterator ([`stream`]).
//!
//! Terms: the *state file* is the SDK's local SQLite file (outbox, consumer
//! cursors, dedup table, local quarantine), kept in the directory the Python caller
//! passes as `state`.
//!
//! Everything is behind the `python` feature (maturin enables it): without it the
//! crate is empty, so the workspace's cargo builds never link libpython (see
//! `Cargo.toml`).
#![cfg(feature = "python")]

mod agent;
mod errors;
mod event;
mod json;
mod results;
mod stream;
mod wait;

use pyo3::prelude::*;

/// The compiled part of the `switchboard` package (`switchboard._switchboard`);
/// import `switchboard`, which re-exports everything here.
#[pymodule]
fn _switchboard(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<agent::Agent>()?;
    m.add_class::<results::Receipt>()?;
    m.add_class::<results::RunStats>()?;
    m.add_class::<event::Event>()?;
    m.add_class::<stream::EventStream>()?;
    Ok(())
}
