//! Operator actions (replay, release, purge) with a confirmation that shows the count,
//! and type-to-confirm for purge. One [`Actions`] per page; the dialog and the result
//! line are its views. Actions on ids run at once; "all N matching" starts a server
//! job whose progress comes over the operator stream, with a Cancel button, and replay
//! can be paced (events per second).
//!
//! The dialog is modal for the keyboard too: Tab and Shift+Tab stay inside it, Escape
//! closes it, and focus returns to the button that opened it.
//!
//! Hooks: `#confirm[data-action]`, `#confirm-text`, `#confirm-input` (purge only),
//! `#confirm-rate` (replay of a filter), `#confirm-ok`, `#confirm-cancel`,
//! `#job[data-state]`, `#job-progress`, `#job-cancel`, `#action-result`,
//! `#action-error`.

use leptos::prelude::*;
use leptos::task::spawn_local;
use switchboard_proto::{
    BulkAction, BulkRequest, BulkResult, EventFilter, EventId, Job, JobState, StartJob,
};
use wasm_bindgen::JsCast;

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
    /// The job this page started, as last heard of.
    job: RwSignal<Option<Job>>,
    live: Live,
}

impl Actions {
    /// Call in a component body (it reads the live context).
    pub(crate) fn new() -> Self {
        let this = Self {
            live: expect_context::<Live>(),
            pending: RwSignal::new(None),
            outcome: RwSignal::new(None),
            busy: RwSignal::new(false),
            done: RwSignal::new(0),
            job: RwSignal::new(None),
        };
        // Progress of our job from the operator stream.
        Effect::new(move |_| {
            if let Some(heard) = this.live.job.get() {
                this.follow(heard);
            }
        });
        this
    }

    /// Takes news of a job: ours, and newer than what we know.
    fn follow(self, heard: Job) {
        let Some(ours) = self.job.get_untracked() else {
            return;
        };
        let newer = heard.job_id == ours.job_id
            && ours.state.is_live()
            && (!heard.state.is_live() || heard.done >= ours.done);
        if !newer {
            return;
        }
        let ended = !heard.state.is_live();
        self.job.set(Some(heard.clone()));
        if ended {
            self.outcome.set(Some(job_outcome(&heard)));
            self.done.update(|d| *d += 1);
            self.live.bump();
        }
    }

    fn cancel_job(self, job_id: i64) {
        spawn_local(async move {
            let path = format!("/api/v1/ops/jobs/{job_id}/cancel");
            match api::send::<_, Job>("POST", &path, &serde_json::json!({})).await {
                Ok(job) => self.follow(job),
                Err(e) => self.outcome.set(Some(Err(e.detail))),
            }
        });
    }

    /// Opens the confirmation for `p`.
    pub(crate) fn ask(&self, p: Pending) {
        self.outcome.set(None);
        self.pending.set(Some(p));
    }

    fn run(self, p: Pending, rate: Option<u32>) {
        let live = self.live;
        self.busy.set(true);
        spawn_local(async move {
            let filter = match &p.target {
                Target::Ids(ids) => {
                    let req = BulkRequest {
                        ids: Some(ids.clone()),
                        filter: None,
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
                    return;
                }
                Target::Filter(f) => f.clone(),
            };
            let req = StartJob {
                action: p.action,
                ids: None,
                filter: Some(filter),
                rate_per_second: rate,
            };
            let started = api::send::<_, Job>("POST", "/api/v1/ops/jobs", &req).await;
            self.busy.set(false);
            match started {
                Ok(job) => {
                    self.pending.set(None);
                    let id = job.job_id;
                    self.job.set(Some(job.clone()));
                    // A short job may have ended before we knew its id: ask once.
                    let now = api::get::<Job>(&format!("/api/v1/ops/jobs/{id}"))
                        .await
                        .unwrap_or(job);
                    self.follow(now);
                }
                Err(e) => {
                    self.pending.set(None);
                    self.outcome.set(Some(Err(e.detail)));
                }
            }
        });
    }
}

/// What an ended job did, in words.
fn job_outcome(job: &Job) -> Result<String, String> {
    let (_, done) = verb(job.action);
    let n = format::events(job.done);
    match job.state {
        JobState::Completed => Ok(format!("{done} {n} (audit #{}).", job.job_id)),
        JobState::Cancelled => Ok(format!(
            "Cancelled: {} {n} of {} first (audit #{}).",
            done.to_lowercase(),
            job.total,
            job.job_id
        )),
        _ => Err(format!(
            "The job stopped ({}) after {n} of {}: {} (audit #{}).",
            job.state.as_str(),
            job.total,
            job.error
                .clone()
                .unwrap_or_else(|| "the server stopped".to_owned()),
            job.job_id
        )),
    }
}

/// A running job: progress and Cancel.
#[component]
pub(crate) fn JobProgress(actions: Actions) -> impl IntoView {
    move || {
        let job = actions.job.get()?;
        let live = job.state.is_live();
        let (label, _) = verb(job.action);
        let doing = match job.state {
            JobState::Cancelling => "Cancelling".to_owned(),
            _ => format!("{}ing", label.trim_end_matches('e')),
        };
        let id = job.job_id;
        live.then(|| {
            view! {
                <div id="job" class="job" role="status" data-state=job.state.as_str()>
                    <span id="job-text">
                        {format!("{doing}: {} of {}", job.done, format::events(job.total))}
                        {job.rate_per_second.map(|r| format!(" at {r}/s"))}
                    </span>
                    <progress id="job-progress" max=job.total.max(1).to_string() value=job.done.to_string()></progress>
                    {(job.state == JobState::Running).then(|| view! {
                        <button type="button" id="job-cancel" on:click=move |_| actions.cancel_job(id)>"Cancel"</button>
                    })}
                </div>
            }
        })
    }
}

/// The result of the last action, if any.
#[component]
pub(crate) fn Outcome(actions: Actions) -> impl IntoView {
    view! {
        <JobProgress actions=actions />
        {move || match actions.outcome.get() {
            None => None,
            Some(Ok(msg)) => {
                Some(view! { <p id="action-result" class="ok" role="status">{msg}</p> }.into_any())
            }
            Some(Err(msg)) => {
                Some(view! { <p id="action-error" class="error" role="alert">{msg}</p> }.into_any())
            }
        }}
    }
}

/// Keeps Tab and Shift+Tab inside `dialog`: from the last focusable element to the
/// first, and back.
fn trap_tab(dialog: &web_sys::HtmlElement, ev: &web_sys::KeyboardEvent) {
    let Ok(list) =
        dialog.query_selector_all("button:not([disabled]), input:not([disabled]), [href]")
    else {
        return;
    };
    let items: Vec<web_sys::HtmlElement> = (0..list.length())
        .filter_map(|i| list.item(i)?.dyn_into::<web_sys::HtmlElement>().ok())
        .collect();
    let (Some(first), Some(last)) = (items.first(), items.last()) else {
        ev.prevent_default();
        return;
    };
    let active = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.active_element());
    let at = |el: &web_sys::HtmlElement| {
        active
            .as_ref()
            .is_some_and(|a| a == el.unchecked_ref::<web_sys::Element>())
    };
    let inside = items.iter().any(at);
    if ev.shift_key() && (at(first) || !inside) {
        ev.prevent_default();
        let _ = last.focus();
    } else if !ev.shift_key() && (at(last) || !inside) {
        ev.prevent_default();
        let _ = first.focus();
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

/// The confirmation dialog (rendered while an action waits for it).
#[component]
pub(crate) fn ConfirmDialog(actions: Actions) -> impl IntoView {
    move || {
        actions.pending.get().map(|p| {
            let opener = send_wrapper::SendWrapper::new(focused());
            on_cleanup(move || {
                if let Some(el) = opener.take() {
                    let _ = el.focus();
                }
            });
            let typed = RwSignal::new(String::new());
            let rate = RwSignal::new(String::new());
            let purge = p.action == BulkAction::Purge;
            let paced = p.action == BulkAction::Replay && matches!(p.target, Target::Filter(_));
            let (label, _) = verb(p.action);
            let title = format!("{label} {}?", format::events(p.count));
            let ok_label = format!("{label} {}", format::events(p.count));
            let input = NodeRef::<leptos::html::Input>::new();
            let ok = NodeRef::<leptos::html::Button>::new();
            let dialog = NodeRef::<leptos::html::Div>::new();
            Effect::new(move |_| {
                if let Some(el) = input.get() {
                    let _ = el.focus();
                } else if let Some(el) = ok.get() {
                    let _ = el.focus();
                }
            });
            let ready = move || !purge || format::confirmed(&typed.get());
            let pace = move || rate.get_untracked().trim().parse::<u32>().ok();
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
            let background = matches!(p.target, Target::Filter(_)).then_some(
                " It runs on the server in batches; you can cancel it while it runs.",
            );
            let confirm = move |_| {
                if ready() && !actions.busy.get_untracked() {
                    actions.run(p2.clone(), pace());
                }
            };
            let cancel = move |_| actions.pending.set(None);
            let on_key = move |ev: web_sys::KeyboardEvent| match ev.key().as_str() {
                "Escape" => actions.pending.set(None),
                "Tab" => {
                    if let Some(d) = dialog.get() {
                        trap_tab(&d, &ev);
                    }
                }
                _ => {}
            };
            view! {
                <div class="backdrop">
                    <div
                        id="confirm"
                        role="dialog"
                        aria-modal="true"
                        aria-labelledby="confirm-title"
                        aria-describedby="confirm-text"
                        data-action=action
                        node_ref=dialog
                        on:keydown=on_key
                    >
                        <h2 id="confirm-title">{title}</h2>
                        <p id="confirm-text">{text}{consequence}{background}</p>
                        {paced.then(|| view! {
                            <label for="confirm-rate">
                                "Pace (events per second, empty for no limit)"
                                <input
                                    id="confirm-rate"
                                    type="number"
                                    min="1"
                                    max="10000"
                                    inputmode="numeric"
                                    prop:value=move || rate.get()
                                    on:input=move |ev| rate.set(event_target_value(&ev))
                                />
                            </label>
                        })}
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
                                        actions.run(p_enter.clone(), None);
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
