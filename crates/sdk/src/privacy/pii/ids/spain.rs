//! Spanish DNI and NIE: eight digits (or `X`, `Y` or `Z` and seven, standing for
//! 0, 1 and 2), an optional dash, and the check letter: the number mod 23 indexes
//! `TRWAGMYFPDXBNJZSQVHLCKE`.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

static DNI: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b([XYZ]?)([0-9]{7,8})-?([TRWAGMYFPDXBNJZSQVHLCKE])\b")
        .expect("DNI pattern compiles")
});

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in DNI.captures_iter(text) {
        let (lead, digits, letter) = (&caps[1], &caps[2], &caps[3]);
        let number = match (lead, digits.len()) {
            ("", 8) => digits.to_owned(),
            ("X", 7) => format!("0{digits}"),
            ("Y", 7) => format!("1{digits}"),
            ("Z", 7) => format!("2{digits}"),
            _ => continue,
        };
        if check_letter(&number) == letter.chars().next()
            && let Some(m) = caps.get(0)
        {
            out.push(m.range());
        }
    }
}

fn check_letter(number: &str) -> Option<char> {
    let n: u64 = number.parse().ok()?;
    b"TRWAGMYFPDXBNJZSQVHLCKE"
        .get((n % 23) as usize)
        .map(|&b| b as char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> bool {
        super::super::spans(scan, text) == [(0, text.len())]
    }

    #[test]
    fn dni_and_nie_with_their_letter() {
        for text in [
            "12345678Z",
            "12345678-Z",
            "X1234567L",
            "Y1234567X",
            "Z1234567R",
        ] {
            assert!(found(text), "{text}");
        }
        for miss in ["12345678A", "X1234567A", "1234567Z", "W1234567L"] {
            assert!(!found(miss), "{miss}");
        }
    }
}
