//! Canadian social insurance number: nine digits (bare or `046 454 286`, spaces or
//! dashes), the first 1–7 or 9, valid under the Luhn check, found only after `SIN`
//! or `social insurance`: nine digits in groups of three are too common for a
//! one-in-ten check to tell alone.

use std::ops::Range;

use super::super::luhn_valid;
use super::{NINE_DIGITS, digits, free_standing, labelled};

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in NINE_DIGITS.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let d = digits(m.as_str());
        if caps[1] == caps[2]
            && !matches!(d[0], 0 | 8)
            && free_standing(text, &m.range())
            && labelled(text, m.start(), &[&["sin"], &["social", "insurance"]])
            && luhn_valid(&d)
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
    fn sins_after_their_label() {
        assert_eq!(scanned("SIN: 130 692 544"), [(5, 16)]);
        assert_eq!(scanned("social insurance number 130-692-544"), [(24, 35)]);
        for miss in [
            "SIN: 130 692 545", // wrong check
            "130 692 544",      // no label
            "SIN: 046 454 286", // a first digit of 0 is never issued
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }
}
