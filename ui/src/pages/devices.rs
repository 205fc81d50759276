//! Devices: device login requests (RFC 8628) of the operator's tenant. A device
//! (`switchboard agent login --server …`) shows a code and this page's link; the
//! operator checks who asked, from where, for which agent, and approves (naming
//! the agent, created when it does not exist) or denies. The device's next poll
//! gets its tokens, or `access_denied`. `?user_code=` (the link the device shows)
//! marks that request.
//!
//! Hooks: `#devices-table`, `tr[data-code]` (the user code) with
//! `td[data-col=agent|client|source|state]` and `.marked` on the one the link
//! names, `input[data-agent]`, `button[data-approve]`, `button[data-deny]`,
//! `#devices-refresh`, `#device-result` / `#device-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{ApproveDevice, DeviceRequest};

use super::{error_box, loading, status_tag};
use crate::api;
use crate::context::Auth;
use crate::format;

#[component]
pub(crate) fn DevicesPage(#[prop(into)] marked: Option<String>) -> impl IntoView {
    let auth = expect_context::<Auth>();
    let version = RwSignal::new(0u64);
    let outcome: RwSignal<Option<Result<String, String>>> = RwSignal::new(None);
    let data = LocalResource::new(move || {
        version.get();
        api::get::<Vec<DeviceRequest>>("/api/v1/ops/device-requests")
    });
    let decide = move |code: String, agent: Option<String>| {
        spawn_local(async move {
            let path = match agent {
                Some(_) => format!("/api/v1/ops/device-requests/{code}/approve"),
                None => format!("/api/v1/ops/device-requests/{code}/deny"),
            };
            let r = match &agent {
                Some(agent) => {
                    let body = ApproveDevice {
                        agent: Some(agent.clone()),
                    };
                    api::send::<_, DeviceRequest>("POST", &path, &body).await
                }
                None => api::post::<DeviceRequest>(&path).await,
            };
            outcome.set(Some(match (r, agent) {
                (Ok(_), Some(agent)) => Ok(format!(
                    "{code} approved: the device logs in as {agent} at its next poll"
                )),
                (Ok(_), None) => Ok(format!(
                    "{code} denied: the device is told so at its next poll"
                )),
                (Err(e), _) => Err(e.detail),
            }));
            version.update(|v| *v += 1);
        });
    };
    let row = move |d: DeviceRequest| {
        let code = d.user_code.clone();
        let is_marked = marked.as_deref() == Some(code.as_str());
        let agent = RwSignal::new(d.agent_name.clone());
        let actions = (d.status == "pending" && auth.can_write()).then(|| {
            let (approve_code, deny_code) = (code.clone(), code.clone());
            view! {
                <input type="text" data-agent=code.clone() aria-label="Agent to log in as"
                    prop:value=move || agent.get()
                    on:input=move |ev| agent.set(event_target_value(&ev)) />
                <button type="button" data-approve=code.clone()
                    on:click=move |_| decide(approve_code.clone(), Some(agent.get_untracked()))>
                    "Approve"
                </button>
                <button type="button" data-deny=code.clone() class="danger"
                    on:click=move |_| decide(deny_code.clone(), None)>
                    "Deny"
                </button>
            }
        });
        view! {
            <tr data-code=code.clone() class=if is_marked { "marked" } else { "" }>
                <td><code>{code.clone()}</code></td>
                <td data-col="agent">{d.agent_name.clone()}</td>
                <td data-col="client">{d.client_id.clone()}</td>
                <td data-col="source">{d.source.clone()}<br/><span class="muted">{d.user_agent.clone()}</span></td>
                <td>{format::when(d.created_at)}</td>
                <td data-col="state">{status_tag(&d.status)}</td>
                <td class="row-actions">{actions}</td>
            </tr>
        }
    };
    view! {
        <section id="devices">
            <h1>"Devices"</h1>
            <p class="muted">
                "Devices asking to log in as an agent of this tenant ("
                <code>"switchboard agent login --server …"</code>
                "). Check who asked and from where before you approve: the device gets tokens that act as the agent until its login is revoked (Agents → Credentials)."
            </p>
            <button type="button" id="devices-refresh" on:click=move |_| version.update(|v| *v += 1)>"Refresh"</button>
            {move || outcome.get().map(|o| match o {
                Ok(m) => view! { <p id="device-result" class="ok" role="status">{m}</p> }.into_any(),
                Err(m) => view! { <p id="device-error" class="error" role="alert">{m}</p> }.into_any(),
            })}
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(list)) if list.is_empty() => view! {
                    <p class="empty" id="devices-empty">"No device is waiting. Requests show here for 10 minutes."</p>
                }.into_any(),
                Some(Ok(list)) => view! {
                    <table id="devices-table">
                        <thead><tr>
                            <th>"Code"</th><th>"Agent"</th><th>"Client"</th><th>"From"</th>
                            <th>"Asked"</th><th>"State"</th><th></th>
                        </tr></thead>
                        <tbody>{list.into_iter().map(row.clone()).collect::<Vec<_>>()}</tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}
