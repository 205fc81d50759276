//! Audit log: every operator action, newest first.

use leptos::prelude::*;
use switchboard_proto::{AuditEntry, AuditPage};

use super::{error_box, loading};
use crate::api;
use crate::format;
use crate::live::Live;

/// How a job went (`completed`, `cancelled at 3200 of 10000`), or `–` for an action
/// that ran at once.
fn job(e: &AuditEntry) -> String {
    match (e.job_state, e.job_total) {
        (Some(state), Some(total)) if e.count < total => {
            format!("{} at {} of {total}", state.as_str(), e.count)
        }
        (Some(state), _) => state.as_str().to_owned(),
        (None, _) => "–".to_owned(),
    }
}

/// What an action covered, in words.
fn scope(e: &AuditEntry) -> String {
    if let Some(target) = &e.target {
        return match &e.detail {
            Some(detail) => format!("{target}: {detail}"),
            None => target.clone(),
        };
    }
    match (&e.ids, &e.filter) {
        (Some(ids), _) => format!(
            "ids: {}",
            ids.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, Some(f)) => {
            let parts: Vec<String> = [
                f.agent.as_ref().map(|a| format!("agent={a}")),
                f.status.map(|s| format!("status={}", s.as_str())),
                f.correlation_id
                    .as_ref()
                    .map(|c| format!("correlation_id={c}")),
                f.q.as_ref().map(|q| format!("payload contains {q:?}")),
                f.priority.map(|p| format!("priority={p}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if parts.is_empty() {
                "filter: every event".to_owned()
            } else {
                format!("filter: {}", parts.join(", "))
            }
        }
        (None, None) => "–".to_owned(),
    }
}

#[component]
pub(crate) fn AuditPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<AuditPage>("/api/v1/ops/audit?limit=200")
    });
    view! {
        <section id="audit">
            <h1>"Audit log"</h1>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(page)) if page.entries.is_empty() => view! {
                    <p class="empty">"No operator actions yet. Every change an operator makes (replays, releases, purges, credentials, agents, devices, callbacks, settings, tenants) is recorded here, with who, what and how many."</p>
                }.into_any(),
                Some(Ok(page)) => view! {
                    <table id="audit-table">
                        <thead><tr><th>"When"</th><th>"Who"</th><th>"Action"</th><th class="num">"Count"</th><th>"Job"</th><th>"What"</th></tr></thead>
                        <tbody>
                            {page.entries.into_iter().map(|e| view! {
                                <tr data-audit-action=e.action.clone() data-audit-id=e.id>
                                    <td>{format::when(e.at)}</td>
                                    <td>{e.actor.clone()}</td>
                                    <td>{e.action.clone()}</td>
                                    <td class="num" data-col="count">{e.count}</td>
                                    <td data-col="job">{job(&e)}</td>
                                    <td class="scope">{scope(&e)}</td>
                                </tr>
                            }).collect::<Vec<_>>()}
                        </tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
