//! Step 5: UTS #39 §5.2 restriction level, required to be Highly Restrictive or
//! stricter (ASCII-only, single script, or Latin + Han/kana/Bopomofo/Hangul).
//!
//! `unicode-security` computes the level from Identifier_Status and the augmented
//! script sets (Script_Extensions, with Han counting as Japanese, Korean and
//! Han-with-Bopomofo). This module only turns a too-high level into an error that
//! names the offending character or the scripts involved.

use unicode_script::{Script, UnicodeScript};
use unicode_security::{GeneralSecurityProfile, RestrictionLevel, RestrictionLevelDetection};

use crate::{CharRule, NameError, repertoire};

pub(crate) fn check_highly_restrictive(name: &str) -> Result<(), NameError> {
    match name.detect_restriction_level() {
        RestrictionLevel::ASCIIOnly
        | RestrictionLevel::SingleScript
        | RestrictionLevel::HighlyRestrictive => Ok(()),
        RestrictionLevel::Unrestricted => {
            // The level is Unrestricted exactly when some code point is not
            // Identifier_Status=Allowed.
            let character = name
                .chars()
                .find(|&c| !c.identifier_allowed())
                .unwrap_or_default();
            Err(NameError::DisallowedCharacter {
                character,
                category: repertoire::general_category(character),
                rule: CharRule::NotRecommended,
            })
        }
        RestrictionLevel::ModeratelyRestrictive | RestrictionLevel::MinimallyRestrictive => {
            Err(NameError::MixedScript {
                scripts: scripts(name),
            })
        }
    }
}

/// The explicit scripts of `name` (not Common, Inherited or Unknown), in order of
/// first appearance.
fn scripts(name: &str) -> Vec<&'static str> {
    let mut found: Vec<Script> = Vec::new();
    for script in name.chars().map(|c| c.script()) {
        let implicit = matches!(script, Script::Common | Script::Inherited | Script::Unknown);
        if !implicit && !found.contains(&script) {
            found.push(script);
        }
    }
    found.into_iter().map(Script::full_name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_with_cyrillic_names_both_scripts() {
        let err = check_highly_restrictive("p\u{430}ypal").unwrap_err();
        assert_eq!(
            err,
            NameError::MixedScript {
                scripts: vec!["Latin", "Cyrillic"]
            }
        );
    }

    #[test]
    fn latin_with_japanese_is_highly_restrictive() {
        assert_eq!(check_highly_restrictive("bot\u{30a2}\u{30fc}"), Ok(()));
    }
}
