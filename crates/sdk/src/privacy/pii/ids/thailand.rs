//! Thai national identification number, as printed on the card:
//! `1-2345-67890-12-1` (dashes or spaces, one kind), the first digit 1–8. The last
//! digit is 11 less the sum of the first twelve weighted 13 down to 2, mod 11, mod
//! 10. Thirteen bare digits are left out: they are the shape of millisecond Unix
//! times, one in ten of which would pass.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, standalone, weighted};

static THAI_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[1-8]([- ])[0-9]{4}([- ])[0-9]{5}([- ])[0-9]{2}([- ])[0-9]\b")
        .expect("Thai id pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in THAI_ID.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let one_kind = (2..=4).all(|i| caps[i] == caps[1]);
        let d = digits(m.as_str());
        let check = (11 - weighted(&d[..12], &[13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2]) % 11) % 10;
        if one_kind && d[12] == check && standalone(text, m.range()) {
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
    fn grouped_numbers_with_their_check_digit() {
        for text in [
            "1-2345-45678-78-1",
            "3 1006 00445 63 5",
            "1-0309-77484-81-3",
        ] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "1-2345-45678-78-9", // wrong check digit
            "1-2345 45678-78-1", // mixed separators
            "9-2345-45678-78-1", // first digit 9
            "1234545678781",     // bare
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
