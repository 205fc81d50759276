//! The tray's view of the server: the quarantined count in the tooltip, refreshed
//! every [`INTERVAL`] from the embedded server (`embed::Console::quarantined`, no
//! SQL here), plus the bursts of newly quarantined work the notifier reports.
//!
//! A *burst*: quarantines of one agent seen on consecutive polls. It is reported once,
//! when a poll sees no new ones for that agent (see [`Coalescer`]).

use std::collections::BTreeMap;
use std::time::Duration;

/// How often the tray polls the store.
pub(crate) const INTERVAL: Duration = Duration::from_secs(3);

/// The tray tooltip: `Switchboard · 3 quarantined` (plus the pause state).
pub(crate) fn tooltip(quarantined: u64, paused: Option<&str>) -> String {
    let mut s = if quarantined == 0 {
        "Switchboard · nothing quarantined".to_owned()
    } else {
        format!("Switchboard · {quarantined} quarantined")
    };
    if let Some(p) = paused {
        s.push_str(" · ");
        s.push_str(p);
    }
    s
}

/// Turns per-agent quarantined counts, polled over time, into finished bursts.
#[derive(Debug, Default)]
pub(crate) struct Coalescer {
    /// The last count seen per agent. `None` until the first poll: what is already in
    /// the quarantine at start-up is not news.
    last: Option<BTreeMap<String, u64>>,
    /// Agents with a burst in progress, and how many events it has so far.
    open: BTreeMap<String, u64>,
}

impl Coalescer {
    /// Feeds one poll (`agent name → quarantined count`); returns the bursts that ended
    /// with it, as `(agent, events)`.
    pub(crate) fn observe(&mut self, counts: &BTreeMap<String, u64>) -> Vec<(String, u64)> {
        let Some(last) = self.last.replace(counts.clone()) else {
            return Vec::new();
        };
        let mut grew = Vec::new();
        for (agent, &n) in counts {
            let before = last.get(agent).copied().unwrap_or(0);
            if n > before {
                *self.open.entry(agent.clone()).or_default() += n - before;
                grew.push(agent.clone());
            }
        }
        let ended: Vec<String> = self
            .open
            .keys()
            .filter(|a| !grew.contains(a))
            .cloned()
            .collect();
        ended
            .into_iter()
            .filter_map(|a| self.open.remove(&a).map(|n| (a, n)))
            .collect()
    }
}

/// The notification text for a burst.
pub(crate) fn burst_text(agent: &str, events: u64, last_error: Option<&str>) -> String {
    let what = if events == 1 {
        "1 event quarantined".to_owned()
    } else {
        format!("{events} events quarantined")
    };
    match last_error {
        Some(e) if !e.is_empty() => format!("{what} for agent {agent}: {e}"),
        _ => format!("{what} for agent {agent}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(a, n)| ((*a).to_owned(), *n)).collect()
    }

    #[test]
    fn tooltips_say_the_count_and_the_pause() {
        assert_eq!(tooltip(0, None), "Switchboard · nothing quarantined");
        assert_eq!(
            tooltip(3, Some("notifications paused")),
            "Switchboard · 3 quarantined · notifications paused"
        );
    }

    #[test]
    fn one_report_per_burst_after_it_ends() {
        let mut c = Coalescer::default();
        assert!(
            c.observe(&counts(&[("build-bot", 4)])).is_empty(),
            "what was there at start-up is not news"
        );
        assert!(
            c.observe(&counts(&[("build-bot", 5)])).is_empty(),
            "burst open"
        );
        assert!(
            c.observe(&counts(&[("build-bot", 7)])).is_empty(),
            "still growing"
        );
        assert_eq!(
            c.observe(&counts(&[("build-bot", 7)])),
            vec![("build-bot".to_owned(), 3)],
            "one report with the whole burst"
        );
        assert!(
            c.observe(&counts(&[("build-bot", 7)])).is_empty(),
            "reported once"
        );
        // A replay lowers the count; that is not a quarantine.
        assert!(c.observe(&counts(&[("build-bot", 0)])).is_empty());
        assert!(c.observe(&counts(&[("build-bot", 0)])).is_empty());
    }

    #[test]
    fn agents_burst_independently() {
        let mut c = Coalescer::default();
        c.observe(&counts(&[]));
        c.observe(&counts(&[("a", 1), ("b", 2)])); // both start a burst
        assert_eq!(
            c.observe(&counts(&[("a", 1), ("b", 3)])),
            vec![("a".to_owned(), 1)]
        );
        assert_eq!(
            c.observe(&counts(&[("a", 1), ("b", 3)])),
            vec![("b".to_owned(), 3)]
        );
    }

    #[test]
    fn burst_texts_name_the_agent_and_the_last_error() {
        assert_eq!(
            burst_text("build-bot", 3, Some("schema mismatch")),
            "3 events quarantined for agent build-bot: schema mismatch"
        );
        assert_eq!(burst_text("x", 1, None), "1 event quarantined for agent x");
    }
}

/// The tray icon's "something is quarantined" variant: `rgba` (`width`×`height`,
/// 4 bytes a pixel) with a red dot in the top-right corner.
pub(crate) fn badged(rgba: &[u8], width: u32, height: u32) -> Vec<u8> {
    let mut out = rgba.to_vec();
    let r = (width.min(height) / 3).max(2) as i64;
    let (cx, cy) = (width as i64 - r, r);
    for y in 0..height as i64 {
        for x in 0..width as i64 {
            let (dx, dy) = (x - cx, y - cy);
            if dx * dx + dy * dy <= r * r {
                let i = ((y * width as i64 + x) * 4) as usize;
                if let Some(px) = out.get_mut(i..i + 4) {
                    px.copy_from_slice(&[0xd0, 0x20, 0x20, 0xff]);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod badge_tests {
    use super::badged;

    #[test]
    fn the_dot_is_red_in_the_top_right_and_leaves_the_rest() {
        let (w, h) = (12u32, 12u32);
        let blue: Vec<u8> = std::iter::repeat_n([0x30, 0x60, 0xd0, 0xff], (w * h) as usize)
            .flatten()
            .collect();
        let out = badged(&blue, w, h);
        assert_eq!(out.len(), blue.len());
        let px = |x: u32, y: u32| &out[((y * w + x) * 4) as usize..((y * w + x) * 4 + 4) as usize];
        assert_eq!(px(w - 4, 4), [0xd0, 0x20, 0x20, 0xff], "inside the dot");
        assert_eq!(
            px(0, h - 1),
            [0x30, 0x60, 0xd0, 0xff],
            "bottom-left untouched"
        );
        assert_eq!(
            badged(&[], 0, 0),
            Vec::<u8>::new(),
            "no panic on an empty image"
        );
    }
}
