//! Sign-in consent: an app on the operator's machine (the desktop console signing
//! in to this server) opened `/oauth/authorize` in the browser; the server checked
//! the request and served the console, which asked for a login first when there
//! was no session. This page says which app asks, where it listens, and for what;
//! Allow or Deny sends the request back to the server, which answers where the
//! browser goes next (the app's loopback address, with a code or a refusal).
//!
//! Hooks: `#authorize`, `#authorize-client`, `#authorize-listener`,
//! `#authorize-scopes li[data-scope]`, `#authorize-allow`, `#authorize-deny`,
//! `#authorize-error`, `#authorize-done`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{AuthorizeDecision, AuthorizeRedirect};

use crate::api;
use crate::route::SignInRequest;

#[component]
pub(crate) fn AuthorizePage(request: SignInRequest) -> impl IntoView {
    let error: RwSignal<Option<String>> = RwSignal::new(None);
    let done: RwSignal<Option<&'static str>> = RwSignal::new(None);
    let busy = RwSignal::new(false);
    let query = request.query.clone();
    let decide = move |allow: bool| {
        let body = AuthorizeDecision {
            request: query.clone(),
            allow,
        };
        busy.set(true);
        spawn_local(async move {
            let answer =
                api::send::<_, AuthorizeRedirect>("POST", "/api/v1/ops/authorizations", &body)
                    .await;
            match answer {
                Ok(next) => {
                    done.set(Some(if allow {
                        "Allowed: your browser now hands the sign-in to the app. You can close this tab."
                    } else {
                        "Denied: the app was told so."
                    }));
                    if let Some(w) = web_sys::window() {
                        let _ = w.location().set_href(&next.redirect_to);
                    }
                }
                Err(e) => {
                    error.set(Some(e.detail));
                    busy.set(false);
                }
            }
        });
    };
    let allow = decide.clone();
    let deny = decide;
    let scopes = request
        .scopes
        .iter()
        .map(|s| view! { <li data-scope=s.clone()><code>{s.clone()}</code></li> })
        .collect::<Vec<_>>();
    view! {
        <section id="authorize" class="card">
            <h1>"Sign in an app"</h1>
            <p>
                "The app "
                <strong id="authorize-client">{request.client_id.clone()}</strong>
                " on this computer, listening at "
                <code id="authorize-listener">{request.listener.clone()}</code>
                ", asks to act as you in this tenant with:"
            </p>
            <ul id="authorize-scopes">{scopes}</ul>
            <p class="muted">
                "Allow only if you started this sign-in yourself (for example from the \
                 Switchboard desktop app). The app gets a credential listed as \"sign-in: "
                {request.client_id.clone()}
                "\" under the tenant's tokens, revocable there; it holds no more than you do."
            </p>
            <div class="row-actions">
                <button id="authorize-allow" type="button" disabled=move || busy.get()
                    on:click=move |_| allow(true)>"Allow"</button>
                <button id="authorize-deny" type="button" class="danger" disabled=move || busy.get()
                    on:click=move |_| deny(false)>"Deny"</button>
            </div>
            {move || error.get().map(|e| view! { <p id="authorize-error" class="error" role="alert">{e}</p> })}
            {move || done.get().map(|d| view! { <p id="authorize-done" role="status">{d}</p> })}
        </section>
    }
}
