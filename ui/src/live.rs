//! Live updates from the operator stream (`/api/v1/ops/stream`, SSE), not polling.
//!
//! Every `changed` (or `resync`, or `client_settings`) event bumps [`Live::version`], at most once per
//! [`THROTTLE`]; pages re-read what they show when it changes. `sampled` bumps
//! [`Live::samples`] (the overview's charts) and `job` sets [`Live::job`] (bulk job
//! progress), `leases` bumps [`Live::leases`] and `callbacks` bumps
//! [`Live::callbacks`] (the webhooks page, coalesced like `changed`). The browser's
//! EventSource retries by itself after a dropped connection; when it gives up (for
//! example on a 401 or while the server is down), we open a new one after
//! [`RECONNECT`]. [`Live::state`] drives the indicator in the header.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use leptos::prelude::*;
use switchboard_proto::Job;
use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::EventSource;

/// Coalesces bursts of changes into one refresh.
const THROTTLE: Duration = Duration::from_millis(250);
/// Wait before opening a new stream after the browser gave up on one.
const RECONNECT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LiveState {
    Connecting,
    Connected,
    Disconnected,
}

impl LiveState {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Connected => "connected",
            Self::Disconnected => "disconnected",
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Live {
    pub(crate) version: RwSignal<u64>,
    pub(crate) state: RwSignal<LiveState>,
    /// Bumped when the server's history takes a sample (the overview's charts).
    pub(crate) samples: RwSignal<u64>,
    /// The latest `job` event: a bulk job's progress or end.
    pub(crate) job: RwSignal<Option<Job>>,
    /// Bumped on `leases` (a lease changed, or the fence refused a call).
    pub(crate) leases: RwSignal<u64>,
    /// Bumped on `callbacks` (a webhook callback was registered, changed or
    /// attempted), on `resync` and when the stream (re)opens.
    pub(crate) callbacks: RwSignal<u64>,
}

type Handlers = Vec<Closure<dyn FnMut(web_sys::Event)>>;

struct Stream {
    source: EventSource,
    // Kept alive as long as the source: the browser calls them.
    _handlers: Handlers,
}

impl Live {
    /// Opens the stream and keeps it open while `active` is true.
    pub(crate) fn start(active: Signal<bool>) -> Self {
        let live = Self {
            version: RwSignal::new(0),
            state: RwSignal::new(LiveState::Connecting),
            samples: RwSignal::new(0),
            job: RwSignal::new(None),
            leases: RwSignal::new(0),
            callbacks: RwSignal::new(0),
        };
        let current: Rc<RefCell<Option<Stream>>> = Rc::new(RefCell::new(None));
        let cur = current.clone();
        Effect::new(move |_| {
            if active.get() {
                open(live, cur.clone());
            } else if let Some(s) = cur.borrow_mut().take() {
                s.source.close();
            }
        });
        live
    }

    /// Asks pages to re-read now (after an action of our own).
    pub(crate) fn bump(&self) {
        self.version.update(|v| *v += 1);
    }

    /// Asks the webhooks page to re-read now.
    pub(crate) fn bump_callbacks(&self) {
        self.callbacks.update(|v| *v += 1);
    }
}

/// A handler that runs `bump` once [`THROTTLE`] after the first of a burst of events.
fn throttled(bump: impl Fn() + Clone + 'static) -> Closure<dyn FnMut(web_sys::Event)> {
    let pending = Rc::new(RefCell::new(false));
    Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        if pending.replace(true) {
            return;
        }
        let (pending, bump) = (pending.clone(), bump.clone());
        set_timeout(
            move || {
                pending.replace(false);
                bump();
            },
            THROTTLE,
        );
    })
}

fn open(live: Live, current: Rc<RefCell<Option<Stream>>>) {
    if let Some(old) = current.borrow_mut().take() {
        old.source.close();
    }
    live.state.set(LiveState::Connecting);
    let Ok(source) = EventSource::new("/api/v1/ops/stream") else {
        live.state.set(LiveState::Disconnected);
        return;
    };
    let on_change = throttled(move || live.bump());
    let on_open = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        live.state.set(LiveState::Connected);
        // Whatever happened while we were away: read it again.
        live.bump();
        live.bump_callbacks();
    });
    let on_error = {
        let current = current.clone();
        Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
            live.state.set(LiveState::Disconnected);
            let closed = current
                .borrow()
                .as_ref()
                .is_some_and(|s| s.source.ready_state() == EventSource::CLOSED);
            if closed {
                let current = current.clone();
                set_timeout(move || open(live, current), RECONNECT);
            }
        })
    };
    for kind in ["changed", "resync", "client_settings"] {
        let _ = source.add_event_listener_with_callback(kind, on_change.as_ref().unchecked_ref());
    }
    let on_sample = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        live.samples.update(|v| *v += 1);
    });
    let on_job = Closure::<dyn FnMut(web_sys::Event)>::new(move |ev: web_sys::Event| {
        let data = ev
            .dyn_ref::<web_sys::MessageEvent>()
            .and_then(|m| m.data().as_string());
        if let Some(job) = data.and_then(|d| serde_json::from_str::<Job>(&d).ok()) {
            live.job.set(Some(job));
        }
    });
    let on_leases = Closure::<dyn FnMut(web_sys::Event)>::new(move |_| {
        live.leases.update(|v| *v += 1);
    });
    let _ = source.add_event_listener_with_callback("leases", on_leases.as_ref().unchecked_ref());
    // Also on `resync`: the stream lagged, so a `callbacks` may have been lost.
    let on_callbacks = throttled(move || live.bump_callbacks());
    for kind in ["callbacks", "resync"] {
        let _ =
            source.add_event_listener_with_callback(kind, on_callbacks.as_ref().unchecked_ref());
    }
    let _ = source.add_event_listener_with_callback("sampled", on_sample.as_ref().unchecked_ref());
    let _ = source.add_event_listener_with_callback("job", on_job.as_ref().unchecked_ref());
    source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
    source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    *current.borrow_mut() = Some(Stream {
        source,
        _handlers: vec![
            on_change,
            on_open,
            on_error,
            on_sample,
            on_job,
            on_leases,
            on_callbacks,
        ],
    });
}
