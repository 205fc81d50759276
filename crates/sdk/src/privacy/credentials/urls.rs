//! URLs that carry a secret: incoming webhooks whose path is the secret (Slack,
//! Discord, Microsoft Teams), signed URLs (`sig=`, `X-Amz-Signature=`,
//! `X-Goog-Signature=`) and a password in the userinfo (`scheme://user:pass@host`).
//!
//! A userinfo password that is a placeholder (`${DB_PASSWORD}`, `****`, `<pass>`)
//! is not a secret; a URL with a user and no password (`postgres://app@db/app`) is
//! not either.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::super::finding::Credential;
use super::assignment::is_placeholder;
use super::regex;

/// The whole URL is the secret; or, with a capture group, that group.
static SECRET_URLS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}",
        r"https?://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}",
        r"https://(?:[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2|outlook\.office(?:365)?\.com/webhook)/[A-Za-z0-9@-]+/IncomingWebhook/[A-Za-z0-9]{32}/[A-Za-z0-9-]{36}",
        r"[?&](?i:sig|x-amz-signature|x-goog-signature)=([A-Za-z0-9%+/=_-]{20,})",
    ]
    .into_iter()
    .map(regex)
    .collect()
});

/// `scheme://user:password@host`; group 1 is the password.
static USERINFO: LazyLock<Regex> = LazyLock::new(|| {
    regex(r#"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:"'<>]+:([^\s/?#@"'<>]+)@[A-Za-z0-9.\[\]-]+"#)
});

/// Webhooks and signed URLs.
pub(super) fn secret_urls(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    for re in SECRET_URLS.iter() {
        for caps in re.captures_iter(text) {
            let m = caps.get(1).or_else(|| caps.get(0));
            out.extend(m.map(|m| (Credential::SecretUrl, m.range())));
        }
    }
    out
}

/// Passwords in a URL's userinfo.
pub(super) fn passwords(text: &str) -> Vec<(Credential, Range<usize>)> {
    USERINFO
        .captures_iter(text)
        .filter_map(|caps| caps.get(1))
        .filter(|m| !is_placeholder(m.as_str()))
        .map(|m| (Credential::UrlPassword, m.range()))
        .collect()
}
