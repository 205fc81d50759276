//! The Switchboard console: a Leptos client-side app the server serves at `/`.
//!
//! It speaks only the public HTTP API and the operator SSE stream, so it works the
//! same in the desktop window and in any browser. Build it with `cargo xtask ui` (or
//! `run`/`test`): the crate is compiled to wasm32 and bound with `wasm-bindgen
//! --target web` into `ui/dist`, next to `ui/index.html`.
//!
//! Browser tests wait for the element `#app-ready`: it appears once the session check
//! (`GET /api/v1/session`) has settled, on the login page and in the console alike.
//! Logic that needs no browser (routes, filters, formatting) lives in plain modules
//! with host unit tests.

#[cfg(target_arch = "wasm32")]
mod api;
// Leptos' `#[component]` emits `pub` props structs, which the workspace's
// `unreachable_pub` lint would flag on every component.
#[cfg(target_arch = "wasm32")]
#[allow(unreachable_pub)]
mod app;
#[cfg(target_arch = "wasm32")]
#[allow(unreachable_pub)]
mod context;
#[cfg(target_arch = "wasm32")]
mod live;
#[cfg(target_arch = "wasm32")]
#[allow(unreachable_pub)]
mod pages;
// Pure helpers, compiled and unit-tested on the host too.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod charts;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod format;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod route;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
mod summary;

#[cfg(target_arch = "wasm32")]
fn main() {
    console_error_panic_hook::set_once();
    app::mount();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!(
        "switchboard-ui runs in the browser: build it with `cargo xtask ui` \
         (wasm32 + wasm-bindgen into ui/dist) and open the console the server serves"
    );
    std::process::exit(2);
}
