//! Indian Aadhaar numbers and the PAN of a person.
//!
//! - **Aadhaar**: twelve digits, the first 2–9, valid under the Verhoeff check and
//!   not a palindrome (UIDAI issues none). Grouped `2345 6789 0124` (spaces or
//!   dashes, one kind) or bare. A bare number must stand as a word and not follow a
//!   word that names another kind of number (an AWS account id is twelve digits; see
//!   `ids.rs`), and is not a `20YYMMDDhhmm` timestamp.
//! - **PAN**: five letters, four digits, a letter, upper case; the fourth letter is
//!   the holder's kind and only `P` (a person) is matched: companies' and trusts'
//!   PANs are not personal data. The last letter is a check character whose rule is
//!   not published, so the shape is the whole test.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, free_standing, number, other_number, standalone};

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("Indian id pattern compiles")
}

static AADHAAR_GROUPED: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b[2-9][0-9]{3}([ -])[0-9]{4}([ -])[0-9]{4}\b"));
static AADHAAR_BARE: LazyLock<Regex> = LazyLock::new(|| regex(r"\b[2-9][0-9]{11}\b"));
static PAN: LazyLock<Regex> = LazyLock::new(|| regex(r"\b[A-Z]{3}P[A-Z][0-9]{4}[A-Z]\b"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in AADHAAR_GROUPED.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        if caps[1] == caps[2] && standalone(text, m.range()) && aadhaar_valid(&digits(m.as_str())) {
            out.push(m.range());
        }
    }
    for m in AADHAAR_BARE.find_iter(text) {
        let d = digits(m.as_str());
        if free_standing(text, &m.range())
            && !other_number(text, m.start())
            && !timestamp(&d)
            && aadhaar_valid(&d)
        {
            out.push(m.range());
        }
    }
    out.extend(PAN.find_iter(text).map(|m| m.range()));
}

fn aadhaar_valid(d: &[u32]) -> bool {
    let palindrome = d.iter().eq(d.iter().rev());
    !palindrome && verhoeff_valid(d)
}

/// `20YYMMDDhhmm`: a minute of this century, as in backup and snapshot names.
fn timestamp(d: &[u32]) -> bool {
    let part = |at: usize| number(&d[at..at + 2]);
    part(0) == 20
        && (1..=12).contains(&part(4))
        && (1..=31).contains(&part(6))
        && part(8) <= 23
        && part(10) <= 59
}

/// The Verhoeff check over a full number, check digit last.
fn verhoeff_valid(digits: &[u32]) -> bool {
    const D: [[u8; 10]; 10] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 2, 3, 4, 0, 6, 7, 8, 9, 5],
        [2, 3, 4, 0, 1, 7, 8, 9, 5, 6],
        [3, 4, 0, 1, 2, 8, 9, 5, 6, 7],
        [4, 0, 1, 2, 3, 9, 5, 6, 7, 8],
        [5, 9, 8, 7, 6, 0, 4, 3, 2, 1],
        [6, 5, 9, 8, 7, 1, 0, 4, 3, 2],
        [7, 6, 5, 9, 8, 2, 1, 0, 4, 3],
        [8, 7, 6, 5, 9, 3, 2, 1, 0, 4],
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    ];
    const P: [[u8; 10]; 8] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        [1, 5, 7, 6, 2, 8, 3, 0, 9, 4],
        [5, 8, 0, 3, 7, 9, 6, 1, 4, 2],
        [8, 9, 1, 6, 0, 4, 3, 5, 2, 7],
        [9, 4, 5, 3, 1, 2, 6, 8, 7, 0],
        [4, 2, 8, 6, 5, 7, 3, 9, 0, 1],
        [2, 7, 9, 3, 8, 0, 6, 4, 1, 5],
        [7, 0, 4, 6, 9, 1, 3, 2, 5, 8],
    ];
    let mut c = 0u8;
    for (i, &d) in digits.iter().rev().enumerate() {
        c = D[c as usize][P[i % 8][d as usize] as usize];
    }
    c == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(text: &str) -> Vec<(usize, usize)> {
        super::super::spans(scan, text)
    }

    #[test]
    fn aadhaar_grouped_and_bare() {
        for text in [
            "2345 6789 0124",
            "2345-6789-0124",
            "234567890124",
            "499118665246",
        ] {
            assert_eq!(scanned(text), [(0, text.len())], "{text}");
        }
        assert_eq!(scanned("aadhaar: 234567890124."), [(9, 21)]);
        for miss in [
            "2345 6789 0123",        // Verhoeff-invalid
            "234567890123",          // Verhoeff-invalid, bare
            "2345 6789-0124",        // mixed separators
            "134567890124",          // first digit 1
            "4111 2345 6789 0124 5", // inside a longer number
            "AWS account 234567890124",
            "arn:aws:iam::234567890124:role/ci",
            "snapshot 202611031601", // a timestamp (Verhoeff-valid)
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn palindromes_are_not_issued() {
        // A Verhoeff-valid palindrome; UIDAI issues none.
        let d = digits("234562265432");
        assert!(verhoeff_valid(&d));
        assert!(!aadhaar_valid(&d));
    }

    #[test]
    fn pans_of_persons() {
        for text in ["ABCPE1234F", "BNZPM2501F"] {
            assert_eq!(scanned(text), [(0, text.len())], "{text}");
        }
        for miss in ["ABCCE1234F", "ABCPE12345", "abcpe1234f", "XABCPE1234F"] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }
}
