//! Operator actions (replay, release, purge) with a confirmation that shows the count,
//! and type-to-confirm for purge. One [`Actions`] per page; the dialog and the result
//! line are its views.
//!
//! Hooks: `#confirm[data-action]`, `#confirm-text`, `#confirm-input` (purge only),
//! `#confirm-ok`, `#confirm-cancel`, `#action-result`, `#action-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{BulkAction, BulkRequest, BulkResult, EventFilter, EventId};

use crate::api;
use crate::format;
use crate::live::Live;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    Ids(Vec<EventId>),
    Filter(EventFilter),
}

/// An action waiting for the operator's confirmation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pending {
    pub(crate) action: BulkAction,
    pub(crate) target: Target,
    /// How many events it covers, as far as the console knows.
    pub(crate) count: u64,
    /// What it covers, in words ("selected", "all quarantined events of build-bot").
    pub(crate) what: String,
}

fn verb(action: BulkAction) -> (&'static str, &'static str) {
    match action {
        BulkAction::Replay => ("Replay", "Replayed"),
        BulkAction::Release => ("Release", "Released"),
        BulkAction::Purge => ("Purge", "Purged"),
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Actions {
    pending: RwSignal<Option<Pending>>,
    outcome: RwSignal<Option<Result<String, String>>>,
    busy: RwSignal<bool>,
    /// Bumped after each action that succeeded (pages clear their selection).
    pub(crate) done: RwSignal<u64>,
    live: Live,
}

impl Actions {
    /// Call in a component body (it reads the live context).
    pub(crate) fn new() -> Self {
        Self {
            live: expect_context::<Live>(),
            pending: RwSignal::new(None),
            outcome: RwSignal::new(None),
            busy: RwSignal::new(false),
            done: RwSignal::new(0),
        }
    }

    /// Opens the confirmation for `p`.
    pub(crate) fn ask(&self, p: Pending) {
        self.outcome.set(None);
        self.pending.set(Some(p));
    }

    fn run(self, p: Pending) {
        let live = self.live;
        self.busy.set(true);
        spawn_local(async move {
            let req = match &p.target {
                Target::Ids(ids) => BulkRequest {
                    ids: Some(ids.clone()),
                    filter: None,
                },
                Target::Filter(f) => BulkRequest {
                    ids: None,
                    filter: Some(f.clone()),
                },
            };
            let path = format!("/api/v1/ops/bulk/{}", p.action.as_str());
            let result = api::send::<_, BulkResult>("POST", &path, &req).await;
            self.busy.set(false);
            self.pending.set(None);
            match result {
                Ok(r) => {
                    let (_, done) = verb(p.action);
                    self.outcome.set(Some(Ok(format!(
                        "{done} {} (audit #{}).",
                        format::events(r.affected),
                        r.audit_id
                    ))));
                    self.done.update(|d| *d += 1);
                    live.bump();
                }
                Err(e) => self.outcome.set(Some(Err(e.detail))),
            }
        });
    }
}

/// The result of the last action, if any.
#[component]
pub(crate) fn Outcome(actions: Actions) -> impl IntoView {
    move || match actions.outcome.get() {
        None => None,
        Some(Ok(msg)) => {
            Some(view! { <p id="action-result" class="ok" role="status">{msg}</p> }.into_any())
        }
        Some(Err(msg)) => {
            Some(view! { <p id="action-error" class="error" role="alert">{msg}</p> }.into_any())
        }
    }
}

/// The confirmation dialog (rendered while an action waits for it).
#[component]
pub(crate) fn ConfirmDialog(actions: Actions) -> impl IntoView {
    move || {
        actions.pending.get().map(|p| {
            let typed = RwSignal::new(String::new());
            let purge = p.action == BulkAction::Purge;
            let (label, _) = verb(p.action);
            let title = format!("{label} {}?", format::events(p.count));
            let ok_label = format!("{label} {}", format::events(p.count));
            let input = NodeRef::<leptos::html::Input>::new();
            let ok = NodeRef::<leptos::html::Button>::new();
            Effect::new(move |_| {
                if let Some(el) = input.get() {
                    let _ = el.focus();
                } else if let Some(el) = ok.get() {
                    let _ = el.focus();
                }
            });
            let ready = move || !purge || format::confirmed(&typed.get());
            let p2 = p.clone();
            let p_enter = p.clone();
            let action = p.action.as_str();
            let text = format!("{label} {} ({}).", format::events(p.count), p.what);
            let consequence = match p.action {
                BulkAction::Replay => " They go back to pending with their attempts reset.",
                BulkAction::Release => {
                    " They go back to pending; the holder's claim token stops working."
                }
                BulkAction::Purge => " Their payloads are deleted. This cannot be undone.",
            };
            let confirm = move |_| {
                if ready() && !actions.busy.get_untracked() {
                    actions.run(p2.clone());
                }
            };
            let cancel = move |_| actions.pending.set(None);
            let on_key = move |ev: web_sys::KeyboardEvent| {
                if ev.key() == "Escape" {
                    actions.pending.set(None);
                }
            };
            view! {
                <div class="backdrop">
                    <div
                        id="confirm"
                        role="dialog"
                        aria-modal="true"
                        aria-labelledby="confirm-title"
                        data-action=action
                        on:keydown=on_key
                    >
                        <h2 id="confirm-title">{title}</h2>
                        <p id="confirm-text">{text}{consequence}</p>
                        {purge.then(|| view! {
                            <label for="confirm-input">
                                "Type " <code>{format::PURGE_WORD}</code> " to confirm"
                            </label>
                            <input
                                id="confirm-input"
                                node_ref=input
                                autocomplete="off"
                                prop:value=move || typed.get()
                                on:input=move |ev| typed.set(event_target_value(&ev))
                                on:keydown=move |ev: web_sys::KeyboardEvent| {
                                    if ev.key() == "Enter" && ready() && !actions.busy.get_untracked() {
                                        actions.run(p_enter.clone());
                                    }
                                }
                            />
                        })}
                        <div class="buttons">
                            <button
                                id="confirm-ok"
                                type="button"
                                node_ref=ok
                                class=if purge { "danger" } else { "primary" }
                                disabled=move || !ready() || actions.busy.get()
                                on:click=confirm
                            >
                                {ok_label}
                            </button>
                            <button id="confirm-cancel" type="button" on:click=cancel>"Cancel"</button>
                        </div>
                    </div>
                </div>
            }
        })
    }
}
