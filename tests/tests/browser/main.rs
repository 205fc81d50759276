//! Browser tests: Debian's headless Chromium, driven over WebDriver (chromedriver and
//! `fantoccini`), against a real [`TestServer`] serving the built console.
//!
//! `--dump-dom` returns before the wasm has rendered, so every test loads the page in
//! a real browser session and waits for `#app-ready`, the element the console renders
//! once its first request to the server has settled.
//!
//! Terms:
//! - *the console*: the built UI in `SWITCHBOARD_UI_DIR` (`cargo xtask ui` writes
//!   `ui/dist`; `cargo xtask test` sets the variable).
//! - *skip*: without the console, or without chromium and chromedriver, a test prints
//!   why and passes, so a plain `cargo test` on a machine without them stays green.
//!   With `CI=true` the same cases fail instead: CI must not silently skip them.
//!
//! [`TestServer`]: switchboard_tests::TestServer

mod client_settings;
mod console;
mod credentials;
mod devices;
mod driver;
mod filters;
mod installed;
mod jobs;
mod journey;
mod leases;
mod package;
mod rerender;
mod session;
mod signatures;
mod signin;
mod support;
mod tenants;
mod webhooks;
