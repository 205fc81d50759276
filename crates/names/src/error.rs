//! Why a name was refused, with the stable code the API reports for it.
//!
//! Every variant but [`NameError::Confusable`] is `name_invalid`: the name itself is
//! unusable, whatever else exists. `name_confusable` means the name is fine on its
//! own but its skeleton equals one already held; only the caller that checks
//! uniqueness can know that, so it builds that variant itself.

use precis_profiles::precis_core::{self, CodepointInfo, UnexpectedError};

use crate::MAX_CHARS;
use crate::repertoire;

/// The code for every refusal of the name on its own.
pub const NAME_INVALID: &str = "name_invalid";
/// The code for a name whose skeleton collides with one already held.
pub const NAME_CONFUSABLE: &str = "name_confusable";

const ALLOWED: &str = "names may hold letters, digits, combining marks, '-', '_' and '.'";

/// A refused name. `Display` says what was wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The input is the empty string.
    #[error("the name is empty; {ALLOWED}, 1 to {MAX_CHARS} of them")]
    Empty,
    /// Too many code points: of the canonical form, or of the input when the input
    /// alone is over 4 × [`MAX_CHARS`] and canonicalization was skipped.
    #[error(
        "the name is {chars} characters long after canonicalization; the limit is \
         {MAX_CHARS}, shorten it"
    )]
    TooLong {
        /// The number of code points counted.
        chars: usize,
    },
    /// A code point that a step of the pipeline does not allow.
    #[error(
        "{} ({}, {category}) is not allowed: {}; remove it{}",
        show(*character, category),
        repertoire::describe(category),
        rule.explain(),
        if matches!(category.as_bytes().first(), Some(b'Z' | b'P' | b'S')) {
            " or use '-', '_' or '.' instead"
        } else {
            ""
        }
    )]
    DisallowedCharacter {
        /// The offending code point, after width mapping, case mapping and NFC
        /// (so `Ａ` and `A` are reported as `a`).
        character: char,
        /// Its two-letter Unicode general category, e.g. `Zs`, `Po`, `So`, `Cc`.
        category: &'static str,
        /// The step that refused it.
        rule: CharRule,
    },
    /// The PRECIS Directionality Rule (RFC 5893 Bidi Rule) failed.
    #[error(
        "the name breaks the Bidi Rule (RFC 5893): a name with right-to-left letters \
         must start with a right-to-left letter and not mix in left-to-right letters; \
         write it in one direction"
    )]
    Bidi,
    /// PRECIS failed for a reason it does not tie to a code point (not expected).
    #[error("the name was rejected by the PRECIS UsernameCaseMapped profile ({detail}); {ALLOWED}")]
    Precis {
        /// The PRECIS library's own description.
        detail: String,
    },
    /// More scripts than UTS #39 Highly Restrictive allows.
    #[error(
        "the name mixes the scripts {}; use one script (Latin may be combined with \
         Han, Japanese kana or Hangul only) and retype the look-alike letters",
        scripts.join(" and ")
    )]
    MixedScript {
        /// The scripts found, in order of first appearance (full Unicode names such
        /// as `Latin`, `Cyrillic`).
        scripts: Vec<&'static str>,
    },
    /// Built by the uniqueness check, never by [`crate::canonicalize`]: the skeleton
    /// equals that of a name already held.
    #[error(
        "the name '{canonical}' looks like a name that is already in use (both reduce \
         to the skeleton '{skeleton}'); choose a visibly different name"
    )]
    Confusable {
        /// The canonical form of the refused name.
        canonical: String,
        /// Its skeleton, shared with the held name (which is not revealed: it may
        /// belong to another tenant).
        skeleton: String,
    },
}

impl NameError {
    /// The stable machine code: [`NAME_CONFUSABLE`] for
    /// [`NameError::Confusable`], [`NAME_INVALID`] for everything else.
    pub fn code(&self) -> &'static str {
        match self {
            NameError::Confusable { .. } => NAME_CONFUSABLE,
            _ => NAME_INVALID,
        }
    }
}

/// Which step refused a code point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CharRule {
    /// PRECIS IdentifierClass: DISALLOWED (spaces, controls, compatibility
    /// characters, symbols and punctuation outside ASCII, …).
    PrecisDisallowed,
    /// PRECIS IdentifierClass: unassigned in Unicode 6.3, the registry's version.
    PrecisUnassigned,
    /// PRECIS IdentifierClass: a CONTEXTJ/CONTEXTO code point whose context rule
    /// (RFC 5892 Appendix A) does not hold here.
    PrecisContext,
    /// Our repertoire: not a letter, mark or decimal digit, nor `-`, `_`, `.`.
    NotNameCharacter,
    /// UTS #39: Identifier_Status is Restricted (historic, technical, uncommon).
    NotRecommended,
}

impl CharRule {
    fn explain(self) -> &'static str {
        match self {
            CharRule::PrecisDisallowed => {
                "RFC 8265 usernames exclude spaces, controls, symbols, punctuation and \
                 compatibility forms"
            }
            CharRule::PrecisUnassigned => {
                "it is not in Unicode 6.3, the version the PRECIS tables use, and newer \
                 characters are refused"
            }
            CharRule::PrecisContext => {
                "it is only allowed next to particular characters (RFC 5892 context rule)"
            }
            CharRule::NotNameCharacter => ALLOWED,
            CharRule::NotRecommended => {
                "UTS #39 does not recommend it for identifiers (historic, technical or \
                 limited use)"
            }
        }
    }
}

/// `U+0041 'A'`, or just `U+0020` for what would not show (spaces, controls,
/// format characters, lone marks).
fn show(c: char, category: &str) -> String {
    match category.as_bytes().first() {
        Some(b'Z' | b'C' | b'M') => format!("U+{:04X}", u32::from(c)),
        _ => format!("U+{:04X} '{c}'", u32::from(c)),
    }
}

fn bad_codepoint(info: &CodepointInfo, rule: CharRule) -> NameError {
    match char::from_u32(info.cp) {
        Some(character) => NameError::DisallowedCharacter {
            character,
            category: repertoire::general_category(character),
            rule,
        },
        None => NameError::Precis {
            detail: info.to_string(),
        },
    }
}

/// Maps a PRECIS enforcement failure. [`crate::enforce_precis`] has already refused
/// the empty string, and width mapping, case mapping and NFC never empty a
/// non-empty string, so `Invalid` here is the Bidi Rule.
pub(crate) fn from_precis(error: precis_core::Error) -> NameError {
    use precis_core::DerivedPropertyValue as Dpv;
    match error {
        precis_core::Error::Invalid => NameError::Bidi,
        precis_core::Error::BadCodepoint(info) => {
            let rule = match info.property {
                Dpv::Unassigned => CharRule::PrecisUnassigned,
                Dpv::ContextJ | Dpv::ContextO => CharRule::PrecisContext,
                _ => CharRule::PrecisDisallowed,
            };
            bad_codepoint(&info, rule)
        }
        precis_core::Error::Unexpected(
            UnexpectedError::ContextRuleNotApplicable(info)
            | UnexpectedError::MissingContextRule(info),
        ) => bad_codepoint(&info, CharRule::PrecisContext),
        precis_core::Error::Unexpected(other) => NameError::Precis {
            detail: other.to_string(),
        },
    }
}
