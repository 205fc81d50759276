//! Webhooks: every callback registration of the tenant with its agent, URL, state,
//! last delivery, failure streak and why it is disabled; per row Re-verify,
//! Disable/Enable, Send test event and Delete (confirmed in a dialog), for sessions
//! with write access. Selecting a row lists its recent attempts. Live from the
//! stream's `callbacks` events. No answer of the API carries a secret, so the page
//! never shows one.
//!
//! Hooks: `#webhooks`, `#webhooks-table`, `tr[data-callback]` (with `data-state`
//! and `aria-selected`), `td[data-col=agent|url|state|last|streak|reason]`,
//! `#webhooks-empty`, `button[data-select]`, `button[data-verify]`,
//! `button[data-disable]`, `button[data-enable]`, `button[data-test]`,
//! `button[data-delete]`, `#action-busy`, `#action-result` and `#action-error` (each
//! with `data-callback`), `#confirm[data-action=delete]`, `#confirm-ok`,
//! `#confirm-cancel`, `#attempts[data-callback]`, `#attempts-table`,
//! `tr[data-attempt]` (with `data-kind`) and its `td[data-col=at|kind|status|error|latency]`,
//! `#attempts-empty`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{
    Callback as Registration, CallbackAttempt, CallbackId, CallbackState, Timestamp,
};
use wasm_bindgen::JsCast;

use super::{error_box, loading, ticking_now};
use crate::api::callbacks;
use crate::context::Auth;
use crate::format;
use crate::live::Live;

/// An operator's action on one callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Verify,
    Test,
    Disable,
    Enable,
    Delete,
}

impl Action {
    /// What the page says while the action runs.
    fn doing(self) -> &'static str {
        match self {
            Self::Verify => "Challenging the endpoint…",
            Self::Test => "Sending a test event…",
            Self::Disable => "Disabling…",
            Self::Enable => "Enabling…",
            Self::Delete => "Deleting…",
        }
    }
}

/// What the last action did, shown above the table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    callback: CallbackId,
    ok: bool,
    text: String,
}

/// The page's state, shared by its rows and its dialog (all signals: `Copy`).
#[derive(Clone, Copy)]
struct Page {
    live: Live,
    /// The selected callback and its agent's name (whose attempts are listed).
    selected: RwSignal<Option<(CallbackId, String)>>,
    outcome: RwSignal<Option<Outcome>>,
    /// The action in flight; one at a time, every button waits for it.
    busy: RwSignal<Option<Action>>,
    /// The callback the delete dialog asks about.
    deleting: RwSignal<Option<Registration>>,
}

impl Page {
    fn run(self, c: Registration, action: Action) {
        if self.busy.get_untracked().is_some() {
            return;
        }
        self.busy.set(Some(action));
        self.outcome.set(None);
        spawn_local(async move {
            let outcome = perform(&c, action).await;
            self.busy.set(None);
            if action == Action::Delete {
                self.deleting.set(None);
                if outcome.ok && self.is_selected(c.callback_id) {
                    self.selected.set(None);
                }
            }
            self.outcome.set(Some(outcome));
            // Read the list again now, whether or not the stream says so.
            self.live.bump_callbacks();
        });
    }

    fn is_selected(&self, id: CallbackId) -> bool {
        self.selected
            .with_untracked(|s| s.as_ref().is_some_and(|(s, _)| *s == id))
    }
}

/// `12 ms`, `1.4 s`.
fn took(latency_ms: u64) -> String {
    if latency_ms < 1000 {
        format!("{latency_ms} ms")
    } else {
        format!("{:.1} s", latency_ms as f64 / 1000.0)
    }
}

/// `HTTP 204 in 12 ms`, or `no HTTP answer after 10.0 s`.
fn answer(a: &CallbackAttempt) -> String {
    match a.status {
        Some(s) => format!("HTTP {s} in {}", took(a.latency_ms)),
        None => format!("no HTTP answer after {}", took(a.latency_ms)),
    }
}

/// `3m 04s ago`.
fn ago(now_ms: i64, t: Timestamp) -> String {
    let seconds = (now_ms - format::millis(t)).max(0) / 1000;
    format!("{} ago", format::age(seconds as f64))
}

async fn perform(c: &Registration, action: Action) -> Outcome {
    let id = c.callback_id;
    let (ok, text) = match action {
        Action::Verify => match callbacks::verify(id).await {
            Ok(a) => (
                true,
                format!(
                    "Verified: {} answered the challenge ({}).",
                    c.url,
                    answer(&a)
                ),
            ),
            Err(e) => (false, format!("Verification failed: {}", e.detail)),
        },
        Action::Test => match callbacks::test(id).await {
            Ok(a) => match (&a.error, a.status) {
                (None, _) => (
                    true,
                    format!("Test event delivered: {} answered {}.", c.url, answer(&a)),
                ),
                (Some(_), Some(_)) => (
                    false,
                    format!("Test event failed: {} answered {}.", c.url, answer(&a)),
                ),
                (Some(error), None) => (
                    false,
                    format!("Test event failed: {error} ({}).", answer(&a)),
                ),
            },
            Err(e) => (false, format!("Test event not sent: {}", e.detail)),
        },
        Action::Disable | Action::Enable => {
            match callbacks::set_enabled(id, action == Action::Enable).await {
                Ok(now) if now.state == CallbackState::Active => (
                    true,
                    format!(
                        "Enabled the callback of {}: deliveries resume now.",
                        now.agent
                    ),
                ),
                Ok(now) => (
                    true,
                    format!(
                        "Disabled the callback of {}: its events wait in the inbox.",
                        now.agent
                    ),
                ),
                Err(e) => (false, e.detail),
            }
        }
        Action::Delete => match callbacks::delete(id).await {
            Ok(()) => (
                true,
                format!(
                    "Deleted the callback of {} ({}); its events stay in the inbox.",
                    c.agent, c.url
                ),
            ),
            Err(e) => (false, e.detail),
        },
    };
    Outcome {
        callback: id,
        ok,
        text,
    }
}

#[component]
pub(crate) fn WebhooksPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let auth = expect_context::<Auth>();
    let now = ticking_now();
    let page = Page {
        live,
        selected: RwSignal::new(None),
        outcome: RwSignal::new(None),
        busy: RwSignal::new(None),
        deleting: RwSignal::new(None),
    };
    let list = LocalResource::new(move || {
        live.callbacks.get();
        callbacks::list()
    });
    // A selected callback that is gone (deleted here or elsewhere) is let go.
    Effect::new(move |_| {
        if let Some(Ok(all)) = list.get()
            && let Some((id, _)) = page.selected.get_untracked()
            && !all.iter().any(|c| c.callback_id == id)
        {
            page.selected.set(None);
        }
    });
    let shown = Memo::new(move |_| page.selected.get());

    view! {
        <section id="webhooks">
            <h1>"Webhooks"</h1>
            <p class="muted">
                "Agents in a stable, routable place get their inbox events as signed HTTPS POSTs instead of long-polling. A callback that fails for the configured period, or whose endpoint answers 410 Gone, is disabled; its events wait in the inbox."
            </p>
            {move || page.busy.get().map(|a| view! {
                <p id="action-busy" class="muted" role="status">{a.doing()}</p>
            })}
            {move || page.outcome.get().map(|o| {
                let id = o.callback.to_string();
                if o.ok {
                    view! { <p id="action-result" class="ok" role="status" data-callback=id>{o.text}</p> }.into_any()
                } else {
                    view! { <p id="action-error" class="error" role="alert" data-callback=id>{o.text}</p> }.into_any()
                }
            })}
            {move || match list.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(all)) if all.is_empty() => view! {
                    <p class="empty" id="webhooks-empty">
                        "No webhook callbacks. An agent registers one with "
                        <code>"POST /api/v1/agents/{agent}/callbacks"</code>
                        " and " <code>"{\"url\": \"https://…\", \"secret\": \"whsec_…\"}"</code>
                        " (Idempotency-Key required), or with "
                        <code>"switchboard agent callback add"</code>
                        ". The server first challenges the URL; once the endpoint answers with the HMAC of the challenge, the callback shows up here live."
                    </p>
                }.into_any(),
                Some(Ok(all)) => view! {
                    <table id="webhooks-table">
                        <thead><tr>
                            <th>"Agent"</th><th>"URL"</th><th>"State"</th><th>"Last delivery"</th>
                            <th class="num">"Failures"</th><th>"Disabled reason"</th><th></th>
                        </tr></thead>
                        <tbody>
                            {all.into_iter().map(|c| row(c, page, now, auth.can_write())).collect::<Vec<_>>()}
                        </tbody>
                    </table>
                }.into_any(),
            }}
            {move || shown.get().map(|(id, agent)| view! { <Attempts id=id agent=agent /> })}
            {move || delete_dialog(page)}
        </section>
    }
}

fn row(c: Registration, page: Page, now: RwSignal<i64>, can_write: bool) -> AnyView {
    let id = c.callback_id;
    let state = c.state.as_str();
    let active = c.state == CallbackState::Active;
    let agent = c.agent.clone();
    let last = c.last_delivery_at.map(|t| {
        let outcome = match (c.last_status, c.last_error.clone()) {
            (Some(s), _) => format!("HTTP {s}"),
            (None, Some(e)) => e,
            (None, None) => "no answer".to_owned(),
        };
        let failed = c.last_error.is_some();
        view! {
            <span title=format::when(t)>{move || ago(now.get(), t)}</span>
            " · "
            <span class=if failed { "error" } else { "ok" } data-status=c.last_status>{outcome}</span>
        }
    });
    let since = c
        .failing_since
        .map(|t| view! { <span class="muted">{move || format!(" (failing for {})", ago(now.get(), t).trim_end_matches(" ago"))}</span> });
    let select = {
        let agent = agent.clone();
        move |_| page.selected.set(Some((id, agent.clone())))
    };
    let actions = can_write.then(|| {
        let busy = move || page.busy.get().is_some();
        let (c1, c2, c3, c4) = (c.clone(), c.clone(), c.clone(), c.clone());
        let toggle = if active {
            Action::Disable
        } else {
            Action::Enable
        };
        view! {
            <button type="button" data-verify=id.to_string() disabled=busy
                title="Challenge the endpoint again with the stored secret"
                on:click=move |_| page.run(c1.clone(), Action::Verify)>"Re-verify"</button>
            // One button either way, only its attributes' values differ: Leptos
            // updates a row in place and would keep a `data-*` attribute's old name.
            <button type="button" disabled=busy
                data-disable=active.then(|| id.to_string())
                data-enable=(!active).then(|| id.to_string())
                on:click=move |_| page.run(c2.clone(), toggle)>{if active { "Disable" } else { "Enable" }}</button>
            <button type="button" data-test=id.to_string() disabled=busy
                title="POST a callback.test event (not from any inbox) and show the answer"
                on:click=move |_| page.run(c3.clone(), Action::Test)>"Send test event"</button>
            <button type="button" class="danger" data-delete=id.to_string() disabled=busy
                on:click=move |_| page.deleting.set(Some(c4.clone()))>"Delete…"</button>
        }
    });
    let streak_class = if c.failure_streak == 0 {
        "num"
    } else {
        "num error"
    };
    let is_selected = move || {
        page.selected
            .with(|s| s.as_ref().is_some_and(|(s, _)| *s == id))
    };
    view! {
        <tr data-callback=id.to_string() data-state=state
            aria-selected=move || is_selected().to_string()
            class=move || if is_selected() { "selected" } else { "" }
            // index.html has no rule for a selected row: mark it here.
            style=move || is_selected().then_some("background: var(--panel)")>
            <td data-col="agent" style="white-space: nowrap">
                <button type="button" class="link" data-select=id.to_string()
                    aria-pressed=move || is_selected().to_string()
                    title="Show this callback's recent attempts"
                    on:click=select>{agent.clone()}</button>
            </td>
            <td data-col="url"><code class="clip" title=c.url.clone()>{c.url.clone()}</code></td>
            <td data-col="state">
                <span class=format!("tag {state} {}", if active { "ok" } else { "error" })>{state}</span>
            </td>
            <td data-col="last">{last.map(IntoAny::into_any).unwrap_or_else(|| "never".into_any())}</td>
            <td data-col="streak" class=streak_class>
                {c.failure_streak}{since}
            </td>
            <td data-col="reason">{c.disabled_reason.clone().unwrap_or_else(|| "–".to_owned())}</td>
            <td class="row-actions">{actions}</td>
        </tr>
    }
    .into_any()
}

/// The selected callback's recent attempts, newest first, re-read live.
#[component]
fn Attempts(id: CallbackId, agent: String) -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.callbacks.get();
        callbacks::attempts(id)
    });
    view! {
        <section id="attempts" data-callback=id.to_string()>
            <h2>"Recent attempts of the callback of " {agent}</h2>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(attempts)) if attempts.is_empty() => view! {
                    <p class="empty" id="attempts-empty">"No attempts yet."</p>
                }.into_any(),
                Some(Ok(attempts)) => view! {
                    <table id="attempts-table">
                        <thead><tr>
                            <th>"When"</th><th>"Kind"</th><th class="num">"Status"</th>
                            <th>"Error"</th><th class="num">"Latency"</th>
                        </tr></thead>
                        <tbody>
                            {attempts.into_iter().enumerate().map(|(i, a)| view! {
                                <tr data-attempt=i data-kind=a.kind.clone()>
                                    <td data-col="at">{format::when(a.at)}</td>
                                    <td data-col="kind"><span class="tag">{a.kind.clone()}</span></td>
                                    <td data-col="status" class="num">
                                        {a.status.map_or_else(|| "–".to_owned(), |s| s.to_string())}
                                    </td>
                                    <td data-col="error" class=if a.error.is_some() { "clip error" } else { "clip" }
                                        title=a.error.clone()>
                                        {a.error.clone().unwrap_or_else(|| "–".to_owned())}
                                    </td>
                                    <td data-col="latency" class="num">{took(a.latency_ms)}</td>
                                </tr>
                            }).collect::<Vec<_>>()}
                        </tbody>
                    </table>
                }.into_any(),
            }}
        </section>
    }
}

/// The element that has focus now (to give it back when the dialog closes).
fn focused() -> Option<web_sys::HtmlElement> {
    web_sys::window()?
        .document()?
        .active_element()?
        .dyn_into::<web_sys::HtmlElement>()
        .ok()
}

/// The delete confirmation, while a callback waits for it. Modal for the keyboard
/// as `confirm.rs`'s dialog is: Tab moves between its two buttons, Escape closes it,
/// and focus returns to the button that opened it. Cancel has the focus first.
fn delete_dialog(page: Page) -> Option<AnyView> {
    let c = page.deleting.get()?;
    let opener = send_wrapper::SendWrapper::new(focused());
    on_cleanup(move || {
        if let Some(el) = opener.take() {
            let _ = el.focus();
        }
    });
    let ok = NodeRef::<leptos::html::Button>::new();
    let cancel = NodeRef::<leptos::html::Button>::new();
    Effect::new(move |_| {
        if let Some(el) = cancel.get() {
            let _ = el.focus();
        }
    });
    let on_key = move |ev: web_sys::KeyboardEvent| match ev.key().as_str() {
        "Escape" => page.deleting.set(None),
        "Tab" => {
            ev.prevent_default();
            let on_ok = ok.get().zip(focused()).is_some_and(|(b, f)| {
                let b: &web_sys::HtmlElement = &b;
                *b == f
            });
            let next = if on_ok { cancel.get() } else { ok.get() };
            if let Some(el) = next {
                let _ = el.focus();
            }
        }
        _ => {}
    };
    let text = format!(
        "Deliveries to {} stop and the registration is removed; the events stay in {}'s inbox. To get deliveries again the agent registers anew (with a new challenge).",
        c.url, c.agent
    );
    let title = format!("Delete the callback of {}?", c.agent);
    let target = c.clone();
    Some(
        view! {
            <div class="backdrop">
                <div
                    id="confirm"
                    role="dialog"
                    aria-modal="true"
                    aria-labelledby="confirm-title"
                    aria-describedby="confirm-text"
                    data-action="delete"
                    data-callback=c.callback_id.to_string()
                    on:keydown=on_key
                >
                    <h2 id="confirm-title">{title}</h2>
                    <p id="confirm-text">{text}</p>
                    <div class="buttons">
                        <button
                            id="confirm-ok"
                            type="button"
                            class="danger"
                            node_ref=ok
                            disabled=move || page.busy.get().is_some()
                            on:click=move |_| page.run(target.clone(), Action::Delete)
                        >
                            "Delete callback"
                        </button>
                        <button id="confirm-cancel" type="button" node_ref=cancel
                            on:click=move |_| page.deleting.set(None)>"Cancel"</button>
                    </div>
                </div>
            </div>
        }
        .into_any(),
    )
}
