//! UTS #39 vectors (tests/vectors/uts39_confusables.json, a copy of shared/vectors:
//! ICU4C itspoof.cpp and unicode-rs/unicode-security tests).
//!
//! Skeletons and confusable pairs are checked against [`skeleton`]. Restriction
//! levels, mixed-script and identifier-status cases are checked twice: against
//! `unicode-security` (the semantics we rely on) and against [`canonicalize`] (what
//! a name gets). Groups for checks this crate does not make are skipped and counted.

use serde_json::Value;
use switchboard_names::{CharRule, NameError, canonicalize, skeleton};
use unicode_security::mixed_script::AugmentedScriptSet;
use unicode_security::{GeneralSecurityProfile, MixedScript, RestrictionLevel};
use unicode_security::{RestrictionLevelDetection, is_potential_mixed_script_confusable_char};

const VECTORS: &str = include_str!("vectors/uts39_confusables.json");

/// Restriction-level cases where `unicode-security` (Unicode 18 data) and ICU's
/// expectation differ. Each is asserted to be stricter than ICU, never looser.
/// - U+0904 DEVANAGARI LETTER SHORT A is Uncommon_Use and U+303C MASU MARK is not
///   Identifier_Status=Allowed in this data, so their strings are Unrestricted.
///   For the four strings with U+303C that changes the verdict: ICU rates them
///   Highly Restrictive, the pipeline refuses them (NotRecommended).
/// - "a1١": U+0661 has Script_Extensions {Arab, Thaa, Yezi}, which the crate does
///   not narrow to one script, so it is Minimally rather than Moderately
///   Restrictive; refused either way.
const LEVEL_DIFFERENCES: &[(&str, RestrictionLevel)] = &[
    ("a\u{904}", RestrictionLevel::Unrestricted),
    ("a\u{303c}", RestrictionLevel::Unrestricted),
    ("a\u{30fc}\u{303c}", RestrictionLevel::Unrestricted),
    ("a\u{30fc}\u{303c}\u{30a2}", RestrictionLevel::Unrestricted),
    ("\u{30a2}a\u{30fc}\u{303c}", RestrictionLevel::Unrestricted),
    ("a1\u{661}", RestrictionLevel::MinimallyRestrictive),
    (
        "\u{661}\u{30fc}\u{303c}a\u{30a2}1\u{967}\u{6f1}",
        RestrictionLevel::Unrestricted,
    ),
    (
        "a\u{30a2}\u{30fc}\u{303c}1\u{967}\u{661}\u{6f1}",
        RestrictionLevel::Unrestricted,
    ),
];

/// Groups this crate does not implement, so they are not run: ICU's INVISIBLE (4:
/// repeated combining marks) and HIDDEN_OVERLAY (20: dotless letter + dot above)
/// checks, which UTS #39 lists beside the restriction levels but the issue did not
/// ask for; and "potential mixed-script confusable" (2), a per-character flag the
/// pipeline does not use (Highly Restrictive already refuses mixed scripts).
const SKIPPED: usize = 4 + 20 + 2;

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vector file parses")
}

fn cases(group: &str) -> Vec<Value> {
    vectors()[group].as_array().expect(group).clone()
}

fn text<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {case}"))
}

#[test]
fn skeletons_match() {
    let cases = cases("cases_skeleton");
    assert_eq!(cases.len(), 41);
    for case in &cases {
        let input = text(case, "input");
        assert_eq!(
            skeleton(input),
            text(case, "expected_skeleton"),
            "{input:?}"
        );
    }
}

#[test]
fn confusable_pairs_share_a_skeleton() {
    let cases = cases("cases_are_confusable");
    assert_eq!(cases.len(), 3);
    for case in &cases {
        let (a, b) = (text(case, "a"), text(case, "b"));
        assert_eq!(skeleton(a), skeleton(b), "{a:?} vs {b:?}");
    }
}

fn level(name: &str) -> RestrictionLevel {
    match name {
        "ASCII" => RestrictionLevel::ASCIIOnly,
        "SINGLE_SCRIPT_RESTRICTIVE" => RestrictionLevel::SingleScript,
        "HIGHLY_RESTRICTIVE" => RestrictionLevel::HighlyRestrictive,
        "MODERATELY_RESTRICTIVE" => RestrictionLevel::ModeratelyRestrictive,
        "MINIMALLY_RESTRICTIVE" => RestrictionLevel::MinimallyRestrictive,
        "UNRESTRICTIVE" => RestrictionLevel::Unrestricted,
        other => panic!("unknown level {other}"),
    }
}

/// Refused for its scripts or its identifier status (step 5), not an earlier step.
fn refused_by_uts39(result: &Result<switchboard_names::CanonicalName, NameError>) -> bool {
    matches!(
        result,
        Err(NameError::MixedScript { .. })
            | Err(NameError::DisallowedCharacter {
                rule: CharRule::NotRecommended,
                ..
            })
    )
}

#[test]
fn restriction_levels_match_and_only_highly_restrictive_names_pass() {
    let cases = cases("cases_restriction_level");
    assert_eq!(cases.len(), 15);
    let (mut accepted, mut differences) = (0, Vec::new());
    for case in &cases {
        let (input, want) = (text(case, "input"), level(text(case, "expected_level")));
        let detected = input.detect_restriction_level();
        if detected != want {
            assert!(
                detected > want,
                "{input:?}: {detected:?} is looser than {want:?}"
            );
            differences.push((input, detected));
        }
        let got = canonicalize(input);
        if detected <= RestrictionLevel::HighlyRestrictive {
            assert!(!refused_by_uts39(&got), "{input:?} is {want:?}: {got:?}");
            accepted += usize::from(got.is_ok());
        } else {
            assert!(got.is_err(), "{input:?} is {want:?} but was accepted");
        }
    }
    // Accepted: "a", "γ" and "aアー". "aγ♥" and "a♥" fail earlier (♥ is a symbol);
    // the U+303C strings fail as listed above.
    assert_eq!(
        differences, LEVEL_DIFFERENCES,
        "level differences changed: review"
    );
    assert_eq!(accepted, 3);
}

#[test]
fn mixed_script_cases_match() {
    let cases = cases("cases_mixed_script");
    assert_eq!(cases.len(), 9);
    for case in &cases {
        let input = text(case, "input");
        let single = case["expected_is_single_script"].as_bool().expect("bool");
        assert_eq!(input.is_single_script(), single, "{input:?}");
        let got = canonicalize(input);
        if single {
            // Not MixedScript; "幻ㄒㄧㄤ" is still refused, as Bopomofo is
            // Identifier_Status=Restricted (Limited_Use) in the Unicode 18 data.
            assert!(
                !matches!(got, Err(NameError::MixedScript { .. })),
                "{input:?}: {got:?}"
            );
        } else {
            // Refused; "夏の幻ㄒㄧㄤ" is reported for its Bopomofo first.
            assert!(got.is_err(), "{input:?} is mixed-script but was accepted");
        }
    }
}

#[test]
fn augmented_script_sets_match() {
    let cases = cases("cases_augmented_script_set");
    assert_eq!(cases.len(), 11);
    for case in &cases {
        let input = text(case, "input");
        let set = AugmentedScriptSet::for_str(input);
        match text(case, "expected_augmented_or_resolved_script_set") {
            "ALL" => assert!(set.is_all(), "{input:?}: {set:?}"),
            "∅" => assert!(set.is_empty(), "{input:?}: {set:?}"),
            want => assert_eq!(format!("{set:?}"), format!("AugmentedScriptSet {want}")),
        }
    }
}

#[test]
fn identifier_status_matches_and_decides_single_characters() {
    let cases = cases("cases_identifier_allowed");
    assert_eq!(cases.len(), 6);
    for case in &cases {
        let c = text(case, "char").chars().next().expect("one char");
        let allowed = case["expected_identifier_allowed"].as_bool().expect("bool");
        assert_eq!(c.identifier_allowed(), allowed, "U+{:04X}", u32::from(c));
        assert_eq!(
            canonicalize(&c.to_string()).is_ok(),
            allowed,
            "U+{:04X}",
            u32::from(c)
        );
    }
}

#[test]
fn mixed_numbers_are_not_checked_beyond_the_restriction_level() {
    // UTS #39 §5.3 mixed-number detection is not part of Highly Restrictive and is
    // not implemented. Pinned here: of the 7 expected failures, these pass the
    // pipeline (ASCII and Devanagari digits are both allowed and Common/Devanagari
    // resolve to one script); the others fail on PRECIS context rules or scripts.
    let cases = cases("cases_mixed_numbers");
    assert_eq!(cases.len(), 13);
    let accepted_anyway: Vec<&str> = cases
        .iter()
        .filter(|case| case["expected_mixed_numbers_failure"] == Value::Bool(true))
        .map(|case| text(case, "input"))
        .filter(|input| canonicalize(input).is_ok())
        .collect();
    assert_eq!(accepted_anyway, ["1\u{967}"]);
}

#[test]
fn skipped_groups_are_counted() {
    let v = vectors();
    let groups = [
        "cases_invisible",
        "cases_hidden_overlay",
        "cases_potential_mixed_script_confusable",
    ];
    let skipped: usize = groups.iter().map(|g| v[g].as_array().expect(g).len()).sum();
    assert_eq!(skipped, SKIPPED, "a skipped group grew: review it");
    // The one per-character flag is still the dependency's: 'A' is confusable
    // with Greek/Cyrillic capitals, 'D' is not.
    assert!(is_potential_mixed_script_confusable_char('A'));
    assert!(!is_potential_mixed_script_confusable_char('D'));
}
