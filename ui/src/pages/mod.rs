//! The console's pages, one module each, plus the little pieces they share.

pub(crate) mod agents;
pub(crate) mod audit;
pub(crate) mod authorize;
pub(crate) mod charts;
pub(crate) mod client;
pub(crate) mod confirm;
pub(crate) mod credentials;
pub(crate) mod devices;
pub(crate) mod fencing;
pub(crate) mod inbox;
pub(crate) mod inspector;
pub(crate) mod leases;
pub(crate) mod overview;
pub(crate) mod quarantine;
pub(crate) mod settings;
pub(crate) mod signatures;
pub(crate) mod tenants;
pub(crate) mod webhooks;

use leptos::prelude::*;

use crate::api::ApiError;

/// A page with only a title and a sentence (for a path the console has no page at).
#[component]
pub(crate) fn Placeholder(
    #[prop(into)] what: String,
    #[prop(into)] detail: String,
) -> impl IntoView {
    view! {
        <section id="placeholder" class="empty">
            <h1>{what}</h1>
            <p>{detail}</p>
        </section>
    }
}

/// The browser's clock in milliseconds, updated every second while the page lives
/// (for countdowns).
pub(crate) fn ticking_now() -> RwSignal<i64> {
    let now = RwSignal::new(js_sys::Date::now() as i64);
    if let Ok(handle) = set_interval_with_handle(
        move || now.set(js_sys::Date::now() as i64),
        std::time::Duration::from_secs(1),
    ) {
        on_cleanup(move || handle.clear());
    }
    now
}

/// The server's problem `detail`, shown where the data would be.
pub(crate) fn error_box(e: &ApiError) -> AnyView {
    view! { <p class="error" role="alert" data-status=e.status>{e.detail.clone()}</p> }.into_any()
}

pub(crate) fn loading() -> AnyView {
    view! { <p class="muted">"Loading…"</p> }.into_any()
}

/// A status as a colored tag.
pub(crate) fn status_tag(status: &str) -> AnyView {
    view! { <span class=format!("tag {status}")>{status.to_owned()}</span> }.into_any()
}
