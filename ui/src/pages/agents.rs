//! Agents: one row per agent with its inbox depth by status; click through to its
//! inbox or quarantine. Below: each agent's client side (`client.rs`) and the
//! remote client settings (`settings.rs`), and for the deployment admin the
//! tenants (`tenants.rs`).

use leptos::prelude::*;
use switchboard_proto::AgentSummary;

use super::client::ClientSide;
use super::settings::ClientSettingsPanel;
use super::tenants::TenantsPanel;
use super::{error_box, loading};
use crate::api;
use crate::context::Link;
use crate::format;
use crate::live::Live;
use crate::route::{EventQuery, href};

fn row(a: AgentSummary) -> AnyView {
    let q = EventQuery {
        agent: Some(a.name.clone()),
        ..EventQuery::default()
    };
    let c = a.counts.clone();
    let online = if a.subscribers > 0 {
        format!("online ({})", a.subscribers)
    } else {
        "offline".to_owned()
    };
    let name = a.name.clone();
    view! {
        <tr data-agent=a.name.clone()>
            <td><Link href=href("/inbox", &q)>{name}</Link></td>
            <td data-col="online" class={if a.subscribers > 0 { "ok" } else { "muted" }}>{online}</td>
            <td data-col="pending" class="num">{c.pending}</td>
            <td data-col="claimed" class="num">{c.claimed}</td>
            <td data-col="quarantined" class="num">
                <Link href=href("/quarantine", &q)>{c.quarantined}</Link>
            </td>
            <td data-col="completed" class="num">{c.completed}</td>
            <td data-col="cursor" class="num" title="head cursor (oldest valid cursor)">
                {format!("{} ({})", a.head_cursor, a.oldest_cursor)}
            </td>
            <td data-col="oldest-pending">
                {a.oldest_pending_age_seconds.map(format::age).unwrap_or_else(|| "–".to_owned())}
            </td>
            <td data-col="last-seen">
                {a.last_seen_at.map(format::when).unwrap_or_else(|| "never".to_owned())}
            </td>
        </tr>
    }
    .into_any()
}

#[component]
pub(crate) fn AgentsPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<Vec<AgentSummary>>("/api/v1/ops/agents")
    });
    view! {
        <section id="agents">
            <h1>"Agents"</h1>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(agents)) if agents.is_empty() => view! {
                    <p class="empty">
                        "No agents yet. Create one with "
                        <code>"POST /api/v1/ops/agents"</code>
                        "; it appears here as soon as it exists."
                    </p>
                }.into_any(),
                Some(Ok(agents)) => view! {
                    <table id="agents-table">
                        <thead>
                            <tr>
                                <th>"Agent"</th><th>"Online"</th><th class="num">"Pending"</th>
                                <th class="num">"Claimed"</th><th class="num">"Quarantined"</th>
                                <th class="num">"Completed"</th><th class="num">"Cursor"</th>
                                <th>"Oldest pending"</th><th>"Last seen"</th>
                            </tr>
                        </thead>
                        <tbody>{agents.into_iter().map(row).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
            <ClientSide/>
            <ClientSettingsPanel/>
            <TenantsPanel/>
        </section>
    }
}
