//! Secrets named by their key: `password=…`, `"api_key": "…"`, `client_secret: …`,
//! `--password …`, and `Authorization: Bearer …` / `Basic …` headers. The value is
//! the span; the key is not secret.
//!
//! Terms:
//! - a *key* is an identifier that ends in a keyword (`password`, `passwd`,
//!   `passphrase`, `pwd`, `…_pass`, `secret`, `token`, `api_key`/`apikey`,
//!   `access_key`, `private_key`, `client_key` …), as a whole word: `DB_PASSWORD`
//!   and `X-Api-Key` are keys, `password_hash`, `max_tokens` and `bypass` are not;
//! - an *assignment* is a key, an operator (`=`, `:`, `:=`, `=>`, `==`) and a value,
//!   quoted or not.
//!
//! A value is a secret unless it is a placeholder or code (see [`is_placeholder`]
//! and [`is_code`]). It needs 4 characters after a password key and 6 after any
//! other key. After a bare `:` (YAML, prose, type annotations) an unquoted value of
//! a non-password key must hold a digit, so `token: expired` passes.

use std::ops::Range;
use std::sync::LazyLock;

use base64::Engine as _;
use regex::Regex;

use super::super::finding::Credential;
use super::regex;

const PASSWORD_WORDS: &str = r"passw(?:or)?d|passphrase|pwd|[_.-]pass";
const OTHER_WORDS: &str = r"secret|token|apikey|(?:api|access|secret|private|signing|encryption|master|auth|account|client|app)[_.-]?key";

/// key, operator, value: group `key`, `op`, then `dq`, `sq` or `bare`.
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r#"(?i)(?P<key>[A-Za-z0-9_.-]*?(?:{PASSWORD_WORDS}|{OTHER_WORDS}))\b["']?\s*(?P<op>:=|=>|==|=|:)[ \t]*(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<bare>[^\s"'`,;&<>()\[\]{{}}]+))"#
    ))
});
/// A command-line flag with its value after a space: `--password hunter2`.
static FLAG: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r#"(?i)(?:^|\s)--(?P<key>password|passwd|pass|token|secret|api-key|apikey|auth-token|access-token|client-secret)[ \t]+(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<bare>[^\s"'`,;&<>()\[\]{}-][^\s"'`,;&<>()\[\]{}]*))"#,
    )
});
static PASSWORD_KEY: LazyLock<Regex> =
    LazyLock::new(|| regex(&format!(r"(?i)(?:{PASSWORD_WORDS}|^pass)$")));
static BEARER: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)"));
static BASIC: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\bbasic[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?:$|[^A-Za-z0-9+/=])"));
/// `self.password`, `process.env.APP_SECRET`: a variable, not a value.
static DOTTED: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$"));

/// Values that stand for a secret rather than being one.
const STOPWORDS: &[&str] = &[
    "null",
    "none",
    "nil",
    "undefined",
    "true",
    "false",
    "yes",
    "no",
    "string",
    "str",
    "bytes",
    "text",
    "number",
    "integer",
    "int",
    "bool",
    "boolean",
    "option",
    "secret",
    "secretstring",
    "password",
    "token",
    "required",
    "optional",
    "hidden",
    "masked",
    "empty",
    "unset",
    "env",
    "file",
    "stdin",
    "prompt",
    "redacted",
    "removed",
    "changeit",
];

/// Keyword assignments and command-line flags.
pub(super) fn assignments(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    for (re, flag) in [(&*ASSIGNMENT, false), (&*FLAG, true)] {
        for caps in re.captures_iter(text) {
            let (Some(key), Some(value)) = (
                caps.name("key"),
                caps.name("dq")
                    .or_else(|| caps.name("sq"))
                    .or_else(|| caps.name("bare")),
            ) else {
                continue;
            };
            let quoted = caps.name("bare").is_none();
            let colon = !flag && caps.name("op").is_some_and(|m| m.as_str() == ":");
            let next = text[value.end()..].chars().next();
            if is_secret_value(key.as_str(), value.as_str(), quoted, colon, next) {
                out.push((Credential::SecretAssignment, value.range()));
            }
        }
    }
    out
}

fn is_secret_value(key: &str, value: &str, quoted: bool, colon: bool, next: Option<char>) -> bool {
    let password = PASSWORD_KEY.is_match(key);
    let min = if password { 4 } else { 6 };
    if value.chars().count() < min || is_placeholder(value) {
        return false;
    }
    if !quoted && is_code(value, next) {
        return false;
    }
    if colon && !quoted && !password && !value.bytes().any(|b| b.is_ascii_digit()) {
        return false;
    }
    true
}

/// A placeholder: a variable or template (`$X`, `${X}`, `%(x)s`, `{{ x }}`,
/// `<your-key>`), a mask (`****`, `xxxx`), a path, a stopword (`null`, `String`,
/// `redacted`), or one character repeated.
pub(super) fn is_placeholder(value: &str) -> bool {
    let lower = value.trim().to_ascii_lowercase();
    let Some(first) = lower.chars().next() else {
        return true;
    };
    matches!(
        first,
        '$' | '%' | '<' | '{' | '*' | '&' | '/' | '~' | '.' | '#'
    ) || lower.chars().all(|c| c == first)
        || lower.contains("xxxx")
        || lower.contains("****")
        || lower.contains("your")
        || lower.contains("{{")
        || STOPWORDS.contains(&lower.as_str())
}

/// Code, not a value: a call, an index or a generic (`get_token(`, `os.environ[`,
/// `Option<`), or a dotted name (`self.password`).
fn is_code(value: &str, next: Option<char>) -> bool {
    matches!(next, Some('(' | '[' | '<' | '{')) || DOTTED.is_match(value) || value.contains("::")
}

/// `Authorization: Bearer …` with a digit in it, and `Basic …` that decodes to
/// `user:password`. A JWT bearer token is named by the JWT rule instead.
pub(super) fn authorization(text: &str) -> Vec<(Credential, Range<usize>)> {
    let mut out = Vec::new();
    for caps in BEARER.captures_iter(text) {
        if let Some(m) = caps.get(1)
            && m.as_str().bytes().any(|b| b.is_ascii_digit())
        {
            out.push((Credential::HttpAuthorization, m.range()));
        }
    }
    for caps in BASIC.captures_iter(text) {
        if let Some(m) = caps.get(1)
            && base64::engine::general_purpose::STANDARD
                .decode(m.as_str())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .is_some_and(|pair| pair.contains(':'))
        {
            out.push((Credential::HttpAuthorization, m.range()));
        }
    }
    out
}
