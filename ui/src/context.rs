//! What the shell gives every page through Leptos' context: who is logged in
//! ([`Auth`]) and in-page navigation ([`Nav`], [`Link`]). Its own module, so the
//! shell (`app.rs`) and the pages (`pages/*`) both depend on it and not on each
//! other.

use leptos::prelude::*;
use switchboard_proto::SessionInfo;
use wasm_bindgen::JsValue;

/// Who is logged in; `None` shows the login page.
#[derive(Clone, Copy)]
pub(crate) struct Auth {
    pub(crate) session: RwSignal<Option<SessionInfo>>,
}

impl Auth {
    /// May this session change things (replay, release, purge)?
    pub(crate) fn can_write(&self) -> bool {
        self.session
            .with(|s| s.as_ref().is_some_and(|s| !s.read_only))
    }
}

/// Client-side navigation: the current `path?query`, kept in step with the history.
#[derive(Clone, Copy)]
pub(crate) struct Nav {
    pub(crate) location: RwSignal<String>,
}

impl Nav {
    pub(crate) fn current() -> String {
        web_sys::window()
            .map(|w| {
                let l = w.location();
                format!(
                    "{}{}",
                    l.pathname().unwrap_or_default(),
                    l.search().unwrap_or_default()
                )
            })
            .unwrap_or_else(|| "/".to_owned())
    }

    /// Goes to `href` (same origin) without reloading the page.
    pub(crate) fn go(&self, href: &str) {
        if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = history.push_state_with_url(&JsValue::NULL, "", Some(href));
        }
        self.location.set(href.to_owned());
        if let Some(w) = web_sys::window() {
            w.scroll_to_with_x_and_y(0.0, 0.0);
        }
    }
}

/// A plain click on an internal link navigates in-page; modified clicks (new tab,
/// new window) are left to the browser.
pub(crate) fn follow(nav: Nav, href: String) -> impl Fn(web_sys::MouseEvent) + 'static {
    move |ev: web_sys::MouseEvent| {
        if ev.button() == 0 && !ev.ctrl_key() && !ev.meta_key() && !ev.shift_key() && !ev.alt_key()
        {
            ev.prevent_default();
            nav.go(&href);
        }
    }
}

/// An internal link.
#[component]
pub(crate) fn Link(
    #[prop(into)] href: String,
    #[prop(optional, into)] id: Option<String>,
    children: Children,
) -> impl IntoView {
    let nav = expect_context::<Nav>();
    view! {
        <a href=href.clone() id=id on:click=follow(nav, href)>
            {children()}
        </a>
    }
}
