//! Fuzz target of the name canonicalizer (issue 17): `canonicalize`,
//! `enforce_precis` and `skeleton` on arbitrary strings and on mutations of the
//! PRECIS and UTS #39 vectors. See `switchboard-fuzz` for the engine and budget.

use switchboard_fuzz::{Case, Corpus, fuzz};
use switchboard_names::{MAX_CHARS, NAME_INVALID, canonicalize, enforce_precis, skeleton};

/// Characters the pipeline treats specially: width, case and normalization
/// mappings, context rules, confusables, bidi, default ignorables.
const TOKENS: &[&str] = &[
    "ß",
    "ẞ",
    "Σ",
    "σ",
    "ς",
    "\u{212A}",
    "İ",
    "ı",
    "ǅ",
    "ﬁ",
    "ｂｏｔ",
    "Ａ",
    "ｶ",
    "\u{3000}",
    "\u{00B7}",
    "l\u{00B7}l",
    "\u{0375}",
    "\u{05F3}",
    "\u{30FB}",
    "\u{200C}",
    "\u{200D}",
    "\u{00AD}",
    "\u{FEFF}",
    "\u{034F}",
    "а",
    "о",
    "р",
    "е",
    "Ꭺ",
    "0",
    "O",
    "1",
    "l",
    "-",
    "_",
    ".",
    "@",
    " ",
    "\u{0301}",
    "\u{0308}",
    "e\u{0301}",
    "\u{1100}\u{1161}",
    "한",
    "漢",
    "カ",
    "ひ",
    "ㄅ",
    "א",
    "\u{05B7}",
    "ب",
    "\u{064E}",
    "١",
    "٣",
    "\u{202E}",
    "\u{0000}",
    "\u{FFFD}",
    "\u{10FFFF}",
    "\u{1F600}",
    "Ⅻ",
    "²",
    "½",
];

fn corpus() -> Corpus {
    Corpus::new()
        .json_strings(include_str!("vectors/precis_username_casemapped.json"), 128)
        .json_strings(include_str!("vectors/uts39_confusables.json"), 128)
        .seeds(["build-bot", "Build-Bot", "paypal", "pаypal", "agent_1.test"])
        .tokens(TOKENS)
}

fn check(input: &str) {
    let _ = skeleton(input);
    let precis = enforce_precis(input);
    match &precis {
        Ok(enforced) => {
            assert!(!enforced.is_empty(), "{input:?}: empty enforced string");
            assert_eq!(
                enforce_precis(enforced).as_ref(),
                Ok(enforced),
                "{input:?}: enforce_precis is not idempotent"
            );
        }
        Err(e) => {
            assert_eq!(e.code(), NAME_INVALID, "{input:?}");
            let _ = e.to_string();
        }
    }
    match canonicalize(input) {
        Ok(name) => {
            let chars = name.canonical.chars().count();
            assert!((1..=MAX_CHARS).contains(&chars), "{input:?}: {chars} chars");
            assert_eq!(
                precis.as_ref(),
                Ok(&name.canonical),
                "{input:?}: canonicalize and enforce_precis disagree"
            );
            assert_eq!(name.skeleton, skeleton(&name.canonical), "{input:?}");
            assert_eq!(
                canonicalize(&name.canonical).as_ref(),
                Ok(&name),
                "{input:?}: canonicalize is not idempotent"
            );
        }
        Err(e) => {
            assert_eq!(e.code(), NAME_INVALID, "{input:?}");
            let _ = e.to_string();
        }
    }
}

#[test]
fn fuzz_names() {
    let corpus = corpus();
    fuzz!(
        "names",
        "no panic; canonicalize and enforce_precis idempotent; canonicalize agrees with \
         enforce_precis, keeps 1..=64 chars and its skeleton is skeleton(canonical)",
        |case: Case| {
            check(&corpus.text(case));
        }
    );
}
