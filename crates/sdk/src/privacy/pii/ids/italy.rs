//! Italian codice fiscale: sixteen characters, upper case. Three consonant-led
//! letters of the surname and three of the name, two digits of the birth year, a
//! month letter (`ABCDEHLMPRST`), the birth day (plus 40 for women), a letter and
//! three digits for the place, and a check letter. Where two people would share a
//! code, digits are swapped for letters (*omocodia*: `LMNPQRSTUV` stand for 0–9),
//! so those positions take either.
//!
//! The check letter: each of the first fifteen characters has a value (at even
//! positions its digit or its letter's index; at odd positions, counting from 1,
//! the value from the odd table); the sum mod 26 is the letter's index.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

static CODICE_FISCALE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z]{6}[0-9LMNP-V]{2}[ABCDEHLMPRST][0-9LMNP-V]{2}[A-Z][0-9LMNP-V]{3}[A-Z]\b")
        .expect("codice fiscale pattern compiles")
});

/// The values of `0`–`9` then `A`–`Z` at odd positions.
const ODD: [u32; 36] = [
    1, 0, 5, 7, 9, 13, 15, 17, 19, 21, // 0–9
    1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24,
    23, // A–Z
];

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for m in CODICE_FISCALE.find_iter(text) {
        let code = m.as_str().as_bytes();
        let day = omocodia_digit(code[9]) * 10 + omocodia_digit(code[10]);
        let day_ok = (1..=31).contains(&day) || (41..=71).contains(&day);
        if day_ok && check_letter(&code[..15]) == code[15] {
            out.push(m.range());
        }
    }
}

/// A digit, or the digit an omocodia letter stands for.
fn omocodia_digit(c: u8) -> u32 {
    match c {
        b'0'..=b'9' => u32::from(c - b'0'),
        _ => b"LMNPQRSTUV"
            .iter()
            .position(|&l| l == c)
            .map_or(99, |i| i as u32),
    }
}

fn check_letter(code: &[u8]) -> u8 {
    let sum: u32 = code
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            let index = match c {
                b'0'..=b'9' => usize::from(c - b'0'),
                _ => usize::from(c - b'A') + 10,
            };
            if i % 2 == 0 {
                ODD[index]
            } else if index < 10 {
                index as u32
            } else {
                (index - 10) as u32
            }
        })
        .sum();
    b'A' + (sum % 26) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> bool {
        super::super::spans(scan, text) == [(0, text.len())]
    }

    #[test]
    fn codes_with_their_check_letter() {
        for text in [
            "RSSMRA85T10A562S",
            "MRTMTT91D08F205J",
            "BNZVCN32S10E573Z",
            "CMMSRM12P54G909K", // a woman: day 14 + 40
            "RSSMRA85T10A56NH", // omocodia: the place's 2 written as N
        ] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "RSSMRA85T10A562T", // wrong check letter
            "RSSMRA85T32A562Y", // day 32 (the letter is right)
            "RSSMRA85F10A562S", // F is no month
            "rssmra85t10a562s", // lower case
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
