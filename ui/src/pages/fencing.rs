//! Fencing rejections: every memory record call the server refused because its
//! fencing token was not the memory's current one (a holder that lost its lease),
//! newest first, live from the stream's `leases` events.
//!
//! Hooks: `#fencing-table`, `tr[data-rejection]`, `#fencing-empty`.

use leptos::prelude::*;
use switchboard_proto::FencingRejectionPage;

use super::{error_box, loading};
use crate::api;
use crate::format;
use crate::live::Live;

#[component]
pub(crate) fn FencingPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.leases.get();
        api::get::<FencingRejectionPage>("/api/v1/ops/fencing-rejections")
    });
    view! {
        <section id="fencing">
            <h1>"Fencing rejections"</h1>
            <p class="muted">
                "Writes and reads refused because they carried an old fencing token: a holder paused past its lease (GC, SIGSTOP, a partition) came back after someone else took over."
            </p>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(page)) if page.rejections.is_empty() => view! {
                    <p class="empty" id="fencing-empty">
                        "No rejections. They appear here when a memory record call presents a token lower than the memory's current one; each one names the memory, both tokens and the client."
                    </p>
                }.into_any(),
                Some(Ok(page)) => view! {
                    <table id="fencing-table">
                        <thead><tr>
                            <th>"When"</th><th>"Memory"</th><th class="num">"Presented"</th>
                            <th class="num">"Current"</th><th>"Owner client"</th><th>"Caller"</th><th>"Call"</th>
                        </tr></thead>
                        <tbody>
                            {page.rejections.into_iter().map(|r| view! {
                                <tr data-rejection=r.id>
                                    <td>{format::when(r.at)}</td>
                                    <td><code title=r.memory_instance_id.to_string()>{r.memory_instance_id.to_string()}</code></td>
                                    <td class="num" data-col="presented">{r.presented_token}</td>
                                    <td class="num" data-col="current">{r.current_token}</td>
                                    <td data-col="owner">{r.owner_client.clone().unwrap_or_else(|| "–".to_owned())}</td>
                                    <td>{r.actor.clone()}</td>
                                    <td><code>{r.operation.clone()}</code></td>
                                </tr>
                            }).collect::<Vec<_>>()}
                        </tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
