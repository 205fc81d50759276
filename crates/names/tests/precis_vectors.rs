//! RFC 8265 UsernameCaseMapped vectors (tests/vectors/precis_username_casemapped.json,
//! a copy of shared/vectors: precis_i18n golden, Go x/text, Rust precis).
//!
//! Every enforce case is run against [`enforce_precis`] (step 2 alone) and against
//! [`canonicalize`] (the whole pipeline, which may only be stricter).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use switchboard_names::{CharRule, NameError, canonicalize, enforce_precis};

const VECTORS: &str = include_str!("vectors/precis_username_casemapped.json");

/// Cases whose input holds a lone UTF-16 surrogate (`\ud800`, `\ud8ff`). No `&str`
/// can hold one, so the type system already refuses them; they are counted, not run.
const SKIPPED_LONE_SURROGATE: usize = 2;

/// Cases precis_i18n (Unicode 14) accepts but `precis-core` refuses as unassigned,
/// because its derived property table is Unicode 6.3, the IANA registry's version.
/// All are marked `min_unicode_version` > 6.3 in the file; each is asserted to fail
/// with [`CharRule::PrecisUnassigned`], so this is a checked divergence, not a skip.
const NEWER_THAN_UNICODE_6_3: usize = 7;

/// `\u05d0\u20d6\u05d1` (Hebrew, a combining mark, Hebrew): precis_i18n accepts it,
/// `precis-profiles` 0.2.0 refuses it under the Bidi Rule because it treats any NSM
/// as the start of the label's trailing marks, while RFC 5893 rule 2 allows NSM
/// anywhere in an RTL label. So Hebrew or Arabic names with a vowel mark before the
/// last letter are refused: stricter than RFC 8265, never looser. Asserted to fail
/// with [`NameError::Bidi`], so a fixed dependency shows up here.
const BIDI_NSM_MID_LABEL: &[&str] = &["\\u05d0\\u20d6\\u05d1"];

#[derive(Deserialize)]
struct File {
    cases: Vec<Case>,
    compare_cases: Vec<CompareCase>,
}

#[derive(Deserialize)]
struct Case {
    source: String,
    input: Input,
    input_escaped: String,
    expected_output: Option<String>,
    min_unicode_version: Option<f64>,
}

#[derive(Deserialize)]
struct CompareCase {
    a: String,
    b: String,
    expected: serde_json::Value,
}

/// A JSON string that may hold a lone surrogate: `Err` keeps serde_json's raw bytes.
struct Input(Result<String, Vec<u8>>);

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Raw;
        impl Visitor<'_> for Raw {
            type Value = Input;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Input, E> {
                Ok(Input(Ok(v.to_owned())))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Input, E> {
                Ok(Input(
                    String::from_utf8(v.to_vec()).map_err(|e| e.into_bytes()),
                ))
            }
        }
        deserializer.deserialize_bytes(Raw)
    }
}

fn file() -> File {
    serde_json::from_str(VECTORS).expect("vector file parses")
}

#[test]
fn enforce_cases_match_rfc_8265() {
    let cases = file().cases;
    assert_eq!(
        cases.len(),
        376,
        "the vector file changed; review the counts below"
    );
    let (mut passed, mut lone_surrogates, mut newer, mut bidi) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for case in &cases {
        let input = match &case.input.0 {
            Ok(input) => input,
            Err(_) => {
                lone_surrogates += 1;
                continue;
            }
        };
        let got = enforce_precis(input);
        let newer_unicode = case.min_unicode_version.is_some_and(|v| v > 6.3);
        match (&case.expected_output, &got) {
            (Some(want), Ok(out)) if want == out => passed += 1,
            (None, Err(_)) => passed += 1,
            (Some(_), Err(NameError::DisallowedCharacter { rule, .. }))
                if newer_unicode && *rule == CharRule::PrecisUnassigned =>
            {
                newer += 1
            }
            (Some(_), Err(NameError::Bidi))
                if BIDI_NSM_MID_LABEL.contains(&case.input_escaped.as_str()) =>
            {
                bidi += 1
            }
            _ => failures.push(format!(
                "{} {:?}: want {:?}, got {:?}",
                case.source, case.input_escaped, case.expected_output, got
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        lone_surrogates, SKIPPED_LONE_SURROGATE,
        "skipped cases must not grow"
    );
    assert_eq!(
        newer, NEWER_THAN_UNICODE_6_3,
        "Unicode-version divergences must not grow"
    );
    assert_eq!(
        bidi,
        BIDI_NSM_MID_LABEL.len(),
        "Bidi divergences must not grow"
    );
    assert_eq!(passed, 366, "every other case passes");
    assert_eq!(passed + lone_surrogates + newer + bidi, cases.len());
}

#[test]
fn the_pipeline_is_never_looser_than_precis() {
    let (mut accepted, mut refused_by_precis, mut refused_by_names) = (0, 0, 0);
    for case in file().cases {
        let Ok(input) = case.input.0 else { continue };
        match (canonicalize(&input), &case.expected_output) {
            (Ok(name), Some(want)) => {
                assert_eq!(&name.canonical, want, "{:?}", case.input_escaped);
                accepted += 1;
            }
            (Ok(name), None) => panic!(
                "{:?} is refused by PRECIS but canonicalized to {:?}",
                case.input_escaped, name.canonical
            ),
            (Err(_), None) => refused_by_precis += 1,
            (Err(_), Some(_)) => refused_by_names += 1,
        }
    }
    // Pins how much of the PRECIS repertoire the stricter name rules keep (the 80
    // are ASCII punctuation and symbols, mixed scripts, Identifier_Status=Restricted
    // and the divergences above); a change means a dependency or a rule changed.
    assert_eq!(
        (accepted, refused_by_precis, refused_by_names),
        (89, 205, 80)
    );
}

#[test]
fn compare_cases_match() {
    let cases = file().compare_cases;
    assert_eq!(cases.len(), 6);
    for case in cases {
        let (a, b) = (enforce_precis(&case.a), enforce_precis(&case.b));
        match case.expected {
            serde_json::Value::Bool(same) => {
                let (a, b) = (a.expect("a enforces"), b.expect("b enforces"));
                assert_eq!(a == b, same, "{:?} vs {:?}", case.a, case.b);
            }
            _ => assert!(
                a.is_err() || b.is_err(),
                "{:?} vs {:?} must fail",
                case.a,
                case.b
            ),
        }
    }
}
