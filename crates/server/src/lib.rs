//! The Switchboard coordination server as a library.
//!
//! The caller owns the listener and the shutdown signal: the headless CLI passes the
//! configured address and Ctrl-C, the desktop shell port 0 and its exit signal, tests
//! port 0 and a future they resolve.

pub mod access;
pub mod app;
pub mod archive;
pub mod config;
pub mod doctor;
pub mod embed;
pub mod error;
pub mod history;
pub mod hooks;
pub mod http;
pub mod hub;
pub mod metrics;
pub mod names_import;
pub mod oauth;
pub mod sealing;
mod server;
pub mod tls;
pub mod webhooks;
pub mod workers;

/// The store: its own crate below this one (`crates/store`).
pub use switchboard_store as store;
pub use switchboard_store::clock;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::Config;
pub use error::{ApiError, StoreError};
pub use hooks::Hooks;
pub use server::{Server, StartError};
pub use workers::{TickReport, Workers};

/// Any error of opening the server.
pub type Error = StartError;

/// Test builds of the workspace (feature `failpoints`): reads `FAILPOINTS` (the
/// `fail` crate's `name=action;…`), so a test can stop a real `switchboard serve` at
/// a named point. Does nothing in a build without the feature.
pub fn failpoints_from_env() {
    #[cfg(feature = "failpoints")]
    if std::env::var_os("FAILPOINTS").is_some() {
        // The scenario lives as long as the process.
        std::mem::forget(fail::FailScenario::setup());
    }
}
