//! The root component. For now: a title and one line about the server.

use leptos::prelude::*;

use crate::{api, summary};

/// Renders the console into `<body>`.
pub(crate) fn mount() {
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    let capabilities = LocalResource::new(api::capabilities);
    view! {
        <main>
            <h1>"Switchboard console"</h1>
            {move || match capabilities.get() {
                None => view! { <p class="status">"Connecting to the server…"</p> }.into_any(),
                Some(Ok(caps)) => {
                    view! {
                        <p class="status" id="server-info">{summary::server_line(&caps)}</p>
                        <span id="app-ready" hidden=true></span>
                    }
                        .into_any()
                }
                Some(Err(error)) => {
                    view! {
                        <p class="status error" id="server-info">{error}</p>
                        <span id="app-ready" hidden=true></span>
                    }
                        .into_any()
                }
            }}
        </main>
    }
}
