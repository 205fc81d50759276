//! IBANs: two letters, two check digits and a BBAN, bare or in groups of four
//! separated by single spaces, in upper or lower case (not mixed: a mixed-case run
//! is a random id). A candidate counts when `iban_validate` accepts it: the ISO 7064
//! mod-97 check, the country's length and the BBAN format of the SWIFT registry
//! (which characters are digits, letters or either). The format check is what keeps
//! lower-case hex out: `be71570232010b84` holds the mod-97 check, but a Belgian BBAN
//! is twelve digits.
//!
//! A match stops at its country's length on a group boundary: in
//! `DE89 3704 0044 0532 0130 00 TODAY` the IBAN ends before `TODAY`.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

static IBAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Za-z]{2}[0-9]{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,3})?\b")
        .expect("IBAN pattern compiles")
});

/// The spans of the IBANs in `text`.
pub(super) fn scan(text: &str) -> Vec<Range<usize>> {
    IBAN.find_iter(text)
        .filter_map(|m| iban_len(m.as_str()).map(|len| m.start()..m.start() + len))
        .collect()
}

/// The byte length of the IBAN at the start of `candidate`, if one is there: it
/// ends at a space or at the end of the candidate.
fn iban_len(candidate: &str) -> Option<usize> {
    let upper = candidate.bytes().any(|b| b.is_ascii_uppercase());
    let lower = candidate.bytes().any(|b| b.is_ascii_lowercase());
    if upper && lower {
        return None;
    }
    let ends = candidate.match_indices(' ').map(|(i, _)| i);
    ends.chain([candidate.len()]).find(|&end| {
        candidate[..end]
            .to_ascii_uppercase()
            .parse::<iban::Iban>()
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(usize, usize)> {
        scan(text).into_iter().map(|r| (r.start, r.end)).collect()
    }

    #[test]
    fn ibans_need_their_country_length_format_and_check() {
        for text in [
            "DE89370400440532013000",
            "GB82 WEST 1234 5698 7654 32",
            "NL91ABNA0417164300",
            "de89 3704 0044 0532 0130 00",
            "gb82west12345698765432",
        ] {
            assert_eq!(spans(text), [(0, text.len())], "{text}");
        }
        let text = "pay DE89 3704 0044 0532 0130 00 TODAY";
        assert_eq!(spans(text), [(4, 31)], "stops at its length");
        for miss in [
            "DE88370400440532013000", // wrong check digits
            "DE8937040044053201300",  // one short
            "XX89370400440532013000", // no such country
            "GB82WEST12345698765432X",
            "Gb82West12345698765432",  // mixed case
            "be71570232010b84",        // check holds; BE is twelve digits
            "GB82 WEST12345698765432", // neither bare nor grouped
        ] {
            assert!(scan(miss).is_empty(), "{miss}");
        }
    }
}
