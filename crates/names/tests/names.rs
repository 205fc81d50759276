//! Our own cases: today's names, the examples, and the error messages.

use switchboard_names::{
    CharRule, MAX_CHARS, NAME_CONFUSABLE, NAME_INVALID, NameError, canonicalize, skeleton,
};

fn canonical(input: &str) -> String {
    canonicalize(input)
        .unwrap_or_else(|e| panic!("{input:?}: {e}"))
        .canonical
}

#[test]
fn todays_ascii_names_only_lose_their_case() {
    for (input, want) in [
        ("Build-Bot", "build-bot"),
        ("agent_1.prod-eu", "agent_1.prod-eu"),
        ("A", "a"),
        ("...", "..."),
        ("0", "0"),
    ] {
        assert_eq!(canonical(input), want);
    }
}

#[test]
fn fullwidth_is_width_mapped() {
    assert_eq!(canonical("ｂｏｔ"), "bot");
    assert_eq!(canonical("ＢＯＴ－１"), "bot-1");
}

#[test]
fn case_mapping_is_to_lowercase_not_folding() {
    assert_eq!(canonical("Straße"), "straße", "ß is not folded to ss");
    assert_eq!(
        canonical("ΒΌΛΟΣ"),
        "βόλος",
        "a final capital sigma becomes ς"
    );
    assert_eq!(
        canonical("\u{212a}evin"),
        "kevin",
        "KELVIN SIGN lowercases to k"
    );
}

#[test]
fn paypal_with_a_cyrillic_a_has_the_same_skeleton_and_is_refused() {
    let spoof = "p\u{430}ypal";
    let real = canonicalize("paypal").expect("paypal is a name");
    assert_eq!(
        skeleton(spoof),
        real.skeleton,
        "the uniqueness key collides"
    );
    let err = canonicalize(spoof).unwrap_err();
    assert_eq!(
        err,
        NameError::MixedScript {
            scripts: vec!["Latin", "Cyrillic"]
        }
    );
    assert_eq!(err.code(), NAME_INVALID);
    assert!(err.to_string().contains("Latin and Cyrillic"), "{err}");
}

#[test]
fn whole_script_confusables_are_names_with_colliding_skeletons() {
    // All-Cyrillic "асе" is single-script, so it is a valid name; only the
    // skeleton keeps it from being held next to Latin "ace".
    let cyrillic = canonicalize("\u{430}\u{441}\u{435}").expect("single script");
    let latin = canonicalize("ace").expect("ascii");
    assert_ne!(cyrillic.canonical, latin.canonical);
    assert_eq!(cyrillic.skeleton, latin.skeleton);
}

#[test]
fn single_script_look_alikes_collide() {
    let (one, ell) = (canonicalize("1ove").unwrap(), canonicalize("love").unwrap());
    assert_eq!(one.skeleton, ell.skeleton, "1 and l share the prototype l");
    let (rn, m) = (
        canonicalize("rnodem").unwrap(),
        canonicalize("modem").unwrap(),
    );
    assert_eq!(rn.skeleton, m.skeleton, "rn looks like m");
}

#[test]
fn a_space_is_refused_with_its_code_point_and_a_fix() {
    let err = canonicalize("build bot").unwrap_err();
    assert_eq!(
        err,
        NameError::DisallowedCharacter {
            character: ' ',
            category: "Zs",
            rule: CharRule::PrecisDisallowed,
        }
    );
    let message = err.to_string();
    assert!(message.contains("U+0020 (a space, Zs)"), "{message}");
    assert!(message.contains("use '-', '_' or '.' instead"), "{message}");
    assert_eq!(err.code(), NAME_INVALID);
}

#[test]
fn an_emoji_is_refused_as_a_symbol() {
    let err = canonicalize("bot\u{1f600}").unwrap_err();
    let want = NameError::DisallowedCharacter {
        character: '\u{1f600}',
        category: "So",
        rule: CharRule::PrecisDisallowed,
    };
    assert_eq!(err, want);
    assert!(
        err.to_string()
            .contains("U+1F600 '\u{1f600}' (a symbol, So)"),
        "{err}"
    );
    // U+1F916 is newer than the PRECIS tables (Unicode 6.3): refused as such.
    let err = canonicalize("bot\u{1f916}").unwrap_err();
    let want = NameError::DisallowedCharacter {
        character: '\u{1f916}',
        category: "So",
        rule: CharRule::PrecisUnassigned,
    };
    assert_eq!(err, want);
    assert!(err.to_string().contains("not in Unicode 6.3"), "{err}");
}

#[test]
fn ascii_punctuation_that_precis_allows_is_refused_by_the_name_rules() {
    let err = canonicalize("bot!").unwrap_err();
    assert_eq!(
        err,
        NameError::DisallowedCharacter {
            character: '!',
            category: "Po",
            rule: CharRule::NotNameCharacter,
        }
    );
    assert!(
        err.to_string().contains("names may hold letters, digits"),
        "{err}"
    );
}

#[test]
fn controls_and_format_characters_are_refused() {
    for input in [
        "bot\u{0}",
        "bot\u{7f}",
        "b\u{200b}ot",
        "b\u{200d}ot",
        "bot\u{feff}",
    ] {
        assert!(canonicalize(input).is_err(), "{input:?} was accepted");
    }
}

#[test]
fn the_length_limit_is_64_code_points_after_canonicalization() {
    assert_eq!(canonical(&"a".repeat(MAX_CHARS)).chars().count(), 64);
    assert_eq!(
        canonicalize(&"a".repeat(65)),
        Err(NameError::TooLong { chars: 65 })
    );
    // 64 fullwidth letters are 64 after width mapping too.
    assert!(canonicalize(&"ａ".repeat(64)).is_ok());
    // An overlong input is refused before any work, with its own length.
    assert_eq!(
        canonicalize(&"a".repeat(10_000)),
        Err(NameError::TooLong { chars: 10_000 })
    );
    let message = canonicalize(&"a".repeat(65)).unwrap_err().to_string();
    assert!(
        message.contains("65 characters") && message.contains("limit is 64"),
        "{message}"
    );
}

#[test]
fn nfc_composes_before_counting() {
    // 64 × (e + U+0301) is 128 code points in, 64 × é out.
    let input = "e\u{301}".repeat(64);
    assert_eq!(canonical(&input), "é".repeat(64));
}

#[test]
fn empty_is_refused() {
    let err = canonicalize("").unwrap_err();
    assert_eq!(err, NameError::Empty);
    assert!(err.to_string().contains("1 to 64"), "{err}");
}

#[test]
fn right_to_left_names_follow_the_bidi_rule() {
    assert_eq!(
        canonical("\u{5e9}\u{5dc}\u{5d5}\u{5dd}"),
        "\u{5e9}\u{5dc}\u{5d5}\u{5dd}"
    );
    // A Hebrew name may not start with a digit (RFC 5893 rule 1).
    assert_eq!(canonicalize("1\u{5e9}\u{5dc}"), Err(NameError::Bidi));
}

#[test]
fn japanese_with_latin_is_highly_restrictive() {
    assert_eq!(
        canonical("Bot\u{30a2}\u{30eb}\u{30d5}\u{30a1}"),
        "bot\u{30a2}\u{30eb}\u{30d5}\u{30a1}"
    );
    assert_eq!(canonical("\u{6771}\u{4eac}-bot"), "\u{6771}\u{4eac}-bot");
}

#[test]
fn confusable_is_the_only_other_code() {
    let err = NameError::Confusable {
        canonical: "p\u{430}ypal".into(),
        skeleton: "paypal".into(),
    };
    assert_eq!(err.code(), NAME_CONFUSABLE);
    assert!(
        err.to_string().contains("choose a visibly different name"),
        "{err}"
    );
    assert_eq!(NameError::Bidi.code(), NAME_INVALID);
}

#[test]
fn a_display_name_loses_its_spaces_and_case_by_one_rule() {
    let display = |s: &str| switchboard_names::canonicalize_display(s).map(|c| c.canonical);
    // The names-and-leases seed's example.
    assert_eq!(display("My Agent").unwrap(), "myagent");
    // Every White_Space code point goes: tab, no-break space, ideographic space,
    // line separator; NFKC first (fullwidth, the `ﬁ` ligature).
    assert_eq!(display("Build\tBot\u{a0}2").unwrap(), "buildbot2");
    assert_eq!(display("Ｂｕｉｌｄ\u{3000}Bot").unwrap(), "buildbot");
    assert_eq!(display("ﬁx\u{2028}It").unwrap(), "fixit");
    // What PRECIS or our repertoire refuses stays refused.
    for bad in ["My Agent!", "a@b", "   ", "pаy pal"] {
        let e = display(bad).unwrap_err();
        assert_eq!(e.code(), switchboard_names::NAME_INVALID, "{bad:?}: {e}");
    }
    // A plain name is its own display name.
    assert_eq!(display("build-bot").unwrap(), "build-bot");
}
