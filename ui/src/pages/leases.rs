//! Leases: every name + memory lease of the tenant with its holder, owner client,
//! fencing token and a live expiry countdown; force-release (operators with write
//! access, confirmed inline); and a memory's lineage as a tree. Live from the
//! stream's `leases` events.
//!
//! Hooks: `#leases-table`, `tr[data-lease]`, `td[data-col=...]`, `#leases-empty`,
//! `button[data-force]`, `button[data-force-confirm]`, `#lineage`,
//! `li[data-memory]`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{LeasePage, Lineage, Memory, MemoryId, OpsLease};

use super::{error_box, loading};
use crate::api;
use crate::context::Auth;
use crate::format;
use crate::live::Live;

fn short(id: impl ToString) -> String {
    let s = id.to_string();
    s.get(s.len().saturating_sub(8)..).unwrap_or(&s).to_owned()
}

#[component]
pub(crate) fn LeasesPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let now = super::ticking_now();
    let leases = LocalResource::new(move || {
        live.leases.get();
        api::get::<LeasePage>("/api/v1/ops/leases")
    });
    let selected = RwSignal::new(None::<MemoryId>);
    let confirming = RwSignal::new(None::<String>);
    let outcome = RwSignal::new(None::<Result<String, String>>);
    let force = move |l: OpsLease| {
        spawn_local(async move {
            let path = format!("/api/v1/ops/leases/{}/force-release", l.lease.lease_id);
            let r = api::send::<_, OpsLease>("POST", &path, &serde_json::json!({})).await;
            confirming.set(None);
            outcome.set(Some(match r {
                Ok(l) => Ok(format!(
                    "Forced out {} (token {}): its holder is refused from now on.",
                    l.lease.name, l.lease.fencing_token
                )),
                Err(e) => Err(e.detail),
            }));
        });
    };
    let row = move |l: OpsLease| {
        let id = l.lease.lease_id.to_string();
        let until = format::millis(l.lease.expires_at);
        let memory = l.lease.memory_instance_id;
        let can_write = auth.can_write();
        let (id2, id3, l2) = (id.clone(), id.clone(), l.clone());
        view! {
            <tr data-lease=id.clone() class=if l.expired { "muted" } else { "" }>
                <td data-col="name">
                    <code>{l.lease.name.clone()}</code>
                    {l.lease.display_name.clone().map(|d| view! {
                        " " <span class="muted" data-display-name="">{d}</span>
                    })}
                </td>
                <td data-col="memory">
                    <button type="button" class="link" title=memory.to_string()
                        on:click=move |_| selected.set(Some(memory))>{format!("…{}", short(memory))}</button>
                </td>
                <td data-col="holder">{l.holder.clone()}</td>
                <td data-col="owner">{l.lease.owner_client.clone().unwrap_or_else(|| "–".to_owned())}</td>
                <td data-col="token" class="num">{l.lease.fencing_token}</td>
                <td data-col="expires">{move || format::countdown(now.get(), until)}</td>
                <td class="row-actions">
                    {can_write.then(|| view! {
                        {move || if confirming.get().as_deref() == Some(id2.as_str()) {
                            let l3 = l2.clone();
                            view! {
                                <button type="button" class="danger" data-force-confirm=id3.clone()
                                    on:click=move |_| force(l3.clone())>"Force release"</button>
                                <button type="button" on:click=move |_| confirming.set(None)>"Keep"</button>
                            }.into_any()
                        } else {
                            let id4 = id3.clone();
                            view! {
                                <button type="button" data-force=id3.clone()
                                    on:click=move |_| confirming.set(Some(id4.clone()))>"Force release…"</button>
                            }.into_any()
                        }}
                    })}
                </td>
            </tr>
        }
        .into_any()
    };
    view! {
        <section id="leases">
            <h1>"Leases"</h1>
            <p class="muted">
                "Who runs as which agent name on which memory. A fencing token grows with every acquisition; a forced release moves it on, so the old holder's writes are refused."
            </p>
            {move || outcome.get().map(|o| match o {
                Ok(m) => view! { <p id="action-result" class="ok" role="status">{m}</p> }.into_any(),
                Err(m) => view! { <p id="action-error" class="error" role="alert">{m}</p> }.into_any(),
            })}
            {move || match leases.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(page)) if page.leases.is_empty() => view! {
                    <p class="empty" id="leases-empty">
                        "No leases. An agent takes one with POST /api/v1/leases {\"name\", \"memory_instance_id\", \"ttl_seconds\"} (Idempotency-Key required); it shows up here live."
                    </p>
                }.into_any(),
                Some(Ok(page)) => view! {
                    <table id="leases-table">
                        <thead><tr>
                            <th>"Name"</th><th>"Memory"</th><th>"Holder"</th><th>"Owner client"</th>
                            <th class="num">"Token"</th><th>"Expiry"</th><th></th>
                        </tr></thead>
                        <tbody>{page.leases.into_iter().map(row).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
            {move || selected.get().map(|m| view! { <LineageView memory=m /> })}
        </section>
    }
}

fn node(m: &Memory, current: MemoryId) -> AnyView {
    let id = m.memory_instance_id;
    let label = m.label.clone().map(|l| format!(" {l}")).unwrap_or_default();
    let at = m
        .branched_at_token
        .map(|t| format!(", branched at token {t}"))
        .unwrap_or_default();
    view! {
        <span data-memory=id.to_string() class=if id == current { "current" } else { "" }>
            <code>{format!("…{}", short(id))}</code>{label}
            <span class="muted">{format!(" (token {}{at})", m.fencing_token.unwrap_or_default())}</span>
        </span>
    }
    .into_any()
}

/// `children` of `parent` among `all`, as nested lists.
fn subtree(all: &[Memory], parent: MemoryId, current: MemoryId) -> AnyView {
    let kids: Vec<&Memory> = all
        .iter()
        .filter(|m| m.parent_memory_instance_id == Some(parent))
        .collect();
    if kids.is_empty() {
        return ().into_any();
    }
    view! {
        <ul>
            {kids.into_iter().map(|k| view! {
                <li data-memory=k.memory_instance_id.to_string()>
                    {node(k, current)}
                    {subtree(all, k.memory_instance_id, current)}
                </li>
            }).collect::<Vec<_>>()}
        </ul>
    }
    .into_any()
}

/// A memory's lineage: its ancestors down to it, then every branch below it.
#[component]
fn LineageView(memory: MemoryId) -> impl IntoView {
    let data = LocalResource::new(move || async move {
        api::get::<Lineage>(&format!("/api/v1/memories/{memory}/lineage")).await
    });
    view! {
        <section id="lineage">
            <h2>"Lineage of memory " <code>{format!("…{}", short(memory))}</code></h2>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(l)) => {
                    let mut chain: Vec<Memory> = l.ancestors.iter().rev().cloned().collect();
                    chain.push(l.memory.clone());
                    // Ancestors as a path down to this memory, its branches below it.
                    let mut tree = subtree(&l.descendants, memory, memory);
                    for m in chain.iter().rev() {
                        let inner = tree;
                        tree = view! {
                            <ul><li data-memory=m.memory_instance_id.to_string()>{node(m, memory)}{inner}</li></ul>
                        }.into_any();
                    }
                    tree
                }
            }}
        </section>
    }
}
