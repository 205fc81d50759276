//! Phone numbers, refused unless a schema allows `phone` on the field.
//!
//! - **International**: `+`, then 8–15 digits (E.164's limit, country code
//!   included) in groups separated by single spaces, dots or dashes, the second
//!   group optionally in parentheses: `+44 20 7946 0958`, `+1-212-555-0147`.
//! - **North American**: `(212) 555-0147`, `212-555-0147` or `212.555.0147` with
//!   one separator kind; area code and exchange start with 2–9. Bare ten-digit
//!   numbers are not matched (`2147483647`, ids, timestamps).
//!
//! A match glued to more digits by a separator (`1.212.555.0147.3`) is part of
//! something else and is not matched.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::finding::PiiKind;
use super::ids::standalone;

static INTERNATIONAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\w+])(\+[1-9]\d{0,3}(?:[ .-]?\(?\d{1,5}\)?){1,6})")
        .expect("phone pattern compiles")
});
static NANP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:\([2-9]\d{2}\) ?[2-9]\d{2}-\d{4}|\b[2-9]\d{2}([-.])[2-9]\d{2}([-.])\d{4})\b")
        .expect("phone pattern compiles")
});

/// Phone numbers in `text`.
pub(super) fn scan(text: &str) -> Vec<(PiiKind, Range<usize>)> {
    let mut out: Vec<(PiiKind, Range<usize>)> = Vec::new();
    for caps in INTERNATIONAL.captures_iter(text) {
        let Some(m) = caps.get(1) else { continue };
        let digits = m.as_str().bytes().filter(u8::is_ascii_digit).count();
        let next_is_digit = text[m.end()..].starts_with(|c: char| c.is_ascii_digit());
        if (8..=15).contains(&digits) && !next_is_digit && standalone(text, m.range()) {
            out.push((PiiKind::Phone, m.range()));
        }
    }
    for caps in NANP.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let same = match (caps.get(1), caps.get(2)) {
            (Some(a), Some(b)) => a.as_str() == b.as_str(),
            _ => true,
        };
        let inside = out
            .iter()
            .any(|(_, s)| s.start < m.end() && m.start() < s.end);
        if same && !inside && standalone(text, m.range()) {
            out.push((PiiKind::Phone, m.range()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phones_in_common_formats() {
        for text in [
            "+44 20 7946 0958",
            "+1-212-555-0147",
            "+33 6 12 34 56 78",
            "+81312345678",
            "(212) 555-0147",
            "212-555-0147",
            "212.555.0147",
        ] {
            assert_eq!(scan(text), vec![(PiiKind::Phone, 0..text.len())], "{text}");
        }
    }

    #[test]
    fn numbers_that_are_not_phones_pass() {
        for miss in [
            "+1 vote",
            "+100 points",
            "2147483647",
            "212-555.0147",
            "1.212.555.0147.3",
            "2026-11-29",
            "ISBN 978-3-16-148410-0",
            "10.212.55.1",
            "C++14",
        ] {
            assert!(scan(miss).is_empty(), "{miss}");
        }
    }
}
