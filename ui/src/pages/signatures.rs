//! Signed requests (under Agents): the tenant's signature policy, which operators
//! who may write change here, and each agent's key state: how many keys its live
//! credentials have (a key binds its credential: every request with it must be
//! signed) and the newest one's id. Keys are registered and rotated by the agents
//! themselves (`switchboard agent key`, a device login); an operator ends one by
//! revoking its credential (Credentials).
//!
//! Hooks: `#signatures`, `#signature-policy` (the current policy's text),
//! `#signature-policy-select` and `#signature-policy-save` (writers only),
//! `#signature-policy-result` / `#signature-policy-error`, `#signature-keys-table`
//! with `tr[data-agent]` (the agent's name) and `td[data-col=keys|newest|credential]`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{SetSignaturePolicy, SignatureOverview};

use super::{error_box, loading};
use crate::api;
use crate::context::Auth;
use crate::format;
use crate::live::Live;

const POLICIES: [(&str, &str); 3] = [
    ("off", "off: signatures are ignored"),
    ("optional", "optional: verified when present (default)"),
    ("required", "required: unsigned agent calls are refused"),
];

#[component]
pub(crate) fn SignaturesPanel() -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<SignatureOverview>("/api/v1/ops/signatures")
    });
    let choice = RwSignal::new(String::new());
    let outcome = RwSignal::new(None::<Result<String, String>>);
    let save = move |_| {
        let policy = choice.get_untracked();
        if policy.is_empty() {
            return;
        }
        spawn_local(async move {
            let r = api::send::<_, SignatureOverview>(
                "PUT",
                "/api/v1/ops/signatures",
                &SetSignaturePolicy { policy },
            )
            .await;
            outcome.set(Some(match r {
                Ok(o) => Ok(format!("The policy is now {:?}", o.policy)),
                Err(e) => Err(e.detail),
            }));
            live.version.update(|v| *v += 1);
        });
    };
    let editor = move |current: String| {
        auth.can_write().then(|| {
            view! {
                <select id="signature-policy-select"
                    on:change=move |ev| choice.set(event_target_value(&ev))>
                    {POLICIES.iter().map(|(value, label)| view! {
                        <option value=*value selected=current == *value>{*label}</option>
                    }).collect::<Vec<_>>()}
                </select>
                <button type="button" id="signature-policy-save" on:click=save>"Set policy"</button>
            }
        })
    };
    view! {
        <section id="signatures">
            <h2>"Signed requests"</h2>
            <p class="muted">
                "Agents sign their calls (RFC 9421, Ed25519) with a key bound to their login. A credential with a key must sign every request, whatever the policy: a stolen token alone is useless. The policy says what happens to agent credentials without a key."
            </p>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(o)) => {
                    let rows = o.agents.iter().map(|a| {
                        let newest = a.keys.first();
                        view! {
                            <tr data-agent=a.name.clone()>
                                <td>{a.name.clone()}</td>
                                <td data-col="keys" class="num">{a.keys.len()}</td>
                                <td data-col="newest" class="muted">
                                    {newest.map_or_else(|| "– (unsigned)".to_owned(), |k| k.key.jkt.clone())}
                                </td>
                                <td data-col="credential" class="muted">
                                    {newest.map_or_else(|| "–".to_owned(), |k| k.credential.clone())}
                                </td>
                                <td>{newest.map_or_else(|| "–".to_owned(), |k| format::when(k.key.created_at))}</td>
                            </tr>
                        }
                    }).collect::<Vec<_>>();
                    view! {
                        <p>"Policy: " <strong id="signature-policy">{o.policy.clone()}</strong></p>
                        {editor(o.policy.clone())}
                        <table id="signature-keys-table">
                            <thead><tr>
                                <th>"Agent"</th><th class="num">"Keys"</th><th>"Newest key"</th>
                                <th>"Credential"</th><th>"Registered"</th>
                            </tr></thead>
                            <tbody>{rows}</tbody>
                        </table>
                    }.into_any()
                }
            }}
            {move || outcome.get().map(|o| match o {
                Ok(m) => view! { <p id="signature-policy-result" class="ok" role="status">{m}</p> }.into_any(),
                Err(m) => view! { <p id="signature-policy-error" class="error" role="alert">{m}</p> }.into_any(),
            })}
        </section>
    }
}
