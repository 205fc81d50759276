//! How the console writes numbers, ages, times and countdowns. Pure functions,
//! unit-tested on the host.

use switchboard_proto::Timestamp;

/// A duration in seconds, short: `42s`, `3m 04s`, `2h 05m`, `3d 4h`.
pub(crate) fn age(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "0s".to_owned();
    }
    let s = seconds.floor() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A per-minute rate: whole numbers as such, small ones with one decimal.
pub(crate) fn rate(per_minute: f64) -> String {
    if !per_minute.is_finite() || per_minute <= 0.0 {
        "0".to_owned()
    } else if per_minute < 10.0 && per_minute.fract() != 0.0 {
        format!("{per_minute:.1}")
    } else {
        format!("{}", per_minute.round() as u64)
    }
}

/// A lease countdown from `now` to `until` (milliseconds since the epoch).
pub(crate) fn countdown(now_ms: i64, until_ms: i64) -> String {
    let left = until_ms - now_ms;
    if left > 0 {
        format!("expires in {}", age(((left + 999) / 1000) as f64))
    } else {
        format!("expired {} ago", age((-left / 1000) as f64))
    }
}

/// Milliseconds since the epoch of a wire timestamp.
pub(crate) fn millis(t: Timestamp) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

/// `2026-11-29 17:45:12Z`: a timestamp an operator can read and sort.
pub(crate) fn when(t: Timestamp) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A payload for the inspector: pretty JSON, or a note when it is gone.
pub(crate) fn payload(value: Option<&serde_json::Value>) -> String {
    match value {
        Some(v) => serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()),
        None => {
            "(no payload: it is dropped once the event is completed, expired or purged)".to_owned()
        }
    }
}

/// A latency in seconds: `850 µs`, `12 ms`, `1.4 s`; `–` when unknown.
pub(crate) fn latency(seconds: Option<f64>) -> String {
    match seconds {
        None => "–".to_owned(),
        Some(s) if !s.is_finite() || s < 0.0 => "–".to_owned(),
        Some(s) if s < 0.001 => format!("{:.0} µs", s * 1e6),
        Some(s) if s < 1.0 => format!("{:.0} ms", s * 1e3),
        Some(s) => format!("{s:.1} s"),
    }
}

/// `1 event` / `3 events`.
pub(crate) fn events(n: u64) -> String {
    if n == 1 {
        "1 event".to_owned()
    } else {
        format!("{n} events")
    }
}

/// The word an operator types to confirm a purge.
pub(crate) const PURGE_WORD: &str = "purge";

/// Whether the typed confirmation matches (surrounding spaces and case ignored).
pub(crate) fn confirmed(typed: &str) -> bool {
    typed.trim().eq_ignore_ascii_case(PURGE_WORD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_whole_or_one_decimal() {
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate(-1.0), "0");
        assert_eq!(rate(f64::NAN), "0");
        assert_eq!(rate(3.0), "3");
        assert_eq!(rate(2.5), "2.5");
        assert_eq!(rate(102.857), "103");
    }

    #[test]
    fn ages_are_short_and_never_negative() {
        assert_eq!(age(0.4), "0s");
        assert_eq!(age(59.9), "59s");
        assert_eq!(age(64.0), "1m 04s");
        assert_eq!(age(7500.0), "2h 05m");
        assert_eq!(age(3.0 * 86_400.0 + 4.0 * 3600.0), "3d 4h");
        assert_eq!(age(-5.0), "0s");
        assert_eq!(age(f64::NAN), "0s");
    }

    #[test]
    fn countdowns_round_up_while_running() {
        assert_eq!(countdown(1_000, 43_500), "expires in 43s");
        assert_eq!(countdown(1_000, 1_001), "expires in 1s", "never 'in 0s'");
        assert_eq!(countdown(10_000, 7_000), "expired 3s ago");
    }

    #[test]
    fn timestamps_are_utc_and_sortable() {
        let t = time::macros::datetime!(2026-11-29 18:45:12 +01:00);
        assert_eq!(when(t), "2026-11-29 17:45:12Z");
        assert_eq!(millis(t), 1_795_974_312_000);
    }

    #[test]
    fn payloads_are_pretty_or_explained() {
        let v = serde_json::json!({"task": "build"});
        assert_eq!(payload(Some(&v)), "{\n  \"task\": \"build\"\n}");
        assert!(payload(None).contains("no payload"));
    }

    #[test]
    fn latencies_pick_a_readable_unit() {
        assert_eq!(latency(None), "–");
        assert_eq!(latency(Some(0.00085)), "850 µs");
        assert_eq!(latency(Some(0.0123)), "12 ms");
        assert_eq!(latency(Some(1.44)), "1.4 s");
        assert_eq!(latency(Some(f64::NAN)), "–");
    }

    #[test]
    fn purge_needs_the_word() {
        assert!(confirmed(" Purge "));
        assert!(!confirmed("purg"));
        assert!(!confirmed(""));
        assert_eq!(events(1), "1 event");
        assert_eq!(events(3), "3 events");
    }
}
