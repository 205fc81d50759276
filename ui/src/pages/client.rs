//! The client side of each agent, as its SDK reports it (`/ops/client-reports`):
//! the connection mode, the client (the SDK, or a front such as `switchboard mcp`
//! and its transport), the local outbox by state, and the entries the server
//! cannot see otherwise: poison on both sides of the wire, and outbox entries that
//! expired (not sent within the server's idempotency window, so not resent: a
//! resend could be stored twice; someone has to inspect and resend them by hand).

use leptos::prelude::*;
use switchboard_proto::{ClientPoison, ReceivedReport};

use super::{error_box, loading};
use crate::api;
use crate::format;
use crate::live::Live;

/// `sse`, `polling every 8 s`, `stopped`.
pub(crate) fn mode(report: &ReceivedReport) -> String {
    let inbox = &report.report.inbox;
    match (inbox.mode.as_str(), inbox.poll_interval_seconds) {
        ("polling", Some(s)) => format!("polling every {}", format::age(s)),
        (mode, _) => mode.to_owned(),
    }
}

/// `side` is `outbox` or `inbox` (poison) or `expired` (outbox entries past the
/// server's idempotency window).
fn poison_rows(name: &str, side: &'static str, entries: &[ClientPoison]) -> Vec<AnyView> {
    let tag = if side == "expired" {
        "tag expired"
    } else {
        "tag quarantined"
    };
    entries
        .iter()
        .map(|p| {
            view! {
                <li data-client-poison=side data-agent=name.to_owned()>
                    <span class=tag>{side}</span>" "
                    <strong>{name.to_owned()}</strong>" "
                    {p.target.clone().map(|t| format!("to {t} ")).unwrap_or_default()}
                    <code>{p.id.clone()}</code>" "
                    <span class="muted">{format::when(p.at)}</span>": "
                    {p.reason.clone()}
                </li>
            }
            .into_any()
        })
        .collect()
}

fn row(r: &ReceivedReport) -> AnyView {
    let o = &r.report.outbox;
    let i = &r.report.inbox;
    view! {
        <tr data-client-agent=r.name.clone()>
            <td>{r.name.clone()}</td>
            <td data-col="mode" class={if i.mode == "sse" { "ok" } else { "muted" }}>{mode(r)}</td>
            <td data-col="client" class="muted">{r.report.sdk.clone()}</td>
            <td data-col="reported">{format::when(r.received_at)}</td>
            <td data-col="outbox-open" class="num">{o.queued + o.sending + o.retryable}</td>
            <td data-col="outbox-retryable" class="num">{o.retryable}</td>
            <td data-col="outbox-poison" class={if o.poison > 0 { "num error" } else { "num" }}>{o.poison}</td>
            <td data-col="outbox-expired" class={if o.expired > 0 { "num error" } else { "num" }}>{o.expired}</td>
            <td data-col="handled" class="num">{i.handled}</td>
            <td data-col="deduplicated" class="num">{i.deduplicated}</td>
            <td data-col="local-quarantine" class={if i.poisoned > 0 { "num error" } else { "num" }}>{i.poisoned}</td>
        </tr>
    }
    .into_any()
}

/// The client-side table and poison list, under the Agents table.
#[component]
pub(crate) fn ClientSide() -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<Vec<ReceivedReport>>("/api/v1/ops/client-reports")
    });
    view! {
        <section id="client-side">
            <h2>"Client side"</h2>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(reports)) if reports.is_empty() => view! {
                    <p class="empty">
                        "No agent has reported its side yet. Agents running "
                        <code>"switchboard agent run"</code>
                        " or the SDK's Reporter show their outbox and connection here."
                    </p>
                }.into_any(),
                Some(Ok(reports)) => {
                    let poison: Vec<AnyView> = reports
                        .iter()
                        .flat_map(|r| {
                            let mut rows = poison_rows(&r.name, "outbox", &r.report.outbox_poison);
                            rows.extend(poison_rows(&r.name, "expired", &r.report.outbox_expired));
                            rows.extend(poison_rows(&r.name, "inbox", &r.report.inbox_poison));
                            rows
                        })
                        .collect();
                    let has_poison = !poison.is_empty();
                    view! {
                        <table id="client-table">
                            <thead>
                                <tr>
                                    <th>"Agent"</th><th>"Connection"</th>
                                    <th title="What the agent runs: the SDK, or a front over it such as switchboard mcp (MCP over stdio)">"Client"</th>
                                    <th>"Reported"</th>
                                    <th class="num">"Outbox open"</th><th class="num">"Retrying"</th>
                                    <th class="num">"Outbox poison"</th>
                                    <th class="num" title="Not sent within the server's idempotency window: not resent, since a resend could be stored twice">"Outbox expired"</th>
                                    <th class="num">"Handled"</th>
                                    <th class="num">"Deduplicated"</th><th class="num">"Quarantined locally"</th>
                                </tr>
                            </thead>
                            <tbody>{reports.iter().map(row).collect::<Vec<_>>()}</tbody>
                        </table>
                        {has_poison.then(|| view! {
                            <h3>"Client-side poison and expired entries"</h3>
                            <ul id="client-poison">{poison}</ul>
                        })}
                    }.into_any()
                }
            }}
        </section>
    }
}
