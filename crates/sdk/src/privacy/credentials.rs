//! Credential scanners with a known shape: cloud keys, PEM private keys, JWTs and
//! tokens with a vendor prefix. The generic high-entropy scanner is in
//! [`entropy`](super::entropy).
//!
//! Every pattern is anchored on a word boundary before its prefix, so `task-…` does
//! not match `sk-` and `AKIA…` inside a longer word does not match either. A bare
//! prefix (`sb_ag_`, `ghp_`) is not a token: each pattern asks for a body of
//! realistic length.

use std::ops::Range;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

use super::finding::Credential;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("privacy gate pattern compiles")
}

/// Prefix tokens: (rule, pattern). The whole match is the span.
static PREFIXED: LazyLock<Vec<(Credential, Regex)>> = LazyLock::new(|| {
    vec![
        (
            Credential::AwsAccessKeyId,
            regex(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ),
        (
            Credential::GitHubToken,
            regex(r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
        ),
        (
            Credential::SlackToken,
            regex(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),
        ),
        (
            Credential::StripeKey,
            regex(r"\b(?:sk|rk)_live_[A-Za-z0-9]{16,}"),
        ),
        (
            Credential::OpenAiKey,
            regex(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),
        ),
        (Credential::GoogleApiKey, regex(r"\bAIza[0-9A-Za-z_-]{35}")),
        (
            Credential::SwitchboardToken,
            regex(r"\bsb_(?:op|ag)_[A-Za-z0-9_-]{16,}"),
        ),
    ]
});

/// A PEM private-key header; covers RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP … blocks.
static PEM_BEGIN: LazyLock<Regex> =
    LazyLock::new(|| regex(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"));
static PEM_END: LazyLock<Regex> =
    LazyLock::new(|| regex(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"));

/// Three base64url segments; the header is checked by decoding it.
static JWT: LazyLock<Regex> =
    LazyLock::new(|| regex(r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"));

/// Exactly 40 base64 characters, not part of a longer run.
static AWS_SECRET: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?:^|[^A-Za-z0-9/+=])([A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=])"));
/// A label that says the next value is an AWS secret.
static AWS_SECRET_LABEL: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)aws.{0,24}secret|secret.{0,8}access.{0,8}key"));

/// All credential matches in `text`, in no particular order.
pub(super) fn scan(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    for (rule, re) in PREFIXED.iter() {
        out.extend(re.find_iter(text).map(|m| (*rule, m.range())));
    }
    out.extend(private_keys(text));
    out.extend(jwts(text));
    out.extend(aws_secrets(text));
    out
}

/// A PEM block from its BEGIN line to its END line, or the BEGIN line alone when the
/// END is missing (a truncated key is still a leak).
fn private_keys(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(begin) = PEM_BEGIN.find_at(text, from) {
        let end = PEM_END
            .find_at(text, begin.end())
            .map_or(begin.end(), |m| m.end());
        out.push((Credential::PrivateKey, begin.start()..end));
        from = end;
    }
    out
}

/// JWTs. When a candidate's first segment is not a header (`notes.eyJ….….…`), the
/// search resumes after its first dot, so the real token behind it is still found.
fn jwts(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(m) = JWT.find_at(text, from) {
        let (header, _) = m.as_str().split_once('.').unwrap_or_default();
        if is_jwt_header(header) {
            out.push((Credential::Jwt, m.range()));
            from = m.end();
        } else {
            from = m.start() + header.len() + 1;
        }
    }
    out
}

/// Whether a base64url segment decodes to a JSON object with an `alg` member.
fn is_jwt_header(segment: &str) -> bool {
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment) else {
        return false;
    };
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v.as_object().map(|o| o.contains_key("alg")))
        .unwrap_or(false)
}

/// A 40-character base64 run is an AWS secret only next to a key: in a string that
/// also holds an access key id, or after an `aws … secret` label. Alone it is left
/// to the entropy scanner.
fn aws_secrets(text: &str) -> Vec<(Credential, Range<usize>)> {
    let has_key_id = PREFIXED
        .iter()
        .any(|(rule, re)| *rule == Credential::AwsAccessKeyId && re.is_match(text));
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(caps) = AWS_SECRET.captures_at(text, from) {
        let Some(m) = caps.get(1) else { break };
        let mut lookback = m.start().saturating_sub(64);
        while !text.is_char_boundary(lookback) {
            lookback += 1;
        }
        let before = &text[lookback..m.start()];
        let labelled = AWS_SECRET_LABEL.is_match(before);
        let mixed = m.as_str().bytes().any(|b| b.is_ascii_digit())
            || m.as_str().bytes().any(|b| b == b'/' || b == b'+');
        if (has_key_id || labelled) && mixed {
            out.push((Credential::AwsSecretAccessKey, m.range()));
        }
        from = m.end();
    }
    out
}

#[cfg(test)]
pub(super) mod tests;
