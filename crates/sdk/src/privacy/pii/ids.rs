//! Bank accounts and national ids, each with its check where the format has one:
//!
//! - **IBAN**: two letters, two check digits and a BBAN, bare or in groups of four,
//!   at the exact length of its country (ISO 13616 registry) and valid under the
//!   ISO 7064 mod-97 check. Upper case only.
//! - **US ITIN**: `9AA-GG-SSSS` with a group in 50–65, 70–88, 90–92 or 94–99,
//!   except 987-65-4320 to 987-65-4329 (reserved for advertisements).
//! - **UK National Insurance number**: two prefix letters from the allowed set
//!   (not `BG`, `GB`, `NK`, `KN`, `TN`, `NT`, `ZZ`), six digits (bare or in pairs)
//!   and a suffix `A`–`D`.
//! - **Spanish DNI / NIE**: eight digits (or `X`/`Y`/`Z` and seven) and the check
//!   letter of the number mod 23.
//! - **Indian Aadhaar**: twelve digits in groups of four, first digit 2–9, valid under
//!   the Verhoeff check. Ungrouped 12-digit numbers are left alone (AWS account ids).
//!
//! A grouped number that continues into more digits (`… 1234 5678`) is part of
//! something longer, such as a card number, and is not matched.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::finding::PiiKind;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("PII pattern compiles")
}

static IBAN: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"));
static ITIN: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b9\d{2}([- ])(?:5\d|6[0-5]|7\d|8[0-8]|9[0-2]|9[4-9])([- ])\d{4}\b"));
static NINO: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"\b([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z])( ?)\d{2}( ?)\d{2}( ?)\d{2}( ?)[A-D]\b")
});
static DNI: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b([XYZ]?)(\d{7,8})-?([TRWAGMYFPDXBNJZSQVHLCKE])\b"));
static AADHAAR: LazyLock<Regex> = LazyLock::new(|| regex(r"\b[2-9]\d{3}([ -])\d{4}([ -])\d{4}\b"));

/// IBAN lengths by country (the ISO 13616 registry).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];

/// IBANs and national ids in `text`.
pub(super) fn scan(text: &str) -> Vec<(PiiKind, Range<usize>)> {
    let mut out = Vec::new();
    for m in IBAN.find_iter(text) {
        out.extend(iban(m.as_str()).map(|len| (PiiKind::Iban, m.start()..m.start() + len)));
    }
    for caps in ITIN.captures_iter(text) {
        if caps[1] == caps[2]
            && let Some(m) = caps.get(0)
            && standalone(text, m.range())
            && !m.as_str().replace(' ', "-").starts_with("987-65-432")
        {
            out.push((PiiKind::NationalId, m.range()));
        }
    }
    for caps in NINO.captures_iter(text) {
        let spaces: Vec<&str> = (2..=5).map(|i| &caps[i]).collect();
        let consistent = spaces.iter().all(|s| s.is_empty()) || spaces.iter().all(|s| *s == " ");
        let prefix = &caps[1];
        if consistent
            && !["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&prefix)
            && let Some(m) = caps.get(0)
        {
            out.push((PiiKind::NationalId, m.range()));
        }
    }
    for caps in DNI.captures_iter(text) {
        let (lead, digits, letter) = (&caps[1], &caps[2], &caps[3]);
        let number = match (lead, digits.len()) {
            ("", 8) => digits.to_owned(),
            ("X", 7) => format!("0{digits}"),
            ("Y", 7) => format!("1{digits}"),
            ("Z", 7) => format!("2{digits}"),
            _ => continue,
        };
        if spanish_check_letter(&number) == letter.chars().next()
            && let Some(m) = caps.get(0)
        {
            out.push((PiiKind::NationalId, m.range()));
        }
    }
    for caps in AADHAAR.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let digits: Vec<u32> = m.as_str().chars().filter_map(|c| c.to_digit(10)).collect();
        if caps[1] == caps[2] && standalone(text, m.range()) && verhoeff_valid(&digits) {
            out.push((PiiKind::NationalId, m.range()));
        }
    }
    out
}

/// Not glued to more digits by a separator: `1234 5678 9012` inside
/// `4111 1234 5678 9012 …` is part of a longer number.
pub(super) fn standalone(text: &str, span: Range<usize>) -> bool {
    let before = &text.as_bytes()[..span.start];
    let after = &text.as_bytes()[span.end..];
    let glued_before = before.len() >= 2
        && matches!(before[before.len() - 1], b' ' | b'-' | b'.')
        && before[before.len() - 2].is_ascii_digit();
    let glued_after =
        after.len() >= 2 && matches!(after[0], b' ' | b'-' | b'.') && after[1].is_ascii_digit();
    !glued_before && !glued_after
}

/// The byte length of the IBAN at the start of `candidate` (spaces included), if
/// one is there: the country's length of characters, ending on a group boundary,
/// with a valid check.
fn iban(candidate: &str) -> Option<usize> {
    let country = candidate.get(..2)?;
    let (_, len) = IBAN_LENGTHS.iter().find(|(c, _)| *c == country)?;
    let mut compact = String::new();
    let mut end = 0;
    for (i, c) in candidate.char_indices() {
        if c != ' ' {
            compact.push(c);
            end = i + c.len_utf8();
            if compact.len() == *len {
                break;
            }
        }
    }
    let at_boundary = candidate[end..].chars().next().is_none_or(|c| c == ' ');
    (compact.len() == *len && at_boundary && iban_check(&compact)).then_some(end)
}

/// ISO 7064 mod 97–10 over the IBAN with its first four characters moved to the end.
fn iban_check(iban: &str) -> bool {
    let (head, tail) = iban.split_at(4);
    let mut rem = 0u32;
    for c in tail.chars().chain(head.chars()) {
        let Some(v) = c.to_digit(36) else {
            return false;
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

fn spanish_check_letter(number: &str) -> Option<char> {
    let n: u64 = number.parse().ok()?;
    b"TRWAGMYFPDXBNJZSQVHLCKE"
        .get((n % 23) as usize)
        .map(|&b| b as char)
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

    fn kinds(text: &str) -> Vec<PiiKind> {
        scan(text).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn ibans_need_their_country_length_and_check() {
        for text in [
            "DE89370400440532013000",
            "GB82 WEST 1234 5698 7654 32",
            "NL91ABNA0417164300",
        ] {
            assert_eq!(kinds(text), vec![PiiKind::Iban], "{text}");
        }
        let text = "pay DE89 3704 0044 0532 0130 00 TODAY";
        assert_eq!(
            scan(text),
            vec![(PiiKind::Iban, 4..31)],
            "stops at its length"
        );
        for miss in [
            "DE88370400440532013000",
            "DE8937040044053201300",
            "XX89370400440532013000",
        ] {
            assert!(kinds(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn national_ids_with_their_checks() {
        for text in [
            "912-70-1234",
            "AB123456C",
            "AB 12 34 56 C",
            "12345678Z",
            "X1234567L",
            "2345 6789 0124",
        ] {
            assert_eq!(kinds(text), vec![PiiKind::NationalId], "{text}");
        }
        for miss in [
            "912-40-1234",           // ITIN groups never include 40
            "987-65-4321",           // reserved for advertisements
            "912-70 1234",           // mixed separators
            "GB123456A",             // a never-issued NINO prefix
            "AB 123456 C",           // inconsistent grouping
            "12345678A",             // wrong DNI letter
            "2345 6789 0123",        // Verhoeff-invalid
            "234567890124",          // ungrouped twelve digits
            "4111 2345 6789 0124 5", // inside a longer number
        ] {
            assert!(kinds(miss).is_empty(), "{miss}");
        }
    }
}
