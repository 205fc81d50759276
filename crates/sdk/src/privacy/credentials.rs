//! Credential scanners with a known shape. The generic high-entropy scanner is in
//! [`entropy`](super::entropy).
//!
//! Families, most specific first (the order that names a finding when two overlap):
//! - PEM private keys, JWTs (a header that decodes to JSON with `alg`), and an AWS
//!   secret beside its key id or label (this file);
//! - vendor tokens with a fixed prefix or shape (`prefixed.rs`: AWS, GitHub,
//!   GitLab, Slack, Stripe, Anthropic, OpenAI, Google, npm, PyPI, SendGrid,
//!   Twilio, Hugging Face, DigitalOcean, Shopify, Docker Hub, Vault, Grafana, age,
//!   Databricks, Postman, Telegram, Mailgun, Mailchimp, Linear, New Relic,
//!   Atlassian, Square, Pulumi, Heroku, Doppler, Sentry, Azure, Switchboard);
//! - URLs that are secrets: webhooks and signed URLs (`urls.rs`);
//! - generic, by context: a URL's userinfo password (`urls.rs`), a value assigned to
//!   a secret-named key and `Authorization` headers (`assignment.rs`).
//!
//! Every prefix pattern is anchored on a word boundary before its prefix, so `task-…`
//! does not match `sk-` and `AKIA…` inside a longer word does not match either. A
//! bare prefix (`sb_ag_`, `ghp_`, `glpat-`) is not a token: each pattern asks for a
//! body of realistic length. A generic match that overlaps a specific one is dropped,
//! so one secret gives one finding with the most precise rule.

use std::ops::Range;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

use super::finding::Credential;

mod assignment;
mod prefixed;
mod urls;

use prefixed::PREFIXED;

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("privacy gate pattern compiles")
}

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

/// All credential matches in `text`, in no particular order; overlapping matches
/// are resolved in favour of the more specific rule (see the module docs).
pub(super) fn scan(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut candidates = private_keys(text);
    candidates.extend(jwts(text));
    for (rule, re) in PREFIXED.iter() {
        for caps in re.captures_iter(text) {
            let m = caps.get(1).or_else(|| caps.get(0));
            candidates.extend(m.map(|m| (*rule, m.range())));
        }
    }
    candidates.extend(aws_secrets(text));
    candidates.extend(urls::secret_urls(text));
    candidates.extend(urls::passwords(text));
    candidates.extend(assignment::authorization(text));
    candidates.extend(assignment::assignments(text));
    let mut out: Vec<(Credential, Range<usize>)> = Vec::new();
    for (rule, span) in candidates {
        if !out
            .iter()
            .any(|(_, kept)| kept.start < span.end && span.start < kept.end)
        {
            out.push((rule, span));
        }
    }
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
