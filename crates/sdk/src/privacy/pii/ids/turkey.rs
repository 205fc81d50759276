//! Turkish identification number (T.C. kimlik no): eleven digits, the first not 0.
//! Two check digits: the tenth is seven times the sum of the odd-placed digits
//! (1st, 3rd … 9th) less the sum of the even-placed ones (2nd … 8th), mod 10; the
//! eleventh is the sum of the first ten, mod 10. A bare number: it must stand as a
//! word and not follow a word that names another kind of number (see `ids.rs`).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, free_standing, other_number};

static KIMLIK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[1-9][0-9]{10}\b").expect("kimlik pattern compiles"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in KIMLIK.find_iter(text) {
        if free_standing(text, &m.range())
            && !other_number(text, m.start())
            && kimlik_valid(&digits(m.as_str()))
        {
            out.push(m.range());
        }
    }
}

fn kimlik_valid(d: &[u32]) -> bool {
    let odd: u32 = d[..9].iter().step_by(2).sum();
    let even: u32 = d[1..8].iter().step_by(2).sum();
    // 7·odd − even, kept non-negative: even ≤ 36 < 40.
    let tenth = (7 * odd + 40 - even) % 10;
    let eleventh = d[..10].iter().sum::<u32>() % 10;
    d[9] == tenth && d[10] == eleventh
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> bool {
        super::super::spans(scan, text) == [(0, text.len())]
    }

    #[test]
    fn numbers_with_both_check_digits() {
        for text in ["10000000146", "17291716060", "31415387530"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "10000000147", // wrong eleventh digit
            "17291716050", // wrong tenth digit
            "07291716092", // starts with 0
            "ticket 17291716060",
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
