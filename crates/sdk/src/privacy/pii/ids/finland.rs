//! Finnish personal identity code (henkilötunnus, HETU): `DDMMYY`, a century sign
//! (`+` for the 1800s; `-` or `U`–`Y` for the 1900s; `A`–`F` for the 2000s), a
//! three-digit individual number (002–999) and a check character: the nine digits
//! as one number, mod 31, index `0123456789ABCDEFHJKLMNPRSTUVWXY`. The birth date
//! must exist. Upper case only.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, is_date, number, standalone};

static HETU: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9]{6}([-+A-FU-Y])[0-9]{3}[0-9A-FHJ-NPR-Y]\b").expect("HETU pattern compiles")
});

const CHECK: &[u8; 31] = b"0123456789ABCDEFHJKLMNPRSTUVWXY";

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in HETU.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let d = digits(&m.as_str()[..10]);
        let century = match &caps[1] {
            "+" => 1800,
            "A" | "B" | "C" | "D" | "E" | "F" => 2000,
            _ => 1900,
        };
        let date = is_date(
            century + number(&d[4..6]),
            number(&d[2..4]),
            number(&d[..2]),
        );
        let individual = number(&d[6..9]);
        let check = CHECK[(number(&d) % 31) as usize];
        if date
            && individual >= 2
            && m.as_str().as_bytes()[10] == check
            && standalone(text, m.range())
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
    fn codes_with_their_check_character() {
        for text in ["131052-308T", "010101A123N", "241119A875F", "140586-4902"] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "131052-308U", // wrong check character
            "310252-308Y", // 31 February
            "131052G308T", // no such century sign
            "131052-001W", // individual numbers start at 002 (the check is right)
            "131052-308t", // lower case
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
