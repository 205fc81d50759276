//! South African ID number: thirteen digits, `YYMMDD` (a date of the 1900s or
//! 2000s), four for the sex and sequence, a citizenship digit (0 citizen, 1
//! permanent resident, 2 refugee), an 8 or 9, and a Luhn check digit. A bare
//! number: it must stand as a word and not follow a word that names another kind of
//! number (see `ids.rs`). Millisecond Unix times are thirteen digits too; their
//! month digits (`17[3-9]…`) are past 12 for every instant since 2024.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::luhn_valid;
use super::{digits, free_standing, is_date, number, other_number};

static ID_NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9]{10}[0-2][89][0-9]\b").expect("ID number pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in ID_NUMBER.find_iter(text) {
        let d = digits(m.as_str());
        let (yy, month, day) = (number(&d[..2]), number(&d[2..4]), number(&d[4..6]));
        let date = is_date(1900 + yy, month, day) || is_date(2000 + yy, month, day);
        if date
            && luhn_valid(&d)
            && free_standing(text, &m.range())
            && !other_number(text, m.start())
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
    fn id_numbers_with_their_date_and_luhn_digit() {
        for text in ["8001015009087", "7503305044089", "5402065770185"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "8001015009088", // wrong check digit
            "8013015009082", // month 13 (the check is right)
            "8001015009384", // citizenship digit 3 (the check is right)
            "1732895306121", // a millisecond Unix time
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
