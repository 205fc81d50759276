//! Inbox explorer: events filtered by agent, status, correlation id and payload text,
//! paginated, live. A row opens the event inspector.

use leptos::prelude::*;
use switchboard_proto::{EventId, EventStatus, OpsEvent, OpsEventPage};

use super::{error_box, loading, status_tag};
use crate::api;
use crate::context::{Link, Nav};
use crate::format;
use crate::live::Live;
use crate::route::{EventQuery, events_api_path, href};

const PAGE: u32 = 50;

fn row(e: OpsEvent) -> AnyView {
    let id = e.event.event_id.to_string();
    let ev = e.event;
    view! {
        <tr data-event=id.clone() data-status=ev.status.as_str()>
            <td class="num"><Link href=format!("/events/{id}")>{format!("#{}", ev.seq)}</Link></td>
            <td>{e.agent_name.clone()}</td>
            <td>{status_tag(ev.status.as_str())}</td>
            <td class="num">{ev.priority}</td>
            <td class="num">{format!("{}/{}", ev.attempts, ev.max_attempts)}</td>
            <td>{format::when(ev.created_at)}</td>
            <td>{ev.correlation_id.clone().unwrap_or_default()}</td>
            <td class="clip">{ev.last_error.clone().unwrap_or_default()}</td>
        </tr>
    }
    .into_any()
}

fn text_field(id: &'static str, label: &'static str, value: RwSignal<String>) -> AnyView {
    view! {
        <label for=id>
            {label}
            <input
                id=id
                type="search"
                prop:value=move || value.get()
                on:input=move |ev| value.set(event_target_value(&ev))
            />
        </label>
    }
    .into_any()
}

#[component]
pub(crate) fn InboxPage(query: EventQuery) -> impl IntoView {
    let nav = expect_context::<Nav>();
    let live = expect_context::<Live>();
    let agent = RwSignal::new(query.agent.clone().unwrap_or_default());
    let status = RwSignal::new(query.status.clone().unwrap_or_default());
    let correlation = RwSignal::new(query.correlation_id.clone().unwrap_or_default());
    let text = RwSignal::new(query.q.clone().unwrap_or_default());
    let priority = RwSignal::new(query.priority.clone().unwrap_or_default());
    let after = RwSignal::new(None::<EventId>);
    let back = RwSignal::new(Vec::<Option<EventId>>::new());

    let q = query.clone();
    let data = LocalResource::new(move || {
        live.version.get();
        let cursor = after.get().map(|a| a.to_string());
        let path = events_api_path(&q, cursor.as_deref(), PAGE);
        async move { api::get::<OpsEventPage>(&path).await }
    });

    let apply = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let some = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let q = EventQuery {
            agent: some(agent.get_untracked()),
            status: some(status.get_untracked()),
            correlation_id: some(correlation.get_untracked()),
            q: some(text.get_untracked()),
            priority: some(priority.get_untracked()),
        };
        nav.go(&href("/inbox", &q));
    };
    let filtered = !query.is_empty();

    view! {
        <section id="inbox">
            <h1>"Inbox explorer"</h1>
            <form class="filters" id="inbox-filters" on:submit=apply>
                {text_field("filter-agent", "Agent", agent)}
                <label for="filter-status">
                    "Status"
                    <select
                        id="filter-status"
                        prop:value=move || status.get()
                        on:change=move |ev| status.set(event_target_value(&ev))
                    >
                        <option value="">"any"</option>
                        {EventStatus::ALL
                            .iter()
                            .map(|s| view! { <option value=s.as_str()>{s.as_str()}</option> })
                            .collect::<Vec<_>>()}
                    </select>
                </label>
                {text_field("filter-correlation", "Correlation id", correlation)}
                {text_field("filter-text", "Payload contains", text)}
                {text_field("filter-priority", "Priority", priority)}
                <button type="submit" id="filter-apply" class="primary">"Apply"</button>
                {filtered.then(|| view! { <Link href="/inbox">"Clear filters"</Link> })}
            </form>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(page)) if page.events.is_empty() && after.get_untracked().is_none() => {
                    view! {
                        <p class="empty" id="inbox-empty">
                            {if filtered {
                                "No events match these filters. Loosen them, or clear them."
                            } else {
                                "No events yet. Send one with POST /api/v1/agents/{agent}/messages; it shows up here live."
                            }}
                        </p>
                    }
                    .into_any()
                }
                Some(Ok(page)) => {
                    let next = page.next_cursor;
                    let has_back = !back.with_untracked(Vec::is_empty);
                    view! {
                        <table id="events-table">
                            <thead>
                                <tr>
                                    <th class="num">"Seq"</th><th>"Agent"</th><th>"Status"</th>
                                    <th class="num">"Priority"</th><th class="num">"Attempts"</th>
                                    <th>"Created"</th><th>"Correlation"</th><th>"Last error"</th>
                                </tr>
                            </thead>
                            <tbody>{page.events.into_iter().map(row).collect::<Vec<_>>()}</tbody>
                        </table>
                        <div class="pager">
                            <button
                                type="button"
                                id="page-prev"
                                disabled=!has_back
                                on:click=move |_| {
                                    let prev = back.try_update(|b| b.pop()).flatten().flatten();
                                    after.set(prev);
                                }
                            >
                                "← Previous page"
                            </button>
                            <button
                                type="button"
                                id="page-next"
                                disabled=next.is_none()
                                on:click=move |_| {
                                    back.update(|b| b.push(after.get_untracked()));
                                    after.set(next);
                                }
                            >
                                "Next page →"
                            </button>
                        </div>
                    }
                    .into_any()
                }
            }}
        </section>
    }
}
