//! "Pause notifications" from the tray: for an hour, or until resumed. A flag the
//! notifier reads; nothing else depends on it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long "Pause for 1 hour" lasts.
pub(crate) const ONE_HOUR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Pause {
    #[default]
    Off,
    Until(Instant),
    Indefinite,
}

impl Pause {
    /// Whether notifications are paused at `now`.
    pub(crate) fn active(self, now: Instant) -> bool {
        match self {
            Self::Off => false,
            Self::Until(end) => now < end,
            Self::Indefinite => true,
        }
    }

    /// A few words for the tray tooltip, when paused.
    pub(crate) fn describe(self, now: Instant) -> Option<String> {
        match self {
            Self::Off => None,
            Self::Until(end) if now < end => {
                let mins = (end - now).as_secs().div_ceil(60);
                Some(format!("notifications paused for {mins} min"))
            }
            Self::Until(_) => None,
            Self::Indefinite => Some("notifications paused".to_owned()),
        }
    }
}

/// The app's pause state (Tauri managed state, shared by the tray and the notifier).
#[derive(Debug, Default)]
pub(crate) struct Notifications {
    pause: Mutex<Pause>,
}

impl Notifications {
    pub(crate) fn set(&self, pause: Pause) {
        *self.pause.lock().unwrap_or_else(|e| e.into_inner()) = pause;
    }

    pub(crate) fn get(&self) -> Pause {
        *self.pause.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hour_ends_and_until_resumed_does_not() {
        let now = Instant::now();
        let hour = Pause::Until(now + ONE_HOUR);
        assert!(hour.active(now));
        assert!(!hour.active(now + ONE_HOUR), "the hour is over");
        assert!(Pause::Indefinite.active(now + ONE_HOUR * 1000));
        assert!(!Pause::Off.active(now));
        assert_eq!(
            hour.describe(now).as_deref(),
            Some("notifications paused for 60 min")
        );
        assert_eq!(hour.describe(now + ONE_HOUR), None);
    }

    #[test]
    fn the_flag_is_shared_state() {
        let n = Notifications::default();
        assert_eq!(n.get(), Pause::Off);
        n.set(Pause::Indefinite);
        assert_eq!(n.get(), Pause::Indefinite);
    }
}
