//! The generic high-entropy scanner: catches random-looking credentials that have
//! no known prefix.
//!
//! A *candidate* is a maximal run of base64/base64url characters
//! (`A–Z a–z 0–9 + / _ -`; `=` padding and
//! `key=value` separators end a run) at least [`EntropyRule::min_len`] long that contains
//! both a letter and a digit. It is flagged when its Shannon entropy, in bits per
//! character over its own character frequencies, reaches
//! [`EntropyRule::bits_per_char`]. A run with `/` that does not look like one
//! standard-base64 token (it mixes in `-` or `_`, lacks mixed case and digits, or
//! has more than one `/` per 16 characters) is a path or URL: each `/`-separated
//! piece is measured on its own, so `refs/heads/PROJ-1234-…` and
//! `github.com/owner/repo/commit/<sha>` are not flagged.
//!
//! Default: 32 characters and 4.3 bits per character. Why these numbers (measured
//! over 2,000 random strings per length):
//! - a hex string can never exceed log2(16) = 4 bits (log2(17) ≈ 4.09 with dashes),
//!   so UUIDs, SHA-1/SHA-256 digests and git commit ids are never flagged;
//! - ordinary words and identifiers stay below 4.3 (`internationalization` 2.95,
//!   `ThisIsAVeryLongCamelCaseIdentifierName` 4.20 and no digit, paths about 3.9);
//! - random base64 of 32 characters scores 4.33 or more 95 % of the time (median
//!   4.56); at 40 characters 99 % score 4.47 or more (median 4.78).
//!
//! Shorter random strings cannot reach a high per-character entropy (a 20-character
//! string is bounded by log2(20) ≈ 4.32), so the prefix scanners cover short tokens.
//! Base64-encoded binary data of 32+ characters is flagged too: declare it as
//! something else or keep it out of messages.

use std::collections::BTreeMap;
use std::ops::Range;

/// When the high-entropy scanner fires. See the module docs for the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntropyRule {
    /// The shortest candidate considered, in characters.
    pub min_len: usize,
    /// The Shannon entropy, in bits per character, at or above which a candidate is
    /// a credential.
    pub bits_per_char: f64,
}

impl Default for EntropyRule {
    fn default() -> Self {
        Self {
            min_len: 32,
            bits_per_char: 4.3,
        }
    }
}

/// Shannon entropy of `text` in bits per character (0 for the empty string).
///
/// Deterministic: the terms are summed in character order (a `HashMap`'s random
/// order would move the last bit of the sum from run to run).
pub fn shannon_entropy(text: &str) -> f64 {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut total = 0usize;
    for c in text.chars() {
        *counts.entry(c).or_default() += 1;
        total += 1;
    }
    if total == 0 {
        return 0.0;
    }
    let n = total as f64;
    counts
        .values()
        .map(|&k| {
            let p = k as f64 / n;
            -p * p.log2()
        })
        .sum()
}

fn is_candidate_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-')
}

/// Byte ranges of the high-entropy candidates in `text`.
pub(super) fn scan(text: &str, rule: &EntropyRule) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_candidate_char(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_candidate_char(bytes[i]) {
            i += 1;
        }
        let run = &text[start..i];
        if !run.contains('/') || looks_like_base64(run) {
            measure(text, start..i, rule, &mut out);
        } else {
            let mut at = start;
            for piece in run.split('/') {
                measure(text, at..at + piece.len(), rule, &mut out);
                at += piece.len() + 1;
            }
        }
    }
    out
}

/// Whether a run holding `/` is one standard-base64 token rather than a path or a
/// URL: base64 never mixes `/` with `-` or `_`, nearly always mixes upper case,
/// lower case and digits, and has about one `/` in 64 characters, where paths have
/// one every few characters (allowed here: one in 16).
fn looks_like_base64(run: &str) -> bool {
    let has = |f: fn(&u8) -> bool| run.as_bytes().iter().any(f);
    let slashes = run.bytes().filter(|&b| b == b'/').count();
    !has(|b| *b == b'-' || *b == b'_')
        && has(u8::is_ascii_uppercase)
        && has(u8::is_ascii_lowercase)
        && has(u8::is_ascii_digit)
        && slashes * 16 <= run.len()
}

fn measure(text: &str, span: Range<usize>, rule: &EntropyRule, out: &mut Vec<Range<usize>>) {
    let candidate = &text[span.clone()];
    let mixed = candidate.bytes().any(|b| b.is_ascii_alphabetic())
        && candidate.bytes().any(|b| b.is_ascii_digit());
    if candidate.len() >= rule.min_len && mixed && shannon_entropy(candidate) >= rule.bits_per_char
    {
        out.push(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AWS_EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    #[test]
    fn entropy_of_simple_strings() {
        assert_eq!(shannon_entropy(""), 0.0);
        assert_eq!(shannon_entropy("aaaa"), 0.0);
        assert!((shannon_entropy("abcd") - 2.0).abs() < 1e-9);
    }

    #[test]
    fn random_base64_is_flagged() {
        let rule = EntropyRule::default();
        let text = format!("secret={AWS_EXAMPLE_SECRET} end");
        assert_eq!(scan(&text, &rule), vec![7..47]);
        // A 43-character base64url token (32 random bytes), as the server mints.
        let token = "q8Zk3vN0pX7mWc2RtY5uHb9LdE4sFgJ1aKoIiQeTzVn";
        assert_eq!(scan(token, &rule), vec![0..token.len()]);
    }

    #[test]
    fn uuids_and_digests_never_reach_the_threshold() {
        let rule = EntropyRule::default();
        for text in [
            "550e8400-e29b-41d4-a716-446655440000",
            "0192f7c4-9a3b-7d21-8e5f-6c4b3a291807",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        ] {
            assert!(
                shannon_entropy(text) < rule.bits_per_char,
                "hex is bounded by ~4 bits/char: {text}"
            );
            assert!(scan(text, &rule).is_empty(), "{text}");
        }
    }

    #[test]
    fn words_paths_and_identifiers_pass() {
        let rule = EntropyRule::default();
        for text in [
            "internationalization and localization of the console",
            "ThisIsAVeryLongCamelCaseIdentifierName",
            "/home/user/projects/switchboard2/crates/sdk/src",
            "https://github.com/owner/repo/commit/da39a3ee5e6b4b0d3255bfef95601890afd80709",
            "/var/lib/switchboard/agents/agent-42/outbox/2026-11-29/queue",
            "refs/heads/feature/PROJ-1234-add-privacy-gate-to-sdk-v2",
            "s3://my-bucket-2024/logs/2026/11/29/agent-7/output-000123.json",
            "/Users/JohnSmith2/Documents/Projects/Quarterly/Report",
            "some_long_function_name_here_for_testing_v2",
            "2026-11-29T16:08:26Z x86_64-unknown-linux-gnu",
        ] {
            assert!(scan(text, &rule).is_empty(), "{text}");
        }
    }

    #[test]
    fn short_random_strings_are_below_min_len() {
        let rule = EntropyRule::default();
        let short = &AWS_EXAMPLE_SECRET[..31];
        assert!(
            scan(short, &rule).is_empty(),
            "31 chars is under min_len 32"
        );
        assert_eq!(scan(&AWS_EXAMPLE_SECRET[..32], &rule).len(), 1);
    }

    #[test]
    fn threshold_is_inclusive_and_configurable() {
        let text = AWS_EXAMPLE_SECRET;
        let h = shannon_entropy(text);
        let at = EntropyRule {
            min_len: 32,
            bits_per_char: h,
        };
        assert_eq!(scan(text, &at).len(), 1, "at the threshold is flagged");
        let above = EntropyRule {
            bits_per_char: h + 0.01,
            ..at
        };
        assert!(
            scan(text, &above).is_empty(),
            "just above the entropy passes"
        );
    }
}
