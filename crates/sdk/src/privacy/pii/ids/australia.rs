//! Australian Medicare card numbers and tax file numbers.
//!
//! - **Medicare**: `2123 45670 1` as printed on the card: eight digits (the first
//!   2–6), a check digit, and the card's issue number. The check digit is the first
//!   eight weighted 1, 3, 7, 9, 1, 3, 7, 9, mod 10. Bare ten digits are left out.
//! - **Tax file number**: nine digits (bare or `123 456 782`, spaces or dashes)
//!   whose sum weighted 1, 4, 3, 7, 5, 8, 6, 9, 10 is a multiple of 11, found only
//!   after `TFN` or `tax file`: nine digits in groups of three are too common
//!   (amounts, Canadian SINs, ids) for a one-in-eleven check to tell alone.
//!
//! ABN and ACN (business and company numbers) are not matched: they identify
//! businesses and are published in the public register.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{NINE_DIGITS, digits, free_standing, labelled, standalone, weighted};

static MEDICARE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[2-6][0-9]{3} [0-9]{5} [0-9]\b").expect("Medicare pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in MEDICARE.find_iter(text) {
        let d = digits(m.as_str());
        if weighted(&d[..8], &[1, 3, 7, 9, 1, 3, 7, 9]) % 10 == d[8] && standalone(text, m.range())
        {
            out.push(m.range());
        }
    }
    for caps in NINE_DIGITS.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let d = digits(m.as_str());
        if caps[1] == caps[2]
            && free_standing(text, &m.range())
            && labelled(text, m.start(), &[&["tfn"], &["tax", "file"]])
            && weighted(&d, &[1, 4, 3, 7, 5, 8, 6, 9, 10]).is_multiple_of(11)
        {
            out.push(m.range());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(text: &str) -> Vec<(usize, usize)> {
        super::super::spans(scan, text)
    }

    #[test]
    fn medicare_numbers_with_their_check_digit() {
        for text in ["2123 45670 1", "4628 19486 3"] {
            assert_eq!(scanned(text), [(0, text.len())], "{text}");
        }
        for miss in [
            "2123 45671 1",
            "7123 45670 1",
            "2123456701",
            "2123 45670 1 5",
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn tax_file_numbers_after_their_label() {
        assert_eq!(scanned("TFN 123 456 782"), [(4, 15)]);
        assert_eq!(scanned("tax file number: 876543210"), [(17, 26)]);
        assert_eq!(scanned("TFN 123-456-782"), [(4, 15)]);
        for miss in [
            "TFN 123 456 783", // wrong check
            "123 456 782",     // no label
            "TFN 123 456-782", // mixed separators
            "TFN #123456782",  // not a word of prose
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }
}
