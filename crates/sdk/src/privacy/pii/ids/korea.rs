//! Korean resident registration number and foreigner's registration number:
//! `YYMMDD-GNNNNNN`, with the dash. `G` gives sex and century: 1, 2, 5, 6 for the
//! 1900s, 3, 4, 7, 8 for the 2000s (5–8 for foreigners); the date must exist. Numbers
//! issued since October 2020 end in six random digits, so the old check digit is
//! not required: the dated shape is the test. Thirteen bare digits are left out:
//! they are the shape of millisecond Unix times.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, is_date, number, standalone};

static RRN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[0-9]{6}-[1-8][0-9]{6}\b").expect("RRN pattern compiles"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in RRN.find_iter(text) {
        let d = digits(m.as_str());
        let century = if matches!(d[6], 1 | 2 | 5 | 6) {
            1900
        } else {
            2000
        };
        let date = is_date(
            century + number(&d[..2]),
            number(&d[2..4]),
            number(&d[4..6]),
        );
        if date && standalone(text, m.range()) {
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
    fn dated_numbers_with_a_century_digit() {
        for text in ["800101-1234567", "040229-3000001", "991231-6000001"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "800230-1234567", // 30 February
            "000229-1000001", // 1900 was no leap year
            "800101-9234567", // the 1800s
            "8001011234567",  // no dash
            "1800101-1234567",
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
