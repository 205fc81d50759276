//! Desktop notifications of quarantined work and of disabled webhook callbacks
//! (notify-rust over the session bus).
//! Failure to notify (no notification daemon, no session bus) is logged once, never
//! fatal. Showing one is blocking D-Bus work, so it runs on tokio's blocking pool.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Set after the first failure, so a missing daemon is reported once.
static FAILED_ONCE: AtomicBool = AtomicBool::new(false);
/// Notifications asked for, and those the daemon accepted (read by smoke mode).
static ASKED: AtomicU64 = AtomicU64::new(0);
static SHOWN: AtomicU64 = AtomicU64::new(0);

/// Shows "N events quarantined for agent X: last error". Clicking it (where the
/// platform reports clicks: freedesktop notification daemons) calls `on_click`.
pub(crate) fn quarantined(text: &str, on_click: impl FnOnce() + Send + 'static) {
    show("Work quarantined", "Open the quarantine", text, on_click);
}

/// Shows "Webhook disabled for agent X: reason"; a click opens the Webhooks page.
pub(crate) fn callback_disabled(text: &str, on_click: impl FnOnce() + Send + 'static) {
    show("Webhook disabled", "Open the webhooks", text, on_click);
}

fn show(
    summary: &'static str,
    action: &'static str,
    text: &str,
    on_click: impl FnOnce() + Send + 'static,
) {
    ASKED.fetch_add(1, Ordering::Relaxed);
    let text = text.to_owned();
    tokio::task::spawn_blocking(move || {
        let shown = notify_rust::Notification::new()
            .appname("Switchboard")
            .summary(summary)
            .body(&text)
            .action("default", action)
            .show();
        match shown {
            Ok(handle) => {
                SHOWN.fetch_add(1, Ordering::Relaxed);
                tracing::info!("notified: {text}");
                // Blocks this pool thread until the notification is clicked or closed.
                #[cfg(all(unix, not(target_os = "macos")))]
                handle.wait_for_action(|action| {
                    if action == "default" {
                        on_click();
                    }
                });
                #[cfg(not(all(unix, not(target_os = "macos"))))]
                let _ = (handle, on_click);
            }
            Err(error) => {
                if !FAILED_ONCE.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        %error,
                        "desktop notifications are unavailable; the tray tooltip still shows \
                         the quarantined count"
                    );
                }
            }
        }
    });
}

/// How many notifications were asked for, and how many the daemon accepted.
pub(crate) fn counts() -> (u64, u64) {
    (ASKED.load(Ordering::Relaxed), SHOWN.load(Ordering::Relaxed))
}
