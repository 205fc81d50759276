//! National ids, a file per country, after Presidio's predefined recognizers. Each
//! is found only in the shape it is written in and only when its check holds;
//! where the format has no check, the shape must be distinctive on its own.
//!
//! | country | id | shape | check |
//! |---|---|---|---|
//! | US | ITIN (`us.rs`) | `9AA-GG-SSSS`, group 50–65, 70–88, 90–92, 94–99 | ranges |
//! | UK | National Insurance number (`uk.rs`) | `AB123456C`, `AB 12 34 56 C` | prefix and suffix letters |
//! | UK | NHS number (`uk.rs`) | `943 476 5919` (spaces or dashes); bare ten digits only after `NHS` or `CHI` | mod 11 |
//! | Spain | DNI / NIE (`spain.rs`) | `12345678Z`, `X1234567L` | letter mod 23 |
//! | Italy | codice fiscale (`italy.rs`) | `RSSMRA85T10A562S`, upper case, omocodia letters allowed | check letter, day of month |
//! | Finland | HETU (`finland.rs`) | `131052-308T`, century sign `+ - A–F U–Y` | mod 31 character, date |
//! | Poland | PESEL (`poland.rs`) | eleven digits | weighted mod 10, date (1900–2099) |
//! | Sweden | personnummer (`sweden.rs`) | `811218-9876` (`-` or `+`) | Luhn, date |
//! | Turkey | T.C. kimlik no (`turkey.rs`) | eleven digits, not starting with 0 | two check digits |
//! | South Africa | ID number (`south_africa.rs`) | thirteen digits | Luhn, date, citizenship 0–2, then 8 or 9 |
//! | India | Aadhaar (`india.rs`) | twelve digits, first 2–9, bare or `2345 6789 0124` | Verhoeff, not a palindrome |
//! | India | PAN of a person (`india.rs`) | `ABCPE1234F` (fourth letter `P`) | none: the shape |
//! | Singapore | NRIC / FIN (`singapore.rs`) | `S1234567D` (`S T F G M`) | check letter |
//! | Korea | RRN / foreigner's number (`korea.rs`) | `800101-1234567` with the dash | date and century digit 1–8 (no check since 2020) |
//! | Thailand | national id (`thailand.rs`) | `1-2345-67890-12-1` | mod 11 |
//! | Australia | Medicare number (`australia.rs`) | `2123 45670 1`, first digit 2–6 | weighted mod 10 |
//! | Australia | tax file number (`australia.rs`) | nine digits, after `TFN` or `tax file` | weighted mod 11 |
//! | Canada | SIN (`canada.rs`) | nine digits, after `SIN` or `social insurance` | Luhn |
//!
//! Two guards keep ordinary numbers out:
//! - a grouped number glued to more digits by a separator (`… 1234 5678`) is part
//!   of something longer, such as a card number ([`standalone`]);
//! - a *bare* run of digits (Aadhaar, PESEL, T.C. kimlik, South African, labelled
//!   NHS, TFN, SIN) counts only as a word of prose ([`free_standing`]): not inside a
//!   path, URL, host name, ARN, UUID or version, not after `#`, and not after a word
//!   that says it is another kind of number ([`other_number`]: an AWS account, an
//!   order, an invoice …).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::finding::PiiKind;

mod australia;
mod canada;
mod finland;
mod india;
mod italy;
mod korea;
mod poland;
mod singapore;
mod south_africa;
mod spain;
mod sweden;
mod thailand;
mod turkey;
mod uk;
mod us;

/// A country's scanner: it pushes the spans of the ids it finds in the text.
type Scanner = fn(&str, &mut Vec<Range<usize>>);

/// The scanners, one per country.
const COUNTRIES: &[Scanner] = &[
    us::scan,
    uk::scan,
    spain::scan,
    italy::scan,
    finland::scan,
    poland::scan,
    sweden::scan,
    turkey::scan,
    south_africa::scan,
    india::scan,
    singapore::scan,
    korea::scan,
    thailand::scan,
    australia::scan,
    canada::scan,
];

/// Nine digits, bare or in groups of three; the caller compares the separators
/// (Australia's TFN and Canada's SIN).
static NINE_DIGITS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[0-9]{3}([ -]?)[0-9]{3}([ -]?)[0-9]{3}\b").expect("nine-digit pattern compiles")
});

/// National ids in `text`.
pub(super) fn scan(text: &str) -> Vec<(PiiKind, Range<usize>)> {
    let mut spans = Vec::new();
    for country in COUNTRIES {
        country(text, &mut spans);
    }
    spans
        .into_iter()
        .map(|span| (PiiKind::NationalId, span))
        .collect()
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

/// A bare number that stands as a word of prose: after a space, an opening bracket
/// or quote, `=` or `:` (or at the start), and before a space, a closing bracket or
/// quote, `,` or `;` (or at the end), or before `.`, `:`, `!` or `?` that ends the
/// sentence. So not `/123…/`, `123….dkr.ecr…`, `::123…:role`, `…-8e5f-123…`, `#123…`
/// or `1.123…`.
fn free_standing(text: &str, span: &Range<usize>) -> bool {
    let opens = |c: char| c.is_whitespace() || "([{\"'`=:".contains(c);
    let closes = |c: char| c.is_whitespace() || ")]}\"'`,;".contains(c);
    let before_ok = text[..span.start].chars().next_back().is_none_or(opens);
    let mut after = text[span.end..].chars();
    let after_ok = match after.next() {
        None => true,
        Some(c) if closes(c) => true,
        Some('.' | ':' | '!' | '?') => after.next().is_none_or(closes),
        Some(_) => false,
    };
    before_ok && after_ok
}

/// The last few words before `start` on its line, lower-cased (`NHS number: ` gives
/// `["nhs", "number"]`).
fn words_before(text: &str, start: usize) -> Vec<String> {
    let line = text[..start].rsplit('\n').next().unwrap_or_default();
    let mut from = line.len().saturating_sub(40);
    while !line.is_char_boundary(from) {
        from += 1;
    }
    let words: Vec<String> = line[from..]
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let keep = words.len().saturating_sub(4);
    words[keep..].to_vec()
}

/// Whether one of `labels` (each a run of words, `&["tax", "file"]`) is among the
/// last words before `start`: the number is named as what it is.
fn labelled(text: &str, start: usize, labels: &[&[&str]]) -> bool {
    let words = words_before(text, start);
    labels.iter().any(|label| {
        words
            .windows(label.len())
            .any(|run| run.iter().zip(label.iter()).all(|(w, l)| w == l))
    })
}

/// Words that, just before a bare number, say it is another kind of number: an
/// AWS account id (the commonest bare twelve digits in a message), an order,
/// invoice, ticket or tracking number, a build or job. A word counts when it starts
/// with one of these (`AccountId`, `order_no`).
const OTHER_NUMBERS: &[&str] = &[
    "account", "acct", "aws", "arn", "order", "invoice", "ticket", "tracking", "build", "job",
    "pid", "port",
];

/// Whether the words just before `start` say the number is something else.
fn other_number(text: &str, start: usize) -> bool {
    words_before(text, start)
        .iter()
        .rev()
        .take(3)
        .any(|w| OTHER_NUMBERS.iter().any(|other| w.starts_with(other)))
}

/// The ASCII digits of `s`, in order (separators skipped).
fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

/// The number the digits spell (`[1, 2]` is 12).
fn number(digits: &[u32]) -> u32 {
    digits.iter().fold(0, |n, &d| n * 10 + d)
}

/// The sum of each digit times its weight.
fn weighted(digits: &[u32], weights: &[u32]) -> u32 {
    digits.iter().zip(weights).map(|(d, w)| d * w).sum()
}

/// Whether `year-month-day` is a day of the Gregorian calendar.
fn is_date(year: u32, month: u32, day: u32) -> bool {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// What one country's scanner finds in `text`, as `(start, end)` pairs.
#[cfg(test)]
fn spans(scan: Scanner, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    scan(text, &mut out);
    out.into_iter().map(|r| (r.start, r.end)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<PiiKind> {
        scan(text).into_iter().map(|(k, _)| k).collect()
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
            "234567890124",
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
            "4111 2345 6789 0124 5", // inside a longer number
        ] {
            assert!(kinds(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn a_bare_number_must_stand_as_a_word() {
        let at = |text: &str, number: &str| {
            let start = text.find(number).expect("number in text");
            free_standing(text, &(start..start + number.len()))
        };
        for text in [
            "1234",
            "id 1234, ok",
            "(1234)",
            "\"1234\"",
            "aadhaar:1234",
            "x=1234",
            "it is 1234.",
            "is it 1234?",
        ] {
            assert!(at(text, "1234"), "{text}");
        }
        for text in [
            "#1234",
            "/v1/1234/x",
            "arn:aws:iam::1234:role/x",
            "1234.dkr.ecr.eu-west-1.amazonaws.com",
            "8e5f-1234",
            "1.1234",
            "1234_x",
            "1234.5",
        ] {
            assert!(!at(text, "1234"), "{text}");
        }
    }

    #[test]
    fn labels_and_other_numbers_are_read_from_the_words_before() {
        let text = "my NHS number: 9434765919";
        assert!(labelled(text, 15, &[&["nhs"]]));
        assert!(!labelled(text, 15, &[&["tfn"]]));
        assert!(labelled("tax file no 1", 12, &[&["tax", "file"]]));
        assert!(!labelled("file tax 1", 9, &[&["tax", "file"]]));
        assert!(
            !labelled("NHS\nnumber 1", 11, &[&["nhs"]]),
            "same line only"
        );
        let last = |text: &str| text.len() - 1;
        for text in ["\"AccountId\": \"1", "AWS account 1", "order_no=1"] {
            assert!(other_number(text, last(text)), "{text}");
        }
        assert!(!other_number("aadhaar 1", 8));
        // The 40-byte window would start inside the é: it starts after it.
        let wide = format!("é{} 1", "x".repeat(38));
        assert!(!labelled(&wide, last(&wide), &[&["nhs"]]));
    }

    #[test]
    fn calendar_days() {
        assert!(is_date(2024, 2, 29));
        assert!(is_date(2000, 2, 29));
        assert!(!is_date(1900, 2, 29));
        assert!(!is_date(2026, 2, 29));
        assert!(!is_date(2026, 4, 31));
        assert!(!is_date(2026, 13, 1));
        assert!(!is_date(2026, 1, 0));
    }
}
