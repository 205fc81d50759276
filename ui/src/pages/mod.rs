//! The console's pages, one module each, plus the little pieces they share.

pub(crate) mod agents;
pub(crate) mod audit;
pub(crate) mod charts;
pub(crate) mod client;
pub(crate) mod confirm;
pub(crate) mod inbox;
pub(crate) mod inspector;
pub(crate) mod overview;
pub(crate) mod quarantine;

use leptos::prelude::*;

use crate::api::ApiError;

/// A page for a feature the server does not have yet.
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
