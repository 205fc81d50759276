//! Singapore NRIC and FIN: a prefix letter (`S` and `T` for citizens and
//! permanent residents born before and from 2000; `F`, `G` and, since 2022, `M` for
//! foreigners), seven digits and a check letter. The digits weighted 2, 7, 6, 5, 4,
//! 3, 2, plus 4 for `T` and `G` or 3 for `M`, mod 11, index the prefix's letter
//! table. Upper case only.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::{digits, weighted};

static NRIC: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b([STFGM])[0-9]{7}([A-Z])\b").expect("NRIC pattern compiles"));

pub(super) fn scan(text: &str, out: &mut Vec<Range<usize>>) {
    for caps in NRIC.captures_iter(text) {
        let Some(m) = caps.get(0) else { continue };
        let (offset, letters): (u32, &[u8; 11]) = match &caps[1] {
            "S" => (0, b"JZIHGFEDCBA"),
            "T" => (4, b"JZIHGFEDCBA"),
            "F" => (0, b"XWUTRQPNMLK"),
            "G" => (4, b"XWUTRQPNMLK"),
            _ => (3, b"XWUTRQPNJLK"),
        };
        let sum = weighted(&digits(&m.as_str()[1..8]), &[2, 7, 6, 5, 4, 3, 2]) + offset;
        if caps[2].as_bytes()[0] == letters[(sum % 11) as usize] {
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
    fn nric_and_fin_with_their_check_letter() {
        for text in [
            "S1234567D",
            "T5908301A",
            "F6613186Q",
            "G0913909K",
            "M9603082N",
        ] {
            assert!(found(text), "{text}");
        }
        for miss in [
            "S1234567A",
            "T1234567D",
            "A1234567D",
            "s1234567d",
            "S12345678D",
        ] {
            assert!(!found(miss), "{miss}");
        }
    }
}
