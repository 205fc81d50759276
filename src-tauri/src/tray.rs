//! The tray icon: "Open console" and "Quit". (The console issue adds status to it.)
//!
//! Building it succeeds even with no tray host (e.g. under bare Xvfb); it is then
//! simply invisible.

use tauri::menu::{Menu, MenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{App, Runtime};

const OPEN: &str = "open-console";
const QUIT: &str = "quit";

pub(crate) fn install<R: Runtime>(app: &App<R>) -> tauri::Result<()> {
    let open = MenuItem::with_id(app, OPEN, "Open console", true, None::<&str>)?;
    let quit = MenuItem::with_id(app, QUIT, "Quit", true, None::<&str>)?;
    let menu = Menu::with_items(app, &[&open, &quit])?;
    let mut tray = TrayIconBuilder::with_id("switchboard")
        .tooltip("Switchboard")
        .menu(&menu)
        .on_menu_event(|app, event| match event.id().as_ref() {
            OPEN => {
                if let Err(error) = crate::show_console(app) {
                    tracing::error!(%error, "could not show the console window");
                }
            }
            QUIT => app.exit(0),
            _ => {}
        });
    if let Some(icon) = app.default_window_icon() {
        tray = tray.icon(icon.clone());
    }
    // The tray manager keeps the icon alive; the handle is not needed.
    tray.build(app)?;
    Ok(())
}
