//! [`Error`]: everything a call can fail with, and how error bodies are read.
//!
//! Every non-2xx answer becomes [`Error::Api`] carrying an RFC 9457 [`Problem`].
//! Switchboard always sends `application/problem+json` with a stable `code`; act on
//! [`Error::code`], never on the human `title`/`detail`. Answers that did not come
//! from Switchboard (a proxy's HTML 502, a foreign problem document) still become
//! `Error::Api`: the problem is read leniently as RFC 9457 §3.1 asks (members of the
//! wrong type are ignored, relative `type`/`instance` are resolved against the
//! request URL), or synthesized from the status and the body text. Their
//! [`Error::code`] is `None`; [`Error::status`] is always set.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde_json::{Map, Value};
use switchboard_proto::{ErrorCode, Problem};
use time::OffsetDateTime;

/// How much of a non-problem error body is kept as the synthesized `detail`.
const MAX_DETAIL_CHARS: usize = 1024;

/// An error from the Switchboard client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server (or something in front of it) answered with a non-2xx status.
    #[error("{}", api_message(*.status, problem))]
    Api {
        /// The HTTP status of the response.
        status: u16,
        /// The problem document (boxed: it is large and errors travel in `Result`s).
        problem: Box<Problem>,
        /// The `Retry-After` header (delay-seconds or HTTP-date), when present.
        retry_after: Option<Duration>,
    },
    /// The server speaks another major version of the API than this client
    /// ([`Client::check_server`](crate::Client::check_server)).
    #[error(
        "the server speaks API {server}, this client API v{client}: use a switchboard \
         client (SDK, CLI) that speaks {server}, or a server that speaks v{client}"
    )]
    Incompatible {
        /// What the server's capabilities say (`v2`).
        server: String,
        /// The major version this client speaks.
        client: u32,
    },
    /// The request did not complete: connect failure, timeout, TLS, reset stream.
    /// Its message carries the whole cause (reqwest's own stops at "error sending
    /// request", which hides an untrusted certificate or a refused connection).
    #[error("transport error: {}", with_causes(.0))]
    Transport(reqwest::Error),
    /// No response head came within the request timeout. Streams (SSE) get no
    /// overall timeout, since they stay open, but their head is bounded by it: a
    /// half-open connection would otherwise hold `subscribe` forever.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// A 2xx body (or an SSE event) was not what the API promises.
    #[error("could not decode the response: {0}")]
    Decode(String),
    /// A login (device login, or renewing an access token from a refresh token)
    /// failed or ended: the message says why and what to do. Never carries a token.
    #[error("login: {0}")]
    Login(String),
    /// The base URL cannot be used (not http(s), has a query, cannot be a base).
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// An argument cannot be put on the wire: an empty or dot path segment, or a
    /// token or idempotency key with characters a header cannot carry. The message
    /// never contains the secret.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

fn api_message(status: u16, problem: &Problem) -> String {
    let what = problem.code.as_deref().unwrap_or(&problem.title);
    match &problem.detail {
        Some(detail) => format!("HTTP {status} {what}: {detail}"),
        None => format!("HTTP {status} {what}"),
    }
}

impl Error {
    /// What kind of failure this is, as a stable word for logs and metrics:
    /// `api`, `incompatible`, `transport`, `timeout`, `decode`, `login`,
    /// `invalid_url` or `invalid_input`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api { .. } => "api",
            Self::Incompatible { .. } => "incompatible",
            Self::Transport(_) => "transport",
            Self::Timeout(_) => "timeout",
            Self::Decode(_) => "decode",
            Self::Login(_) => "login",
            Self::InvalidUrl(_) => "invalid_url",
            Self::InvalidInput(_) => "invalid_input",
        }
    }

    /// The stable Switchboard error code, when the server sent one we know.
    ///
    /// `None` for transport and decode errors and for answers that did not come
    /// from Switchboard (check [`Error::status`] for those).
    pub fn code(&self) -> Option<ErrorCode> {
        self.problem()?.error_code()
    }

    /// The HTTP status, when there was a response.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } => Some(*status),
            Self::Transport(e) => e.status().map(|s| s.as_u16()),
            _ => None,
        }
    }

    /// The problem document of an [`Error::Api`].
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::Api { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// How long the server asked to wait before retrying (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// On `410 cursor_gone`: the oldest cursor the server still answers (the
    /// problem's `oldest_cursor` extension). Resync with `snapshot`, then poll from
    /// its `resume_cursor`.
    pub fn oldest_cursor(&self) -> Option<u64> {
        self.problem()?.extensions.get("oldest_cursor")?.as_u64()
    }

    /// Builds an [`Error::Api`] from a non-2xx response's parts.
    pub(crate) fn from_response(
        status: StatusCode,
        headers: &HeaderMap,
        url: &Url,
        body: &[u8],
    ) -> Self {
        let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let retry_after = headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, OffsetDateTime::now_utc()));
        Self::Api {
            status: status.as_u16(),
            problem: Box::new(decode_problem(status, content_type, Some(url), body)),
            retry_after,
        }
    }
}

/// `Retry-After` (seconds or an HTTP-date), as the server's webhook worker reads it
/// too.
pub(crate) use switchboard_proto::parse_retry_after;

/// Reads an error body as a problem document, or makes one from the status and text.
///
/// A JSON object is read when the media type is JSON (`application/problem+json`,
/// `application/json`, any `+json`). Anything else (HTML, plain text, XML problem
/// documents) is kept as text in `detail`, cut to [`MAX_DETAIL_CHARS`].
pub(crate) fn decode_problem(
    status: StatusCode,
    content_type: Option<&str>,
    base: Option<&Url>,
    body: &[u8],
) -> Problem {
    if content_type.is_some_and(is_json_media_type)
        && let Ok(Value::Object(members)) = serde_json::from_slice(body)
    {
        return problem_from_members(status, members, base);
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    let detail = match text.char_indices().nth(MAX_DETAIL_CHARS) {
        Some((cut, _)) => Some(format!("{}…", &text[..cut])),
        None if text.is_empty() => None,
        None => Some(text.to_owned()),
    };
    Problem {
        type_: ABOUT_BLANK.to_owned(),
        title: reason(status),
        status: status.as_u16(),
        detail,
        instance: None,
        code: None,
        extensions: Map::new(),
    }
}

const ABOUT_BLANK: &str = "about:blank";

fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence
            .get(essence.len().saturating_sub(5)..)
            .is_some_and(|suffix| suffix.eq_ignore_ascii_case("+json"))
}

fn reason(status: StatusCode) -> String {
    status
        .canonical_reason()
        .map_or_else(|| format!("HTTP {}", status.as_u16()), str::to_owned)
}

/// RFC 9457 §3.1: a member whose value has the wrong type is ignored, as if absent.
/// Unknown members are kept as extensions (the caller ignores what it does not know).
fn problem_from_members(
    status: StatusCode,
    members: Map<String, Value>,
    base: Option<&Url>,
) -> Problem {
    let mut problem = Problem {
        type_: ABOUT_BLANK.to_owned(),
        title: String::new(),
        status: status.as_u16(),
        detail: None,
        instance: None,
        code: None,
        extensions: Map::new(),
    };
    let mut title = None;
    for (name, value) in members {
        match (name.as_str(), value) {
            ("type", Value::String(s)) => problem.type_ = resolve(base, s),
            ("title", Value::String(s)) => title = Some(s),
            ("status", Value::Number(n)) => {
                if let Some(s) = n.as_u64().and_then(|n| u16::try_from(n).ok())
                    && (100..=599).contains(&s)
                {
                    problem.status = s;
                }
            }
            ("detail", Value::String(s)) => problem.detail = Some(s),
            ("instance", Value::String(s)) => problem.instance = Some(resolve(base, s)),
            ("code", Value::String(s)) => problem.code = Some(s),
            ("type" | "title" | "status" | "detail" | "instance" | "code", _) => {}
            (_, value) => {
                problem.extensions.insert(name, value);
            }
        }
    }
    problem.title = title
        .or_else(|| problem.error_code().map(|c| c.title().to_owned()))
        .unwrap_or_else(|| reason(status));
    problem
}

/// Resolves a relative URI reference against the request URL (RFC 9457 §3.1.1).
fn resolve(base: Option<&Url>, reference: String) -> String {
    if Url::parse(&reference).is_ok() {
        return reference;
    }
    match base.map(|base| base.join(&reference)) {
        Some(Ok(resolved)) => resolved.to_string(),
        _ => reference,
    }
}

#[cfg(test)]
mod tests;

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        Self::Transport(e)
    }
}

/// `e` and each of its sources on one line, joined by `: `, repeats left out
/// ("transport error: …: operation timed out"): what a log or `last_error` needs.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}
