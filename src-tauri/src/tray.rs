//! The tray icon: "Open console", "Pause notifications" (for 1 hour / until resumed /
//! resume) and "Quit" (the caller then stops the server gracefully). Its tooltip
//! shows the quarantined count, and the icon gets a red dot while anything is
//! quarantined; [`watch`] refreshes both.
//!
//! A disabled line says what the local token broker does ("Token broker: listening
//! on …" or "Token broker: off (why)", `broker.rs`).
//!
//! Building it succeeds even with no tray host (e.g. under bare Xvfb); it is then
//! simply invisible.

use std::collections::BTreeSet;
use std::time::Instant;

use switchboard_proto::CallbackId;

use switchboard_server::embed::Console;
use tauri::image::Image;
use tauri::menu::{Menu, MenuItem, PredefinedMenuItem, Submenu};
use tauri::tray::TrayIconBuilder;
use tauri::{App, AppHandle, Manager, Runtime};

use crate::pause::{Notifications, ONE_HOUR, Pause};
use crate::status::{self, Coalescer};

pub(crate) const TRAY_ID: &str = "switchboard";
const OPEN: &str = "open-console";
const PAUSE_HOUR: &str = "pause-1h";
const PAUSE: &str = "pause";
const RESUME: &str = "resume";
const QUIT: &str = "quit";
const BROKER: &str = "token-broker";

/// The tray's line about the local token broker (disabled: it only informs).
pub(crate) struct BrokerLine<R: Runtime>(MenuItem<R>);

/// Shows `text` on the tray's token broker line.
pub(crate) fn set_broker_line<R: Runtime>(app: &AppHandle<R>, text: &str) {
    if let Some(line) = app.try_state::<BrokerLine<R>>()
        && let Err(error) = line.0.set_text(text)
    {
        tracing::debug!(%error, "tray: could not set the token broker's line");
    }
}

pub(crate) fn install<R: Runtime>(app: &App<R>) -> tauri::Result<()> {
    let open = MenuItem::with_id(app, OPEN, "Open console", true, None::<&str>)?;
    let hour = MenuItem::with_id(app, PAUSE_HOUR, "For 1 hour", true, None::<&str>)?;
    let forever = MenuItem::with_id(app, PAUSE, "Until resumed", true, None::<&str>)?;
    let resume = MenuItem::with_id(app, RESUME, "Resume", true, None::<&str>)?;
    let pause = Submenu::with_items(
        app,
        "Pause notifications",
        true,
        &[&hour, &forever, &resume],
    )?;
    let broker = MenuItem::with_id(app, BROKER, "Token broker", false, None::<&str>)?;
    // Managed first, then filled in: a broker that finishes starting from now on
    // sets the line itself, and one that finished before left its status.
    app.manage(BrokerLine(broker.clone()));
    if let Some(hosted) = app.try_state::<std::sync::Arc<crate::broker::Hosted>>() {
        broker.set_text(hosted.status())?;
    }
    let quit = MenuItem::with_id(app, QUIT, "Quit", true, None::<&str>)?;
    let separator = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&open, &pause, &broker, &separator, &quit])?;
    let mut tray = TrayIconBuilder::with_id(TRAY_ID)
        .tooltip("Switchboard")
        .menu(&menu)
        .on_menu_event(|app, event| {
            let notes = app.state::<Notifications>();
            match event.id().as_ref() {
                OPEN => {
                    if let Err(error) = crate::show_console(app) {
                        tracing::error!(%error, "could not show the console window");
                    }
                }
                PAUSE_HOUR => notes.set(Pause::Until(Instant::now() + ONE_HOUR)),
                PAUSE => notes.set(Pause::Indefinite),
                RESUME => notes.set(Pause::Off),
                QUIT => app.exit(0),
                _ => {}
            }
        });
    if let Some(icon) = app.default_window_icon() {
        tray = tray.icon(icon.clone());
    }
    // The tray manager keeps the icon alive; the handle is not needed.
    tray.build(app)?;
    Ok(())
}

/// Polls the embedded server every [`status::INTERVAL`]: updates the tooltip and
/// reports each finished burst of quarantines (unless notifications are paused).
/// Runs until the app's runtime stops.
pub(crate) async fn watch<R: Runtime>(app: AppHandle<R>, server: Console) {
    let mut bursts = Coalescer::default();
    // Disabled webhook callbacks already told of (at start: those disabled before).
    let mut disabled_known: Option<BTreeSet<CallbackId>> = None;
    // Which icon the tray shows: `Some(true)` with the red dot (work is quarantined).
    let mut badge_shown: Option<bool> = None;
    // The first pass runs at once: it is the baseline (what is quarantined already at
    // start-up is not news).
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            tokio::time::sleep(status::INTERVAL).await;
        }
        if server.is_stopping() {
            return;
        }
        let counts = match server.quarantined().await {
            Ok(counts) => counts,
            Err(error) => {
                tracing::debug!(%error, "tray: could not read the inbox depth");
                continue;
            }
        };
        let total = counts.values().sum();
        let pause = app.state::<Notifications>().get();
        let now = Instant::now();
        if let Some(tray) = app.tray_by_id(TRAY_ID) {
            let text = status::tooltip(total, pause.describe(now).as_deref());
            if let Err(error) = tray.set_tooltip(Some(text)) {
                tracing::debug!(%error, "tray: could not set the tooltip");
            }
            let alert = total > 0;
            if badge_shown != Some(alert)
                && let Some(icon) = app.default_window_icon()
            {
                let icon = if alert {
                    Image::new_owned(
                        status::badged(icon.rgba(), icon.width(), icon.height()),
                        icon.width(),
                        icon.height(),
                    )
                } else {
                    icon.clone().to_owned()
                };
                match tray.set_icon(Some(icon)) {
                    Ok(()) => badge_shown = Some(alert),
                    Err(error) => tracing::debug!(%error, "tray: could not set the icon"),
                }
            }
        }
        notify_disabled(&app, &server, &mut disabled_known, pause.active(now)).await;
        for (agent, events) in bursts.observe(&counts) {
            if pause.active(now) {
                continue;
            }
            let last_error = server.last_quarantine_error(&agent).await;
            let text = status::burst_text(&agent, events, last_error.as_deref());
            let (app, home) = (app.clone(), crate::console_home(&app));
            crate::notify::quarantined(&text, move || {
                let mut url = home;
                url.set_path("/quarantine");
                url.query_pairs_mut().append_pair("agent", &agent);
                if let Err(error) = crate::open_console_at(&app, url) {
                    tracing::warn!(%error, "could not open the quarantine");
                }
            });
        }
    }
}

/// Tells of each webhook callback disabled since the last pass (by a 410, or after
/// failing too long; an operator's own disable too, which is harmless). The first
/// pass is the baseline.
async fn notify_disabled<R: Runtime>(
    app: &AppHandle<R>,
    server: &Console,
    known: &mut Option<BTreeSet<CallbackId>>,
    paused: bool,
) {
    let disabled = match server.disabled_callbacks().await {
        Ok(disabled) => disabled,
        Err(error) => {
            tracing::debug!(%error, "tray: could not read the webhook callbacks");
            return;
        }
    };
    let ids: BTreeSet<CallbackId> = disabled.keys().copied().collect();
    let Some(before) = known.replace(ids) else {
        return;
    };
    for (id, (agent, reason)) in disabled {
        if before.contains(&id) || paused {
            continue;
        }
        let text = format!("Webhook of agent {agent} disabled: {reason}");
        let (app, home) = (app.clone(), crate::console_home(app));
        crate::notify::callback_disabled(&text, move || {
            let mut url = home;
            url.set_path("/webhooks");
            if let Err(error) = crate::open_console_at(&app, url) {
                tracing::warn!(%error, "could not open the webhooks page");
            }
        });
    }
}
