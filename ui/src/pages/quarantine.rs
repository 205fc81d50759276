//! Quarantine (dead letter): quarantined events with their last error and attempts.
//! Replay or purge one, the selected ones, or all N matching the filter (with a
//! confirmation showing N; purge asks to type the word).

use leptos::prelude::*;
use switchboard_proto::{
    AgentSummary, BulkAction, EventFilter, EventId, EventStatus, OpsEvent, OpsEventPage,
};

use super::confirm::{Actions, ConfirmDialog, Outcome, Pending, Target};
use super::{error_box, loading};
use crate::api;
use crate::context::{Auth, Link, Nav};
use crate::format;
use crate::live::Live;
use crate::route::{EventQuery, events_api_path, href};

const PAGE: u32 = 100;

#[component]
pub(crate) fn QuarantinePage(query: EventQuery) -> impl IntoView {
    let nav = expect_context::<Nav>();
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let actions = Actions::new();
    let agent_input = RwSignal::new(query.agent.clone().unwrap_or_default());
    let selected = RwSignal::new(Vec::<EventId>::new());
    Effect::new(move |_| {
        actions.done.get();
        selected.set(Vec::new());
    });

    let q = query.with_status(EventStatus::Quarantined.as_str());
    let q_list = q.clone();
    let events = LocalResource::new(move || {
        live.version.get();
        let path = events_api_path(&q_list, None, PAGE);
        async move { api::get::<OpsEventPage>(&path).await }
    });
    // N for "all matching": the server's per-agent counts.
    let agent_filter = query.agent.clone();
    let count = LocalResource::new(move || {
        live.version.get();
        let agent = agent_filter.clone();
        async move {
            let agents = api::get::<Vec<AgentSummary>>("/api/v1/ops/agents").await?;
            Ok::<u64, api::ApiError>(
                agents
                    .iter()
                    .filter(|a| {
                        agent
                            .as_deref()
                            .is_none_or(|n| a.name == n || a.agent_id.to_string() == n)
                    })
                    .map(|a| a.counts.quarantined)
                    .sum(),
            )
        }
    });

    let filter = EventFilter {
        agent: query.agent.clone(),
        status: Some(EventStatus::Quarantined),
        correlation_id: None,
        q: None,
        priority: None,
    };
    let scope_words = match &query.agent {
        Some(a) => format!("all quarantined events of agent {a}"),
        None => "all quarantined events".to_owned(),
    };
    let apply = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let agent = agent_input.get_untracked();
        let q = EventQuery {
            agent: Some(agent.trim().to_owned()).filter(|a| !a.is_empty()),
            ..EventQuery::default()
        };
        nav.go(&href("/quarantine", &q));
    };
    let can_write = move || auth.can_write();
    let n = move || count.get().and_then(Result::ok).unwrap_or(0);

    let all_buttons = {
        let (f1, f2, w1, w2) = (filter.clone(), filter, scope_words.clone(), scope_words);
        move || {
            (can_write() && n() > 0).then(|| {
                let (f1, f2, w1, w2) = (f1.clone(), f2.clone(), w1.clone(), w2.clone());
                view! {
                    <button type="button" id="replay-all" on:click=move |_| actions.ask(Pending {
                        action: BulkAction::Replay, target: Target::Filter(f1.clone()), count: n(), what: w1.clone(),
                    })>{format!("Replay all {} matching", n())}</button>
                    <button type="button" id="purge-all" class="danger" on:click=move |_| actions.ask(Pending {
                        action: BulkAction::Purge, target: Target::Filter(f2.clone()), count: n(), what: w2.clone(),
                    })>{format!("Purge all {} matching…", n())}</button>
                }
            })
        }
    };
    let selected_buttons = move || {
        let ids = selected.get();
        (can_write() && !ids.is_empty()).then(|| {
            let k = ids.len() as u64;
            let ids2 = ids.clone();
            view! {
                <button type="button" id="replay-selected" class="primary" on:click=move |_| actions.ask(Pending {
                    action: BulkAction::Replay, target: Target::Ids(ids.clone()), count: k, what: "selected".to_owned(),
                })>{format!("Replay {} selected", k)}</button>
                <button type="button" id="purge-selected" class="danger" on:click=move |_| actions.ask(Pending {
                    action: BulkAction::Purge, target: Target::Ids(ids2.clone()), count: k, what: "selected".to_owned(),
                })>{format!("Purge {} selected…", k)}</button>
            }
        })
    };

    view! {
        <section id="quarantine">
            <h1>"Quarantine"</h1>
            <p class="muted">
                "Events whose attempts ran out, or that an agent failed for good. They stay here, never redelivered, until you replay or purge them."
            </p>
            <form class="filters" on:submit=apply>
                <label for="quarantine-agent">
                    "Agent"
                    <input
                        id="quarantine-agent"
                        type="search"
                        prop:value=move || agent_input.get()
                        on:input=move |ev| agent_input.set(event_target_value(&ev))
                    />
                </label>
                <button type="submit" id="quarantine-apply">"Filter"</button>
                <span class="spacer"></span>
                {selected_buttons}
                {all_buttons}
            </form>
            <Outcome actions=actions />
            {move || match events.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(page)) if page.events.is_empty() => view! {
                    <p class="empty" id="quarantine-empty">
                        "The quarantine is empty. Events land here when their attempts run out (max_attempts) or an agent releases them with \"terminal\": true."
                    </p>
                }.into_any(),
                Some(Ok(page)) => {
                    let ids: Vec<EventId> = page.events.iter().map(|e| e.event.event_id).collect();
                    let more = page.next_cursor.is_some();
                    view! {
                        <table id="quarantine-table">
                            <thead>
                                <tr>
                                    <th>
                                        {can_write().then(|| view! {
                                            <input
                                                type="checkbox"
                                                id="select-all"
                                                aria-label="Select all on this page"
                                                prop:checked=move || { let all = ids.clone(); selected.with(|s| !all.is_empty() && all.iter().all(|i| s.contains(i))) }
                                                on:change={
                                                    let ids = page.events.iter().map(|e| e.event.event_id).collect::<Vec<_>>();
                                                    move |ev| {
                                                        if event_target_checked(&ev) { selected.set(ids.clone()) } else { selected.set(Vec::new()) }
                                                    }
                                                }
                                            />
                                        })}
                                    </th>
                                    <th class="num">"Seq"</th><th>"Agent"</th><th class="num">"Attempts"</th>
                                    <th>"Last error"</th><th>"Since"</th><th></th>
                                </tr>
                            </thead>
                            <tbody>
                                {page.events.into_iter().map(|e| row(e, selected, actions, can_write())).collect::<Vec<_>>()}
                            </tbody>
                        </table>
                        {more.then(|| view! { <p class="muted">{format!("Showing the first {PAGE}; \"all matching\" covers every one.")}</p> })}
                    }.into_any()
                }
            }}
            <ConfirmDialog actions=actions />
        </section>
    }
}

fn row(
    e: OpsEvent,
    selected: RwSignal<Vec<EventId>>,
    actions: Actions,
    can_write: bool,
) -> AnyView {
    let id = e.event.event_id;
    let ev = e.event;
    let what = format!("event #{} of {}", ev.seq, e.agent_name);
    let (w1, w2) = (what.clone(), what);
    view! {
        <tr data-event=id.to_string()>
            <td>
                {can_write.then(|| view! {
                    <input
                        type="checkbox"
                        data-select=id.to_string()
                        aria-label=format!("Select event #{}", ev.seq)
                        prop:checked=move || selected.with(|s| s.contains(&id))
                        on:change=move |x| {
                            let on = event_target_checked(&x);
                            selected.update(|s| {
                                s.retain(|i| *i != id);
                                if on { s.push(id) }
                            });
                        }
                    />
                })}
            </td>
            <td class="num"><Link href=format!("/events/{id}")>{format!("#{}", ev.seq)}</Link></td>
            <td>{e.agent_name.clone()}</td>
            <td class="num">{format!("{}/{}", ev.attempts, ev.max_attempts)}</td>
            <td class="clip error" data-col="last-error">{ev.last_error.clone().unwrap_or_else(|| "–".to_owned())}</td>
            <td>{format::when(ev.created_at)}</td>
            <td class="row-actions">
                {can_write.then(|| view! {
                    <button type="button" data-replay=id.to_string() on:click=move |_| actions.ask(Pending {
                        action: BulkAction::Replay, target: Target::Ids(vec![id]), count: 1, what: w1.clone(),
                    })>"Replay"</button>
                    <button type="button" class="danger" data-purge=id.to_string() on:click=move |_| actions.ask(Pending {
                        action: BulkAction::Purge, target: Target::Ids(vec![id]), count: 1, what: w2.clone(),
                    })>"Purge…"</button>
                })}
            </td>
        </tr>
    }
    .into_any()
}
