//! Tenants (the deployment admin's view, `/admin/tenants`): shown under the Agents
//! page only to a session with the `admin` scope. Every other page shows the
//! signed-in tenant only, the admin's included. Creating a tenant shows its
//! operator token once, with the line its operators paste.
//!
//! Hooks: `#tenants`, `#tenants-table`, `tr[data-tenant]` (the name),
//! `td[data-col=agents|created]`, `#tenant-form`, `#tenant-name`, `#tenant-create`,
//! `#tenant-created` (with `code#tenant-token`), `#tenant-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{CreateTenant, TenantCreated, TenantSummary};

use super::{error_box, loading};
use crate::api;
use crate::context::Auth;
use crate::format;

/// The scope of the deployment admin.
const ADMIN: &str = "admin";

/// The tenant list and its create form, or nothing for a session without `admin`.
#[component]
pub(crate) fn TenantsPanel() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let is_admin = move || {
        auth.session.with(|s| {
            s.as_ref()
                .is_some_and(|s| s.scopes.iter().any(|x| x == ADMIN))
        })
    };
    view! { {move || is_admin().then(|| view! { <Tenants/> })} }
}

#[component]
fn Tenants() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let version = RwSignal::new(0u32);
    let data = LocalResource::new(move || {
        version.get();
        api::get::<Vec<TenantSummary>>("/api/v1/admin/tenants")
    });
    let name = RwSignal::new(String::new());
    let outcome = RwSignal::new(None::<Result<TenantCreated, String>>);
    let create = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let body = CreateTenant {
            name: name.get_untracked().trim().to_owned(),
        };
        spawn_local(async move {
            let r = api::send::<_, TenantCreated>("POST", "/api/v1/admin/tenants", &body).await;
            if r.is_ok() {
                name.set(String::new());
                version.update(|v| *v += 1);
            }
            outcome.set(Some(r.map_err(|e| e.detail)));
        });
    };
    let row = |t: TenantSummary| {
        view! {
            <tr data-tenant=t.name.clone()>
                <td>{t.name.clone()}</td>
                <td data-col="agents" class="num">{t.agents}</td>
                <td data-col="created">{format::when(t.created_at)}</td>
                <td class="muted"><code>{t.tenant_id.to_string()}</code></td>
            </tr>
        }
    };
    view! {
        <section id="tenants">
            <h2>"Tenants"</h2>
            <p class="muted">
                "You are the deployment admin. Each tenant is separate: its operators, agents and work are invisible to every other tenant. The other pages show your own tenant."
            </p>
            {move || auth.can_write().then(|| view! {
                <form id="tenant-form" class="filters" on:submit=create>
                    <label for="tenant-name">
                        "New tenant"
                        <input id="tenant-name" type="text" placeholder="team-name" size="24"
                            maxlength="64" prop:value=move || name.get()
                            on:input=move |ev| name.set(event_target_value(&ev)) />
                    </label>
                    <button type="submit" id="tenant-create">"Create"</button>
                </form>
            })}
            {move || outcome.get().map(|o| match o {
                Ok(t) => view! {
                    <div id="tenant-created" class="ok" role="status">
                        <p>{format!("Created {}. Its operator token, shown only now:", t.name)}</p>
                        <pre><code id="tenant-token">{t.operator_token.clone()}</code></pre>
                        <p class="muted">"Its operators log in to this console with it, or use it as SWITCHBOARD_TOKEN. The server keeps only a hash."</p>
                    </div>
                }.into_any(),
                Err(m) => view! { <p id="tenant-error" class="error" role="alert">{m}</p> }.into_any(),
            })}
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(tenants)) => view! {
                    <table id="tenants-table">
                        <thead><tr>
                            <th>"Tenant"</th><th class="num">"Agents"</th><th>"Created"</th><th>"Id"</th>
                        </tr></thead>
                        <tbody>{tenants.into_iter().map(row).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
