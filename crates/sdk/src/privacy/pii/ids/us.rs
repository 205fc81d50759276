//! US Individual Taxpayer Identification Number: `9AA-GG-SSSS` (dashes or spaces,
//! the same separator twice) with a group in 50–65, 70–88, 90–92 or 94–99, except
//! 987-65-4320 to 987-65-4329 (reserved for advertisements). It has no check digit:
//! the leading 9 and the group ranges are the shape. (The SSN is in `pii.rs`.)

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::standalone;

static ITIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b9[0-9]{2}([- ])(?:5[0-9]|6[0-5]|7[0-9]|8[0-8]|9[0-2]|9[4-9])([- ])[0-9]{4}\b")
        .expect("ITIN pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in ITIN.captures_iter(text) {
        if caps[1] == caps[2]
            && let Some(m) = caps.get(0)
            && standalone(text, m.range())
            && !m.as_str().replace(' ', "-").starts_with("987-65-432")
        {
            out.push(m.range());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> bool {
        super::super::spans(scan, text) == [(0, text.len())]
    }

    #[test]
    fn itins_in_their_ranges() {
        for text in ["912-70-1234", "900 50 0000", "999-99-9999"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "912-40-1234",
            "912-93-1234",
            "987-65-4321",
            "912-70 1234",
            "812-70-1234",
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
