//! Polish PESEL: eleven digits, `YYMMDD` then a serial, a sex digit and a check
//! digit. The month carries the century: 01–12 for the 1900s, 21–32 for the 2000s
//! (the 1800s, 2100s and 2200s are left out: nobody alive, nobody yet). The date must
//! exist, and the check digit is 10 less the sum of the first ten digits weighted
//! 1, 3, 7, 9, 1, 3, 7, 9, 1, 3, mod 10. A bare number: it must stand as a word and
//! not follow a word that names another kind of number (see `ids.rs`).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, free_standing, is_date, number, other_number, weighted};

static PESEL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[0-9]{11}\b").expect("PESEL pattern compiles"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in PESEL.find_iter(text) {
        if free_standing(text, &m.range())
            && !other_number(text, m.start())
            && pesel_valid(&digits(m.as_str()))
        {
            out.push(m.range());
        }
    }
}

fn pesel_valid(d: &[u32]) -> bool {
    let (year, month) = match number(&d[2..4]) {
        m @ 1..=12 => (1900 + number(&d[..2]), m),
        m @ 21..=32 => (2000 + number(&d[..2]), m - 20),
        _ => return false,
    };
    let check = (10 - weighted(&d[..10], &[1, 3, 7, 9, 1, 3, 7, 9, 1, 3]) % 10) % 10;
    is_date(year, month, number(&d[4..6])) && d[10] == check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> bool {
        super::super::spans(scan, text) == [(0, text.len())]
    }

    #[test]
    fn pesels_with_their_date_and_check() {
        for text in ["44051401359", "02070803628", "89072741941"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "44051401358", // wrong check digit
            "44053201353", // 32 May: the check is right, the date is not
            "44851401353", // the 1800s (the check is right)
            "order 44051401359",
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
