//! Event inspector: payload, attempts, last error, claim holder with a lease
//! countdown, and the timeline the server keeps for the event. Operators with write
//! access can release, replay or purge it from here.

use leptos::prelude::*;
use switchboard_proto::{BulkAction, EventDetail, EventStatus, Sender};

use super::confirm::{Actions, ConfirmDialog, Outcome, Pending, Target};
use super::{error_box, loading, status_tag};
use crate::api;
use crate::context::{Auth, Link};
use crate::format;
use crate::live::Live;
use crate::route::{EventQuery, encode, href};

#[component]
pub(crate) fn InspectorPage(id: String) -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let actions = Actions::new();
    let path = format!("/api/v1/ops/events/{}", encode(&id));
    let data = LocalResource::new(move || {
        live.version.get();
        let path = path.clone();
        async move { api::get::<EventDetail>(&path).await }
    });
    // The lease countdown ticks once a second.
    let now = super::ticking_now();

    view! {
        <section id="inspector">
            <p class="crumbs"><Link href="/inbox">"← Inbox"</Link></p>
            <h1>"Event " <code>{id.clone()}</code></h1>
            <Outcome actions=actions />
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(d)) => detail(d, now, actions, auth.can_write()),
            }}
            <ConfirmDialog actions=actions />
        </section>
    }
}

fn detail(d: EventDetail, now: RwSignal<i64>, actions: Actions, can_write: bool) -> AnyView {
    let ev = d.event.event.clone();
    let agent = d.event.agent_name.clone();
    let holder = agent.clone();
    let lease = d.event.lease_expires_at.map(format::millis);
    let agent_q = EventQuery {
        agent: Some(agent.clone()),
        ..EventQuery::default()
    };
    let sender = match &ev.sender {
        Sender::Operator => "operator".to_owned(),
        Sender::Agent { name, .. } => format!("agent {name}"),
    };
    let target = |action: BulkAction| Pending {
        action,
        target: Target::Ids(vec![ev.event_id]),
        count: 1,
        what: format!("event #{} of {agent}", ev.seq),
    };
    let release = target(BulkAction::Release);
    let replay = target(BulkAction::Replay);
    let purge = target(BulkAction::Purge);
    let status = ev.status;
    let buttons = can_write.then(|| {
        view! {
            <div class="buttons" id="event-actions">
                {(status == EventStatus::Claimed).then(|| view! {
                    <button type="button" id="event-release" on:click=move |_| actions.ask(release.clone())>"Release"</button>
                })}
                {(status == EventStatus::Quarantined).then(|| view! {
                    <button type="button" id="event-replay" class="primary" on:click=move |_| actions.ask(replay.clone())>"Replay"</button>
                })}
                {(!status.is_terminal()).then(|| view! {
                    <button type="button" id="event-purge" class="danger" on:click=move |_| actions.ask(purge.clone())>"Purge…"</button>
                })}
            </div>
        }
    });
    view! {
        <dl class="facts" id="event-facts" data-status=status.as_str()>
            <dt>"Agent"</dt><dd><Link href=href("/inbox", &agent_q)>{agent.clone()}</Link></dd>
            <dt>"Status"</dt><dd id="event-status">{status_tag(status.as_str())}</dd>
            <dt>"Sequence"</dt><dd>{ev.seq}</dd>
            <dt>"Attempts"</dt><dd id="event-attempts">{format!("{} of {}", ev.attempts, ev.max_attempts)}</dd>
            <dt>"Priority"</dt><dd>{ev.priority}</dd>
            <dt>"Sender"</dt><dd>{sender}</dd>
            <dt>"Correlation id"</dt><dd>{ev.correlation_id.clone().unwrap_or_else(|| "–".to_owned())}</dd>
            <dt>"Created"</dt><dd>{format::when(ev.created_at)}</dd>
            <dt>"Available at"</dt><dd>{format::when(ev.available_at)}</dd>
            <dt>"Last error"</dt><dd id="event-last-error" class=ev.last_error.is_some().then_some("error")>{ev.last_error.clone().unwrap_or_else(|| "–".to_owned())}</dd>
            <dt>"Claim"</dt>
            <dd id="event-claim">
                {match (status, lease) {
                    (EventStatus::Claimed, Some(until)) => view! {
                        "held by " {holder.clone()} ", lease "
                        <span id="lease-countdown">{move || format::countdown(now.get(), until)}</span>
                    }.into_any(),
                    _ => view! { "not claimed" }.into_any(),
                }}
            </dd>
        </dl>
        {buttons}
        <h2>"Payload"</h2>
        <pre id="payload">{format::payload(ev.payload.as_ref())}</pre>
        <h2>"Timeline"</h2>
        <ol id="timeline" class="timeline">
            {d.history.into_iter().map(|h| view! {
                <li data-action=h.action.clone()>
                    <time>{format::when(h.at)}</time>
                    " "
                    <strong>{h.action.clone()}</strong>
                    " by " {h.actor.clone()}
                    {h.detail.clone().map(|x| view! { <span class="muted">" · " {x}</span> })}
                </li>
            }).collect::<Vec<_>>()}
        </ol>
    }
    .into_any()
}
