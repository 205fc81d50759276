//! Canonical agent names: the one spelling of a name that the service stores, and
//! the key that decides whether two names are too alike to both be held.
//!
//! # Pipeline
//!
//! [`canonicalize`] runs these steps in order and stops at the first failure:
//!
//! 1. **Size guard.** An empty input is [`NameError::Empty`]. An input over
//!    4 × [`MAX_CHARS`] code points is [`NameError::TooLong`] without further work
//!    (no canonical decomposition is longer than 4 code points, so it could not
//!    shrink to [`MAX_CHARS`]).
//! 2. **PRECIS UsernameCaseMapped** (RFC 8265 §3.2–3.4) in the order of RFC 8264
//!    §7: width mapping (fullwidth `ｂｏｔ` → `bot`, `precis-profiles`), case mapping
//!    with Unicode `toLowerCase` (`str::to_lowercase`: not case folding, so `ß`
//!    stays `ß`, and a final `Σ` becomes `ς`), NFC (`unicode-normalization`), then
//!    `precis-profiles`' enforcement, whose own mapping steps are no-ops by then and
//!    which checks the IdentifierClass repertoire (RFC 8264: no spaces, controls,
//!    compatibility characters, non-ASCII symbols or punctuation, unassigned code
//!    points, context rules) and the Bidi Rule (RFC 5893). Mapping first matters:
//!    `precis-profiles` alone checks the repertoire before case mapping and NFC, so
//!    it refuses U+212A KELVIN SIGN, conjoining jamo that NFC composes into a Hangul
//!    syllable, and `L·L`; RFC 8264 §7 and the precis_i18n and Go implementations
//!    accept them as `k`, the syllable and `l·l`.
//! 3. **Length.** At most [`MAX_CHARS`] code points after step 2.
//! 4. **Name repertoire** (ours, stricter than PRECIS): every code point must have
//!    general category `L*` (letters), `Mn`/`Mc` (combining marks) or `Nd` (decimal
//!    digits), or be one of ASCII `-`, `_`, `.`. This rejects what IdentifierClass
//!    still lets through: ASCII punctuation and symbols other than those three
//!    (`!`, `#`, `@`, `\`, …), and the PRECIS exceptions and context characters that
//!    are punctuation, symbols or format controls (U+00B7 middle dot, U+0375 keraia,
//!    U+05F3/U+05F4 geresh, U+30FB katakana middle dot, U+06FD/U+06FE, U+0F0B,
//!    U+200C/U+200D ZWNJ/ZWJ). Today's names, `[A-Za-z0-9._-]`, all pass.
//! 5. **UTS #39 Highly Restrictive** (`unicode-security`): every code point has
//!    Identifier_Status=Allowed, and the string is single-script, or Latin plus
//!    Han/Hiragana/Katakana (Japanese), Han/Bopomofo or Han/Hangul (Korean).
//!    Common and Inherited characters (digits, `-`, `_`, `.`, marks) go with any
//!    script.
//! 6. **Skeleton** (UTS #39 §4): NFD, drop Default_Ignorable code points, map each
//!    code point to its confusables.txt prototype, NFD again.
//!
//! # Terms
//!
//! - **canonical name**: the output of steps 1–5. Two inputs that differ only in
//!   case, width or normalization have the same canonical name (`Build-Bot` and
//!   `build-bot`). It is what the service stores and shows.
//! - **skeleton**: the output of step 6 on the canonical name. It is the uniqueness
//!   key: two names whose skeletons are equal are *confusable* and cannot both be
//!   held (`paypal` and `pаypal` with a Cyrillic `а`). The skeleton is a key, not a
//!   name: it can contain uppercase (`0` → `O`) and characters the name rules reject.
//! - `name_invalid` / `name_confusable`: the stable error codes, see
//!   [`NameError::code`]. This crate only ever returns `name_invalid`;
//!   [`NameError::Confusable`] is built by the caller that checks uniqueness.
//!
//! Unicode versions: the PRECIS derived property tables are Unicode 6.3 (the IANA
//! registry, so newer letters are rejected as unassigned); the width mapping and the
//! Bidi classes are Unicode 17; general categories, scripts, identifier status and
//! confusables are Unicode 18.
//!
//! Known strictness beyond RFC 8265 (tested in `tests/precis_vectors.rs`): the
//! `precis-profiles` Bidi Rule refuses a right-to-left name with a combining mark
//! before its last letter (RFC 5893 allows it), so pointed Hebrew or vowelled
//! Arabic names are refused; and letters newer than Unicode 6.3 are refused.

mod error;
mod repertoire;
mod script;

pub use error::{CharRule, NAME_CONFUSABLE, NAME_INVALID, NameError};

use precis_profiles::UsernameCaseMapped;
use precis_profiles::precis_core::profile::{Profile, Rules};
use unicode_normalization::UnicodeNormalization;

/// The most code points a canonical name may have.
pub const MAX_CHARS: usize = 64;

/// Inputs longer than this are refused before canonicalization (see step 1).
const MAX_INPUT_CHARS: usize = 4 * MAX_CHARS;

/// A name that passed every step of the pipeline, and its uniqueness key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalName {
    /// The stored and displayed form (steps 1–5).
    pub canonical: String,
    /// The UTS #39 skeleton of `canonical`: equal skeletons mean confusable names.
    pub skeleton: String,
}

/// Runs the whole pipeline described in the crate docs.
pub fn canonicalize(input: &str) -> Result<CanonicalName, NameError> {
    if input.is_empty() {
        return Err(NameError::Empty);
    }
    let input_chars = input.chars().count();
    if input_chars > MAX_INPUT_CHARS {
        return Err(NameError::TooLong { chars: input_chars });
    }
    let canonical = enforce_precis(input)?;
    let chars = canonical.chars().count();
    if chars > MAX_CHARS {
        return Err(NameError::TooLong { chars });
    }
    repertoire::check(&canonical)?;
    script::check_highly_restrictive(&canonical)?;
    let skeleton = skeleton(&canonical);
    Ok(CanonicalName {
        canonical,
        skeleton,
    })
}

/// The canonical name of a *display name*, a string meant to be read (`My Agent`):
/// letter case and spaces are allowed in it. The rule, exactly:
///
/// 1. NFKC (compatibility composition: `ﬁ` → `fi`, fullwidth → ASCII, `²` → `2`);
/// 2. every Unicode `White_Space` code point removed (spaces, tabs, no-break
///    spaces, line and paragraph separators);
/// 3. [`canonicalize`]: PRECIS UsernameCaseMapped, our repertoire, UTS #39.
///
/// What step 3 refuses stays refused (`name_invalid`): punctuation other than
/// `-`, `_` and `.`, symbols, mixed scripts. `My Agent` → `myagent` (the
/// names-and-leases seed's example); an input that is nothing but white space is
/// [`NameError::Empty`].
pub fn canonicalize_display(display: &str) -> Result<CanonicalName, NameError> {
    if display.chars().count() > MAX_INPUT_CHARS {
        return Err(NameError::TooLong {
            chars: display.chars().count(),
        });
    }
    let compact: String = display.nfkc().filter(|c| !c.is_whitespace()).collect();
    canonicalize(&compact)
}

/// Step 2 alone: RFC 8265 UsernameCaseMapped enforcement in RFC 8264 §7 order, with
/// its failures mapped to [`NameError`]. [`canonicalize`] accepts a subset of what this accepts, and
/// when both accept, they give the same string.
pub fn enforce_precis(input: &str) -> Result<String, NameError> {
    if input.is_empty() {
        return Err(NameError::Empty);
    }
    let profile = UsernameCaseMapped::new();
    let mapped = profile
        .width_mapping_rule(input)
        .map_err(error::from_precis)?;
    let normalized: String = mapped.to_lowercase().nfc().collect();
    profile
        .enforce(normalized)
        .map(|enforced| enforced.into_owned())
        .map_err(error::from_precis)
}

/// The UTS #39 skeleton of any string (step 6). Use it on a canonical name; on
/// other input it is still the UTS #39 function, which the vector tests check.
pub fn skeleton(s: &str) -> String {
    unicode_security::skeleton(s).collect()
}
