//! Desktop notifications of quarantined work (notify-rust over the session bus).
//! Failure to notify (no notification daemon, no session bus) is logged once, never
//! fatal. Showing one is blocking D-Bus work, so it runs on tokio's blocking pool.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set after the first failure, so a missing daemon is reported once.
static FAILED_ONCE: AtomicBool = AtomicBool::new(false);

/// Shows "N events quarantined for agent X: last error".
pub(crate) fn quarantined(text: &str) {
    let text = text.to_owned();
    tokio::task::spawn_blocking(move || {
        let shown = notify_rust::Notification::new()
            .appname("Switchboard")
            .summary("Work quarantined")
            .body(&text)
            .show();
        match shown {
            Ok(_) => tracing::info!("notified: {text}"),
            Err(error) => {
                if !FAILED_ONCE.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%error, "desktop notifications are unavailable; the tray tooltip still shows the quarantined count");
                }
            }
        }
    });
}
