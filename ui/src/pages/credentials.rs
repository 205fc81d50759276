//! Credentials (under Agents): the tenant's static tokens (the operators', the
//! agents', the scrapers'), never the token itself, with revoke for operators who
//! may write. Revoking asks once more in the row. A revoked token is refused from the
//! next request; its console sessions end with it.
//!
//! Hooks: `#credentials-table`, `tr[data-token]` (the token id) with
//! `td[data-col=label|kind|agent|approved-by|state]`, `button[data-revoke]`, `#revoke-confirm`,
//! `#revoke-cancel`; the result is the Agents page's `#revoke-result` or
//! `#revoke-error` (one [`Revoker`] serves both tables).

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{Credential, Revoked};

use super::{error_box, loading};
use crate::api;
use crate::context::Auth;
use crate::format;
use crate::live::Live;

/// Revokes what `path` names after a confirmation; one per panel. Shared by the
/// credentials table (one token) and the agents table (every token of an agent).
#[derive(Clone, Copy)]
pub(crate) struct Revoker {
    /// What is waiting for confirmation: (key shown in the row, path, what it is).
    pub(crate) asking: RwSignal<Option<(String, String, String)>>,
    pub(crate) outcome: RwSignal<Option<Result<String, String>>>,
}

impl Revoker {
    pub(crate) fn new() -> Self {
        Self {
            asking: RwSignal::new(None),
            outcome: RwSignal::new(None),
        }
    }

    pub(crate) fn ask(&self, key: String, path: String, what: String) {
        self.outcome.set(None);
        self.asking.set(Some((key, path, what)));
    }

    pub(crate) fn is_asking(&self, key: &str) -> bool {
        self.asking
            .with(|a| a.as_ref().is_some_and(|(k, _, _)| k == key))
    }

    /// Runs the confirmed revocation, then refreshes the pages' data.
    pub(crate) fn confirm(&self) {
        let Some((_, path, what)) = self.asking.get_untracked() else {
            return;
        };
        let (asking, outcome) = (self.asking, self.outcome);
        let live = expect_context::<Live>();
        spawn_local(async move {
            let r = api::post::<Revoked>(&path).await;
            asking.set(None);
            outcome.set(Some(match r {
                Ok(Revoked { revoked: 0 }) => Ok(format!("{what}: nothing was live")),
                Ok(Revoked { revoked }) => Ok(format!(
                    "Revoked {revoked} token{} of {what}: refused from the next request",
                    if revoked == 1 { "" } else { "s" }
                )),
                Err(e) => Err(e.detail),
            }));
            live.version.update(|v| *v += 1);
        });
    }

    /// The row's buttons: "Revoke…", or the confirmation.
    pub(crate) fn buttons(&self, key: String, path: String, what: String) -> AnyView {
        let this = *self;
        let k = key.clone();
        view! {
            {move || if this.is_asking(&k) {
                view! {
                    <button type="button" id="revoke-confirm" class="danger"
                        on:click=move |_| this.confirm()>"Revoke now"</button>
                    <button type="button" id="revoke-cancel"
                        on:click=move |_| this.asking.set(None)>"Cancel"</button>
                }.into_any()
            } else {
                let (key, path, what) = (k.clone(), path.clone(), what.clone());
                view! {
                    <button type="button" data-revoke=key.clone()
                        on:click=move |_| this.ask(key.clone(), path.clone(), what.clone())>
                        "Revoke…"
                    </button>
                }.into_any()
            }}
        }
        .into_any()
    }

    /// The result line.
    pub(crate) fn outcome_view(&self, prefix: &'static str) -> impl IntoView + use<> {
        let outcome = self.outcome;
        move || {
            outcome.get().map(|o| match o {
                Ok(m) => {
                    view! { <p id=format!("{prefix}-result") class="ok" role="status">{m}</p> }
                        .into_any()
                }
                Err(m) => {
                    view! { <p id=format!("{prefix}-error") class="error" role="alert">{m}</p> }
                        .into_any()
                }
            })
        }
    }
}

#[component]
pub(crate) fn CredentialsPanel(revoker: Revoker) -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<Vec<Credential>>("/api/v1/ops/tokens")
    });
    // `approved_by` names a token by its id: shown by its label where it is listed.
    let row = move |(c, approver): (Credential, Option<String>)| {
        let state = match c.revoked_at {
            Some(at) => format!("revoked {}", format::when(at)),
            None => "live".to_owned(),
        };
        let buttons = (c.revoked_at.is_none() && auth.can_write()).then(|| {
            revoker.buttons(
                c.token_id.clone(),
                format!("/api/v1/ops/tokens/{}/revoke", c.token_id),
                c.label.clone(),
            )
        });
        view! {
            <tr data-token=c.token_id.clone()>
                <td data-col="label">{c.label.clone()}</td>
                <td data-col="kind">{c.kind.clone()}</td>
                <td data-col="agent">{c.agent_name.clone().unwrap_or_else(|| "–".to_owned())}</td>
                <td class="muted">{c.scopes.join(" ")}</td>
                <td>{format::when(c.created_at)}</td>
                <td data-col="approved-by" class="muted">{approver.unwrap_or_else(|| "–".to_owned())}</td>
                <td data-col="state" class=if c.revoked_at.is_some() { "muted" } else { "ok" }>{state}</td>
                <td class="row-actions">{buttons}</td>
            </tr>
        }
    };
    view! {
        <section id="credentials">
            <h2>"Credentials"</h2>
            <p class="muted">
                "The tenant's tokens. Only hashes are kept: a token is shown once, when it is made. Revoking one refuses it from the next request and ends the console sessions made from it, and every login it approved (Approved by)."
            </p>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(list)) => {
                    let label_of = |id: &str| {
                        list.iter()
                            .find(|c| c.token_id == id)
                            .map_or_else(|| id.to_owned(), |c| format!("{} ({id})", c.label))
                    };
                    let rows: Vec<_> = list
                        .iter()
                        .map(|c| (c.clone(), c.approved_by.as_deref().map(label_of)))
                        .collect();
                    view! {
                        <table id="credentials-table">
                            <thead><tr>
                                <th>"Label"</th><th>"Kind"</th><th>"Agent"</th><th>"Scopes"</th>
                                <th>"Created"</th><th>"Approved by"</th><th>"State"</th><th></th>
                            </tr></thead>
                            <tbody>{rows.into_iter().map(row).collect::<Vec<_>>()}</tbody>
                        </table>
                    }.into_any()
                }
            }}
        </section>
    }
}
