//! The root component: the session check, the login page, the shell (header,
//! navigation, live indicator) and the page of the current route.
//!
//! Stable hooks for tests: `#app-ready` (the session check settled), `#login`,
//! `#overview` (only a logged-in console shows it), `#live[data-state]`, `#logout`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{Capabilities, CreateSession, SessionInfo};

use crate::context::{Auth, Nav, follow};
use crate::live::Live;
use crate::pages;
use crate::route::Route;
use crate::{api, summary};

/// Renders the console into `<body>`.
pub(crate) fn mount() {
    leptos::mount::mount_to_body(App);
}

#[component]
fn App() -> impl IntoView {
    let auth = Auth {
        session: RwSignal::new(None),
    };
    let checked = RwSignal::new(false);
    provide_context(auth);
    api::on_unauthorized(move || auth.session.set(None));
    spawn_local(async move {
        let who = api::get::<SessionInfo>("/api/v1/session").await;
        auth.session.set(who.ok());
        checked.set(true);
    });

    let nav = Nav {
        location: RwSignal::new(Nav::current()),
    };
    provide_context(nav);
    let _ = window_event_listener(leptos::ev::popstate, move |_| {
        nav.location.set(Nav::current());
    });

    let logged_in = Memo::new(move |_| auth.session.with(Option::is_some));
    let live = Live::start(Signal::derive(move || logged_in.get()));
    provide_context(live);

    let capabilities = LocalResource::new(|| api::get::<Capabilities>("/api/v1/capabilities"));

    view! {
        {move || {
            if !checked.get() {
                view! { <main class="center"><p class="muted">"Connecting to the server…"</p></main> }
                    .into_any()
            } else if logged_in.get() {
                view! { <Shell /> }.into_any()
            } else {
                view! { <Login /> }.into_any()
            }
        }}
        <footer class="foot">
            {move || match capabilities.get() {
                None => view! { <span id="server-info">"…"</span> }.into_any(),
                Some(Ok(caps)) => {
                    view! { <span id="server-info">{summary::server_line(&caps)}</span> }.into_any()
                }
                Some(Err(e)) => {
                    view! { <span id="server-info" class="error">{e.detail}</span> }.into_any()
                }
            }}
        </footer>
        {move || checked.get().then(|| view! { <span id="app-ready" hidden=true></span> })}
    }
}

#[component]
fn Login() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let token = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let t = token.get_untracked();
        if t.trim().is_empty() {
            error.set(Some("Paste the operator token first.".to_owned()));
            return;
        }
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match api::send::<_, SessionInfo>(
                "POST",
                "/api/v1/session",
                &CreateSession { token: t },
            )
            .await
            {
                Ok(info) => {
                    token.set(String::new());
                    auth.session.set(Some(info));
                }
                Err(e) => error.set(Some(e.detail)),
            }
            busy.set(false);
        });
    };
    view! {
        <main id="login" class="login">
            <h1>"Switchboard console"</h1>
            <form on:submit=submit>
                <label for="login-token">"Operator token"</label>
                <input
                    id="login-token"
                    type="password"
                    autocomplete="off"
                    spellcheck="false"
                    placeholder="sb_op_…"
                    prop:value=move || token.get()
                    on:input=move |ev| token.set(event_target_value(&ev))
                />
                <button id="login-submit" type="submit" disabled=move || busy.get()>
                    "Log in"
                </button>
            </form>
            {move || {
                error.get().map(|e| view! { <p id="login-error" class="error" role="alert">{e}</p> })
            }}
            <p class="muted">
                "The token is in the operator-token file next to the database (for "
                <code>"switchboard serve"</code>
                ", ~/.local/share/switchboard/operator-token). Or open the one-time link "
                <code>"switchboard serve"</code>
                " prints. The console keeps an HttpOnly session cookie, never the token."
            </p>
        </main>
    }
}

/// Navigation entries: path and label.
const SECTIONS: [(&str, &str); 9] = [
    ("/", "Overview"),
    ("/agents", "Agents"),
    ("/inbox", "Inbox"),
    ("/quarantine", "Quarantine"),
    ("/audit", "Audit"),
    ("/leases", "Leases"),
    ("/fencing", "Fencing"),
    ("/webhooks", "Webhooks"),
    ("/devices", "Devices"),
];

#[component]
fn Shell() -> impl IntoView {
    let auth = expect_context::<Auth>();
    let nav = expect_context::<Nav>();
    let live = expect_context::<Live>();
    let route = Memo::new(move |_| Route::parse(&nav.location.get()));
    let logout = move |_| {
        spawn_local(async move {
            let _ = api::send_empty("DELETE", "/api/v1/session").await;
            auth.session.set(None);
            nav.go("/");
        });
    };
    let read_only = move || {
        auth.session
            .with(|s| s.as_ref().is_some_and(|s| s.read_only))
    };
    view! {
        <header class="top">
            <span class="brand">"Switchboard"</span>
            <nav aria-label="Console sections">
                {SECTIONS
                    .iter()
                    .map(|(href, label)| {
                        let href = *href;
                        view! {
                            <a
                                href=href
                                data-nav=href
                                aria-current=move || (route.get().section() == href).then_some("page")
                                on:click=follow(nav, href.to_owned())
                            >
                                {*label}
                            </a>
                        }
                    })
                    .collect::<Vec<_>>()}
            </nav>
            <span class="spacer"></span>
            {move || read_only().then(|| view! { <span id="read-only" class="badge" title="This session may look but not change anything">"read-only"</span> })}
            <span
                id="live"
                data-state=move || live.state.get().as_str()
                role="status"
                class=move || format!("live {}", live.state.get().as_str())
            >
                {move || match live.state.get() {
                    crate::live::LiveState::Connected => "● Live",
                    crate::live::LiveState::Connecting => "○ Connecting…",
                    crate::live::LiveState::Disconnected => "○ Disconnected, reconnecting…",
                }}
            </span>
            <button id="logout" type="button" class="quiet" on:click=logout>"Log out"</button>
        </header>
        <div id="page" class="page">
            {move || match route.get() {
                Route::Overview => view! { <pages::overview::OverviewPage /> }.into_any(),
                Route::Agents => view! { <pages::agents::AgentsPage /> }.into_any(),
                Route::Inbox(q) => view! { <pages::inbox::InboxPage query=q /> }.into_any(),
                Route::Event(id) => view! { <pages::inspector::InspectorPage id=id /> }.into_any(),
                Route::Quarantine(q) => {
                    view! { <pages::quarantine::QuarantinePage query=q /> }.into_any()
                }
                Route::Audit => view! { <pages::audit::AuditPage /> }.into_any(),
                Route::Leases => view! { <pages::leases::LeasesPage /> }.into_any(),
                Route::Fencing => view! { <pages::fencing::FencingPage /> }.into_any(),
                Route::Webhooks => view! { <pages::webhooks::WebhooksPage /> }.into_any(),
                Route::Devices(marked) => view! { <pages::devices::DevicesPage marked=marked /> }.into_any(),
                Route::Authorize(request) => view! { <pages::authorize::AuthorizePage request=request /> }.into_any(),
                Route::NotFound(path) => view! { <pages::Placeholder what="Not found" detail=format!("The console has no page at {path}. Use the navigation above.") /> }.into_any(),
            }}
        </div>
    }
}
