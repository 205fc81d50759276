//! UK National Insurance numbers and NHS numbers.
//!
//! - **National Insurance number**: two prefix letters from the allowed set (not
//!   `BG`, `GB`, `NK`, `KN`, `TN`, `NT`, `ZZ`), six digits (bare or in pairs) and a
//!   suffix `A`–`D`. Upper case only. No check digit: the letter sets are the shape.
//! - **NHS number** (and Scotland's CHI number, which has the same check): ten
//!   digits whose tenth is the mod-11 check of the first nine, weighted 10 down to
//!   2 (a check of 10 is never issued). Written `943 476 5919`, or with dashes;
//!   bare ten digits (Unix times, ids, phone numbers) count only after the word
//!   `NHS` or `CHI`. A dashed number that is also a North American phone shape
//!   (`219-555-7737`: area code and exchange starting 2–9) is left to the phone
//!   rule, so a field that allows phones accepts it.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, free_standing, labelled, standalone, weighted};

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("UK id pattern compiles")
}

static NINO: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"\b([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z])( ?)[0-9]{2}( ?)[0-9]{2}( ?)[0-9]{2}( ?)[A-D]\b")
});
static NHS_GROUPED: LazyLock<Regex> =
    LazyLock::new(|| regex(r"\b[0-9]{3}([ -])[0-9]{3}([ -])[0-9]{4}\b"));
static NHS_BARE: LazyLock<Regex> = LazyLock::new(|| regex(r"\b[0-9]{10}\b"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in NINO.captures_iter(text) {
        let spaces: Vec<&str> = (2..=5).map(|i| &caps[i]).collect();
        let consistent = spaces.iter().all(|s| s.is_empty()) || spaces.iter().all(|s| *s == " ");
        if consistent
            && !["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&&caps[1])
            && let Some(m) = caps.get(0)
        {
            out.push(m.range());
        }
    }
    for caps in NHS_GROUPED.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let d = digits(m.as_str());
        let phone_shaped = &caps[1] == "-" && d[0] >= 2 && d[3] >= 2;
        if caps[1] == caps[2] && !phone_shaped && standalone(text, m.range()) && nhs_valid(&d) {
            out.push(m.range());
        }
    }
    for m in NHS_BARE.find_iter(text) {
        if free_standing(text, &m.range())
            && labelled(text, m.start(), &[&["nhs"], &["chi"]])
            && nhs_valid(&digits(m.as_str()))
        {
            out.push(m.range());
        }
    }
}

/// The NHS mod-11 check: 11 less the weighted sum mod 11 (11 reads as 0, 10 is
/// never issued) is the tenth digit.
fn nhs_valid(d: &[u32]) -> bool {
    if d.len() != 10 {
        return false;
    }
    let check = 11 - weighted(&d[..9], &[10, 9, 8, 7, 6, 5, 4, 3, 2]) % 11;
    match check {
        11 => d[9] == 0,
        10 => false,
        _ => d[9] == check,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(text: &str) -> Vec<(usize, usize)> {
        super::super::spans(scan, text)
    }

    #[test]
    fn national_insurance_numbers() {
        for text in ["AB123456C", "AB 12 34 56 C", "CE123456D"] {
            assert_eq!(scanned(text), [(0, text.len())], "{text}");
        }
        for miss in [
            "GB123456A",
            "AB 123456 C",
            "AB123456E",
            "DA123456A",
            "ab123456c",
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn nhs_numbers_by_their_check() {
        for text in [
            "943 476 5919",
            "401 023 2137",
            "026-584-1216",
            "450 557 7104",
        ] {
            assert_eq!(scanned(text), [(0, text.len())], "{text}");
        }
        assert_eq!(scanned("CHI 4010232137."), [(4, 14)]);
        for miss in [
            "943 476 5918",    // wrong check digit
            "943-476 5919",    // mixed separators
            "9434765919",      // bare, no label
            "nhs 94347659190", // eleven digits
            "1 943 476 5919",  // inside a longer number
            "219-555-7737",    // also a North American phone shape: the phone rule's
        ] {
            assert!(scanned(miss).is_empty(), "{miss}");
        }
    }

    #[test]
    fn a_check_of_ten_is_never_issued() {
        assert!(nhs_valid(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 1])); // 10 mod 11 = 10: check 1
        assert!(nhs_valid(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 2])); // 9: check 2
        // 1·10 + 1·2 = 12, 12 mod 11 = 1: the check would be 10, so no digit fits.
        for last in 0..10 {
            assert!(!nhs_valid(&[1, 0, 0, 0, 0, 0, 0, 0, 1, last]), "{last}");
        }
    }
}
