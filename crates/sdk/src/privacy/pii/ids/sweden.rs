//! Swedish personal identity number (personnummer) and coordination number
//! (samordningsnummer, the day plus 60): `YYMMDD-NNNC`, with `+` instead of `-`
//! from the hundredth birthday. The date must exist in the 1900s or 2000s and the
//! ten digits must pass the Luhn check.
//!
//! The twelve-digit form `YYYYMMDD-NNNC` is left out: it is the shape of dated
//! build and backup names (`20261129-0042`), and one in ten of those would pass.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::luhn_valid;
use super::{digits, is_date, number, standalone};

static PERSONNUMMER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9]{6}[-+][0-9]{4}\b").expect("personnummer pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in PERSONNUMMER.find_iter(text) {
        let d = digits(m.as_str());
        let (yy, month) = (number(&d[..2]), number(&d[2..4]));
        let day = match number(&d[4..6]) {
            day @ 61..=91 => day - 60,
            day => day,
        };
        let date = is_date(1900 + yy, month, day) || is_date(2000 + yy, month, day);
        if date && luhn_valid(&d) && standalone(text, m.range()) {
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
    fn numbers_with_their_date_and_luhn_digit() {
        for text in [
            "811218-9876",
            "880320-0016",
            "811218+9876", // a hundred years old or more
            "701063-2391", // a coordination number: 3 October 1970
        ] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "811218-9877",   // wrong check digit
            "8112189876",    // no separator
            "20811218-9876", // inside a longer number
            "811318-9875",   // month 13
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
