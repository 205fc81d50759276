//! The overview's charts (see [`crate::charts`]): redrawn when the server takes a
//! sample (`sampled` on the operator stream) and when the system switches between
//! light and dark.
//!
//! Hooks: `#charts`, `figure#chart-{depth,latency,expirations}[data-drawn]`.

use leptos::prelude::*;
use switchboard_proto::OpsHistory;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

use super::error_box;
use crate::api;
use crate::charts::{self, DARK, LIGHT};
use crate::live::Live;

/// Whether the system prefers dark, kept current.
fn prefers_dark() -> RwSignal<bool> {
    let dark = RwSignal::new(false);
    let query = web_sys::window()
        .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok())
        .flatten();
    if let Some(q) = query {
        dark.set(q.matches());
        let q2 = q.clone();
        let on_change = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| dark.set(q2.matches()));
        let _ = q.add_event_listener_with_callback("change", on_change.as_ref().unchecked_ref());
        // Removed when the overview unmounts; the closure lives until then.
        let held = send_wrapper::SendWrapper::new((q, on_change));
        on_cleanup(move || {
            let (q, on_change) = held.take();
            let _ =
                q.remove_event_listener_with_callback("change", on_change.as_ref().unchecked_ref());
        });
    }
    dark
}

fn figure(id: &'static str, title: &'static str, drawn: Result<String, String>) -> AnyView {
    let ok = drawn.is_ok();
    view! {
        <figure class="chart" id=format!("chart-{id}") data-drawn=ok.to_string()>
            <figcaption>{title}</figcaption>
            {match drawn {
                Ok(svg) => view! { <div class="svg" inner_html=svg></div> }.into_any(),
                Err(why) => view! { <p class="muted chart-empty">{why}</p> }.into_any(),
            }}
        </figure>
    }
    .into_any()
}

#[component]
pub(crate) fn Charts() -> impl IntoView {
    let live = expect_context::<Live>();
    let dark = prefers_dark();
    let history = LocalResource::new(move || {
        live.samples.get();
        api::get::<OpsHistory>("/api/v1/ops/history")
    });
    view! {
        <h2>"Last hour"</h2>
        <div class="charts" id="charts">
            {move || history.get().map(|r| match r {
                Err(e) => error_box(&e),
                Ok(h) => {
                    let p = if dark.get() { &DARK } else { &LIGHT };
                    view! {
                        {figure("depth", "Inbox depth by status", charts::depth(&h, p))}
                        {figure("latency", "Delivery latency (acks in the window)", charts::latency(&h, p))}
                        {figure("expirations", "Lease expirations and rejections", charts::expirations(&h, p))}
                    }
                    .into_any()
                }
            })}
        </div>
    }
}
