//! Step 4: the characters a name may hold after PRECIS, by Unicode general category.
//!
//! Allowed: letters (`Lu`, `Ll`, `Lt`, `Lm`, `Lo`), non-enclosing combining marks
//! (`Mn`, `Mc`), decimal digits (`Nd`), and the ASCII punctuation `-`, `_`, `.` that
//! today's names use. Refused: every other category, i.e. spaces and separators
//! (`Z*`), punctuation (`P*`), symbols (`S*`), controls, format characters,
//! surrogates, private use and unassigned (`C*`), enclosing marks (`Me`), and
//! letter-like or other numbers (`Nl`, `No`).

use unicode_properties::{GeneralCategory as Gc, UnicodeGeneralCategory};

use crate::{CharRule, NameError};

/// Refuses the first code point outside the name repertoire.
pub(crate) fn check(name: &str) -> Result<(), NameError> {
    match name.chars().find(|&c| !allowed(c)) {
        None => Ok(()),
        Some(character) => Err(NameError::DisallowedCharacter {
            character,
            category: general_category(character),
            rule: CharRule::NotNameCharacter,
        }),
    }
}

fn allowed(c: char) -> bool {
    matches!(c, '-' | '_' | '.')
        || matches!(
            c.general_category(),
            Gc::UppercaseLetter
                | Gc::LowercaseLetter
                | Gc::TitlecaseLetter
                | Gc::ModifierLetter
                | Gc::OtherLetter
                | Gc::NonspacingMark
                | Gc::SpacingMark
                | Gc::DecimalNumber
        )
}

/// The two-letter general category of `c` (Unicode 18).
pub(crate) fn general_category(c: char) -> &'static str {
    match c.general_category() {
        Gc::UppercaseLetter => "Lu",
        Gc::LowercaseLetter => "Ll",
        Gc::TitlecaseLetter => "Lt",
        Gc::ModifierLetter => "Lm",
        Gc::OtherLetter => "Lo",
        Gc::NonspacingMark => "Mn",
        Gc::SpacingMark => "Mc",
        Gc::EnclosingMark => "Me",
        Gc::DecimalNumber => "Nd",
        Gc::LetterNumber => "Nl",
        Gc::OtherNumber => "No",
        Gc::ConnectorPunctuation => "Pc",
        Gc::DashPunctuation => "Pd",
        Gc::OpenPunctuation => "Ps",
        Gc::ClosePunctuation => "Pe",
        Gc::InitialPunctuation => "Pi",
        Gc::FinalPunctuation => "Pf",
        Gc::OtherPunctuation => "Po",
        Gc::MathSymbol => "Sm",
        Gc::CurrencySymbol => "Sc",
        Gc::ModifierSymbol => "Sk",
        Gc::OtherSymbol => "So",
        Gc::SpaceSeparator => "Zs",
        Gc::LineSeparator => "Zl",
        Gc::ParagraphSeparator => "Zp",
        Gc::Control => "Cc",
        Gc::Format => "Cf",
        Gc::Surrogate => "Cs",
        Gc::PrivateUse => "Co",
        Gc::Unassigned => "Cn",
    }
}

/// A short English name for a two-letter general category.
pub(crate) fn describe(category: &str) -> &'static str {
    match category.as_bytes() {
        [b'L', _] => "a letter",
        [b'M', b'e'] => "an enclosing mark",
        [b'M', _] => "a combining mark",
        [b'N', b'd'] => "a digit",
        [b'N', _] => "a number symbol",
        [b'P', _] => "punctuation",
        [b'S', _] => "a symbol",
        [b'Z', b's'] => "a space",
        [b'Z', _] => "a line or paragraph separator",
        [b'C', b'c'] => "a control character",
        [b'C', b'f'] => "an invisible format character",
        [b'C', b'o'] => "a private-use character",
        [b'C', _] => "an unassigned code point",
        _ => "a character",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn todays_names_are_in_the_repertoire() {
        let ascii: String = ('a'..='z')
            .chain('0'..='9')
            .chain(['-', '_', '.'])
            .collect();
        assert_eq!(check(&ascii), Ok(()));
    }

    #[test]
    fn ascii_punctuation_other_than_three_is_refused() {
        for c in "!\"#$%&'()*+,/:;<=>?@[\\]^`{|}~".chars() {
            assert!(!allowed(c), "{c:?} should be refused");
        }
    }

    #[test]
    fn precis_exceptions_that_are_not_letters_are_refused() {
        // middle dot, keraia, geresh, katakana middle dot, ZWNJ, ZWJ, tsheg
        for c in [
            '\u{b7}', '\u{375}', '\u{5f3}', '\u{30fb}', '\u{200c}', '\u{200d}', '\u{f0b}',
        ] {
            assert!(!allowed(c), "U+{:04X} should be refused", u32::from(c));
        }
    }
}
