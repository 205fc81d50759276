//! Personal-data scanners: US social security numbers, payment card numbers,
//! e-mail addresses, IBANs (`pii/iban.rs`), other national ids (`pii/ids.rs`, a
//! file per country) and phone numbers (`pii/phone.rs`). The kinds follow
//! Presidio's predefined recognizers; where a format has a checksum, it is checked.
//!
//! - **SSN**: `AAA-GG-SSSS` (dashes or spaces, the same separator twice), not inside
//!   a longer number. Never issued, so not flagged: area `000`, `666` or `900`–`999`,
//!   group `00`, serial `0000`.
//! - **Payment card**: 13–19 digits, optionally grouped by single spaces or dashes,
//!   starting with 2–6 (the issuer ranges of Visa, Mastercard, Amex, Discover, JCB,
//!   Diners and UnionPay; it keeps 13-digit millisecond timestamps out), and valid
//!   under the Luhn check. A Luhn-invalid number is not flagged.
//! - **E-mail**: `local@domain.tld`, a cheap pattern (no quoted local parts). Not
//!   an address: a URL's userinfo (`postgres://app@db.internal/app`), an scp-style
//!   remote (`git@github.com:owner/repo`), an image at a pixel density
//!   (`icon@2x.png`).

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::finding::PiiKind;

mod iban;
mod ids;
mod phone;

static SSN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(\d{3})([- ])(\d{2})([- ])(\d{4})\b").expect("SSN pattern compiles")
});
static CARD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[2-6](?:[ -]?\d){12,18}\b").expect("card pattern compiles"));
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
        .expect("email pattern compiles")
});

/// All personal-data matches in `text`. E-mail only when `emails` is on.
pub(super) fn scan(text: &str, emails: bool) -> Vec<(PiiKind, Range<usize>)> {
    let mut out = Vec::new();
    for caps in SSN.captures_iter(text) {
        let part = |i: usize| caps.get(i).map_or("", |m| m.as_str());
        if part(2) == part(4)
            && is_valid_ssn(part(1), part(3), part(5))
            && let Some(m) = caps.get(0)
        {
            out.push((PiiKind::Ssn, m.range()));
        }
    }
    for m in CARD.find_iter(text) {
        if is_card_number(m.as_str()) {
            out.push((PiiKind::PaymentCard, m.range()));
        }
    }
    if emails {
        out.extend(
            EMAIL
                .find_iter(text)
                .filter(|m| is_address(text, m.range()))
                .map(|m| (PiiKind::Email, m.range())),
        );
    }
    out.extend(
        iban::scan(text)
            .into_iter()
            .map(|span| (PiiKind::Iban, span)),
    );
    out.extend(ids::scan(text));
    out.extend(phone::scan(text));
    out
}

/// Image suffixes that follow `@2x` in asset names; never a mail domain's TLD.
const IMAGE_SUFFIXES: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "svg", "webp", "avif", "ico", "bmp",
];

/// Whether an e-mail-shaped match is an address rather than part of a URL or a
/// git remote (see the module docs).
fn is_address(text: &str, span: Range<usize>) -> bool {
    // After the last whitespace, which may be wider than a byte (U+2003 is three).
    let word_start = text[..span.start]
        .char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let in_url = text[word_start..span.start].contains("://");
    let after = &text[span.end..];
    let scp_remote = after.starts_with(':') && after[1..].starts_with(|c: char| !c.is_whitespace());
    let tld = text[..span.end].rsplit('.').next().unwrap_or_default();
    let image = IMAGE_SUFFIXES.contains(&tld.to_ascii_lowercase().as_str());
    !in_url && !scp_remote && !image
}

/// The SSA's never-issued ranges: area 000, 666 and 9xx; group 00; serial 0000.
fn is_valid_ssn(area: &str, group: &str, serial: &str) -> bool {
    area != "000" && area != "666" && !area.starts_with('9') && group != "00" && serial != "0000"
}

/// 13–19 digits once separators are dropped, with a valid Luhn check digit; the
/// grouping must use one separator kind, single, never doubled.
fn is_card_number(candidate: &str) -> bool {
    if candidate.contains(' ') && candidate.contains('-') {
        return false;
    }
    let digits: Vec<u32> = candidate.chars().filter_map(|c| c.to_digit(10)).collect();
    (13..=19).contains(&digits.len()) && luhn_valid(&digits)
}

/// The Luhn (mod 10) check over a full number, check digit last.
pub(super) fn luhn_valid(digits: &[u32]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<PiiKind> {
        scan(text, true).into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn valid_ssns_are_flagged_with_their_span() {
        let text = "ssn 123-45-6789 on file";
        assert_eq!(scan(text, true), vec![(PiiKind::Ssn, 4..15)]);
        assert_eq!(kinds("078 05 1120"), vec![PiiKind::Ssn], "space-separated");
    }

    #[test]
    fn never_issued_ssns_pass() {
        for text in [
            "000-12-3456",
            "666-12-3456",
            "900-12-3456",
            "987-65-4320",
            "123-00-4567",
            "123-45-0000",
        ] {
            assert!(kinds(text).is_empty(), "{text} is in a never-issued range");
        }
    }

    #[test]
    fn ssn_near_misses_pass() {
        for text in [
            "123-45-67890", // too long
            "1123-45-6789", // inside a longer number
            "123-456-789",  // wrong grouping
            "123-45 6789",  // mixed separators
            "123456789",    // bare digits are too ambiguous
            "2026-11-29",   // a date
        ] {
            assert!(kinds(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn luhn_valid_cards_are_flagged_in_all_groupings() {
        for text in [
            "4111111111111111",
            "4111 1111 1111 1111",
            "4111-1111-1111-1111",
            "5500 0000 0000 0004",
            "3782 822463 10005", // Amex, 15 digits
            "6011000990139424",  // Discover
        ] {
            assert_eq!(kinds(text), vec![PiiKind::PaymentCard], "{text}");
        }
        let text = "card: 4111 1111 1111 1111, exp 12/29";
        assert_eq!(scan(text, true), vec![(PiiKind::PaymentCard, 6..25)]);
    }

    #[test]
    fn luhn_invalid_and_non_card_numbers_pass() {
        for text in [
            "4111111111111112",    // Luhn-invalid
            "4111 1111 1111 1112", // Luhn-invalid, grouped
            "411111111111",        // 12 digits
            "1732895306121",       // a millisecond timestamp (Luhn-valid, starts with 1)
            "4111 1111-1111 1111", // mixed separators
            "+1 555 010 0199",     // a phone number
        ] {
            assert!(!kinds(text).contains(&PiiKind::PaymentCard), "{text}");
        }
        assert!(luhn_valid(&[1, 7, 3, 2, 8, 9, 5, 3, 0, 6, 1, 2, 1]));
    }

    #[test]
    fn fuzz_regression_a_wide_space_before_an_address() {
        // U+2003 EM SPACE is three bytes; the word after it started one byte in,
        // inside the character, and slicing there panicked (found by fuzz_privacy).
        let text = "mail:\u{2003}jane@example.com";
        assert_eq!(scan(text, true), vec![(PiiKind::Email, 8..24)]);
        // The word after a wide space is still read whole: a URL's user is no address.
        assert!(kinds("see\u{2003}https://jane@example.com/x").is_empty());
    }

    #[test]
    fn emails_are_flagged_only_when_enabled() {
        let text = "write to jane.doe+ops@example.co.uk today";
        assert_eq!(scan(text, true), vec![(PiiKind::Email, 9..35)]);
        assert!(scan(text, false).is_empty());
        assert!(kinds("@channel user@ host@localhost").is_empty());
        for miss in [
            "postgres://app@db.internal/app",
            "https://user@example.com/repo.git",
            "git clone git@github.com:acme/switchboard.git",
            "icon@2x.png",
        ] {
            assert!(kinds(miss).is_empty(), "{miss}");
        }
        assert_eq!(kinds("mailto:jane@example.com"), vec![PiiKind::Email]);
        assert_eq!(kinds("mail jane@example.com: thanks"), vec![PiiKind::Email]);
    }
}
