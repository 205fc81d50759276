//! HTTP request signatures shared by the server and the SDK: the server's
//! webhook deliveries (the server signs, the SDK's receiver helper verifies) and,
//! the other way round, agents' requests (the SDK signs, the server verifies;
//! see [`agent`]). Both are RFC 9421 HTTP Message Signatures made by the one
//! implementation in [`rfc9421`].
//!
//! # Webhooks
//!
//! Every delivery, and the registration challenge, carries two signatures made
//! with the callback's [`Secret`]:
//!
//! * **Standard Webhooks v1**: `webhook-id`, `webhook-timestamp` and
//!   `webhook-signature: v1,<base64 HMAC-SHA256("{id}.{timestamp}.{body}")>`.
//! * **RFC 9421 HTTP Message Signatures**, `alg="hmac-sha256"`, label `sig1`,
//!   `keyid` = the callback id, covering `"@method" "@authority" "@path"
//!   "content-digest" "webhook-id" "webhook-timestamp"` with `created` and
//!   `expires`, plus an RFC 9530 `Content-Digest: sha-256=:<base64>:`.
//!
//! The server calls [`sign`]; a receiver calls [`verify`] (both schemes) or
//! [`verify_standard`] / [`verify_rfc9421`] alone, passing the current time so
//! that tests need no clock. [`challenge_response`] answers the challenge.
//!
//! # Agent requests
//!
//! An agent signs its critical calls with its Ed25519 [`agent::SigningKey`]
//! (`alg="ed25519"`, label `sig1`, `keyid` = its registered key's id, covering
//! the method, authority, path, query, `Content-Digest` and `Authorization`,
//! with `created`, `expires` and a `nonce`): [`agent::sign`], then on the server
//! [`agent::presented`] and [`agent::verify`].
//!
//! ```
//! use switchboard_webhook::{Outgoing, Secret, sign, verify};
//!
//! let secret = Secret::generate();
//! let body = br#"{"type":"message.created"}"#;
//! let request = Outgoing {
//!     method: "POST",
//!     authority: "hooks.example.com",
//!     path: "/switchboard",
//!     webhook_id: "msg_01",
//!     timestamp: 1_700_000_000,
//!     keyid: "cb_42",
//!     body,
//! };
//! let mut headers = http::HeaderMap::new();
//! for (name, value) in sign(&secret, &request) {
//!     headers.insert(name, value.parse()?);
//! }
//! let verified = verify(
//!     &secret, "cb_42", "POST", "hooks.example.com", "/switchboard", &headers, body,
//!     1_700_000_010,
//! )?;
//! assert_eq!(verified.webhook_id, "msg_01");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod agent;
mod challenge;
mod digest;
pub mod rfc9421;
mod secret;
mod standard;

use http::HeaderMap;

pub use challenge::{CHALLENGE_TYPE, challenge_response, verify_challenge_response};
pub use digest::{content_digest, verify_content_digest};
pub use rfc9421::verify_rfc9421;
pub use secret::{
    GENERATED_SECRET_LEN, MAX_SECRET_LEN, MIN_SECRET_LEN, SECRET_PREFIX, Secret, SecretError,
};
pub use standard::{standard_signature, verify_standard};

/// `webhook-id` (Standard Webhooks).
pub const WEBHOOK_ID: &str = "webhook-id";
/// `webhook-timestamp` (Standard Webhooks): integer Unix seconds.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// `webhook-signature` (Standard Webhooks).
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
/// `content-digest` (RFC 9530).
pub const CONTENT_DIGEST: &str = "content-digest";
/// `signature-input` (RFC 9421).
pub const SIGNATURE_INPUT: &str = "signature-input";
/// `signature` (RFC 9421).
pub const SIGNATURE: &str = "signature";
/// How far `webhook-timestamp` may be from the receiver's clock either way, and
/// how far in the future an RFC 9421 `created` may be.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 300;

/// What the server signs: one outgoing webhook request.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// The method, `"POST"`.
    pub method: &'a str,
    /// `host[:port]` as in the URL, lowercase, without the scheme's default port
    /// (what the `url` crate prints, and what reqwest sends in `Host`).
    pub authority: &'a str,
    /// The URL's path only (RFC 9421 `@path`: no query; empty means `/`).
    pub path: &'a str,
    /// `webhook-id`: the message id, the same on every retry.
    pub webhook_id: &'a str,
    /// Unix seconds: `webhook-timestamp` and the RFC 9421 `created`.
    pub timestamp: i64,
    /// The RFC 9421 `keyid`: the callback id.
    pub keyid: &'a str,
    /// The exact body bytes that will be sent.
    pub body: &'a [u8],
}

/// What a successful verification vouches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `webhook-id`: deduplicate deliveries on it.
    pub webhook_id: String,
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp: i64,
}

/// Why a request was refused. Messages name headers and parameters, never the
/// secret or a MAC.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// A required header (or a header a signature covers) is absent.
    #[error("missing `{0}` header")]
    MissingHeader(String),
    /// A header is present but unusable.
    #[error("invalid `{header}` header: {reason}")]
    InvalidHeader {
        /// The header's name.
        header: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `webhook-timestamp` is not a non-negative integer.
    #[error("webhook-timestamp {0:?} is not an integer number of Unix seconds")]
    InvalidTimestamp(String),
    /// `webhook-timestamp` is more than 300 s in the past.
    #[error("webhook-timestamp {timestamp} is more than 300 s before now ({now})")]
    TimestampTooOld {
        /// The header's value.
        timestamp: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// `webhook-timestamp` is more than 300 s in the future.
    #[error("webhook-timestamp {timestamp} is more than 300 s after now ({now})")]
    TimestampTooNew {
        /// The header's value.
        timestamp: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// No `v1,` entry of `webhook-signature` is the right MAC.
    #[error("no `v1,` entry of webhook-signature matches (Standard Webhooks)")]
    StandardSignatureMismatch,
    /// `Signature-Input` has no signature with the expected `keyid`.
    #[error("no RFC 9421 signature has keyid {expected:?} (keyids present: {found:?})")]
    KeyidMismatch {
        /// The callback id the receiver expects.
        expected: String,
        /// The `keyid`s that are there.
        found: Vec<String>,
    },
    /// `Signature-Input` names a signature that `Signature` lacks.
    #[error("Signature has no `{0}` member to go with Signature-Input's")]
    MissingSignatureLabel(String),
    /// The signature's `alg` is not `hmac-sha256`.
    #[error("signature `{label}` uses alg {alg}; only \"hmac-sha256\" is accepted")]
    UnsupportedAlgorithm {
        /// The signature's label.
        label: String,
        /// The `alg` parameter as received.
        alg: String,
    },
    /// A required signature parameter (`created`, `expires`) is absent.
    #[error("signature `{label}` has no `{param}` parameter")]
    MissingParameter {
        /// The signature's label.
        label: String,
        /// The parameter.
        param: &'static str,
    },
    /// A signature parameter has the wrong type.
    #[error("signature `{label}`: `{param}` must be {expected}")]
    InvalidParameter {
        /// The signature's label.
        label: String,
        /// The parameter.
        param: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// `created` is more than 300 s after the receiver's clock.
    #[error("signature `{label}` was created at {created}, more than 300 s after now ({now})")]
    CreatedInFuture {
        /// The signature's label.
        label: String,
        /// The `created` parameter.
        created: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// `expires` is before the receiver's clock.
    #[error("signature `{label}` expired at {expires}, before now ({now})")]
    Expired {
        /// The signature's label.
        label: String,
        /// The `expires` parameter.
        expires: i64,
        /// The receiver's clock.
        now: i64,
    },
    /// The signature does not cover one of the components Switchboard requires.
    #[error("signature `{label}` does not cover `{component}`")]
    MissingCoveredComponent {
        /// The signature's label.
        label: String,
        /// The uncovered component.
        component: &'static str,
    },
    /// The signature covers a component this verifier cannot compute.
    #[error("covered component {0} is not supported")]
    UnsupportedComponent(String),
    /// The signature lists a component twice.
    #[error("covered component {0} is listed twice")]
    DuplicateComponent(String),
    /// A derived component's value (method, authority, path) is empty or has
    /// control characters.
    #[error("the request's `{0}` is empty or contains control characters")]
    InvalidComponentValue(String),
    /// The RFC 9421 MAC does not match the rebuilt signature base.
    #[error("RFC 9421 signature `{0}` does not match the request")]
    SignatureMismatch(String),
    /// `Content-Digest` has neither a `sha-256` nor a `sha-512` member.
    #[error("Content-Digest has no sha-256 or sha-512 digest (algorithms present: {0})")]
    UnsupportedDigest(String),
    /// A `Content-Digest` digest is not that of the body.
    #[error("Content-Digest {algorithm} does not match the body")]
    ContentDigestMismatch {
        /// The digest's algorithm.
        algorithm: String,
    },
}

/// Why [`try_sign`] refused its input.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignError {
    /// A field of [`Outgoing`] cannot be sent or signed as given.
    #[error("cannot sign the webhook request: `{field}` {problem}")]
    InvalidInput {
        /// The field of [`Outgoing`].
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// The headers to add to an outgoing request, as lowercase `(name, value)` pairs:
/// `webhook-id`, `webhook-timestamp`, `webhook-signature`, `content-digest`,
/// `signature-input`, `signature`. `expires` is `timestamp + 300`.
///
/// This does not check its input; [`try_sign`] does. Ids the server generates
/// (printable ASCII, no spaces) are always fine. With other input the headers are
/// still produced, but a receiver will refuse them (or `http` will refuse the
/// header values).
pub fn sign(secret: &Secret, request: &Outgoing<'_>) -> Vec<(&'static str, String)> {
    sign_with_expiry(
        secret,
        request,
        request
            .timestamp
            .saturating_add(rfc9421::DEFAULT_VALIDITY_SECS),
    )
}

/// [`sign`] with an explicit RFC 9421 `expires` (Unix seconds).
pub fn sign_with_expiry(
    secret: &Secret,
    request: &Outgoing<'_>,
    expires: i64,
) -> Vec<(&'static str, String)> {
    let digest = content_digest(request.body);
    let (signature_input, signature) = rfc9421::sign_rfc9421(secret, request, &digest, expires);
    vec![
        (WEBHOOK_ID, request.webhook_id.to_owned()),
        (WEBHOOK_TIMESTAMP, request.timestamp.to_string()),
        (
            WEBHOOK_SIGNATURE,
            standard_signature(secret, request.webhook_id, request.timestamp, request.body),
        ),
        (CONTENT_DIGEST, digest),
        (SIGNATURE_INPUT, signature_input),
        (SIGNATURE, signature),
    ]
}

/// [`sign`], after checking that every field can be sent and verified: `method`
/// is a token, `authority`, `path` and `webhook_id` are visible ASCII (the path
/// empty or starting with `/`), `keyid` is printable ASCII and `timestamp` is
/// not negative.
pub fn try_sign(
    secret: &Secret,
    request: &Outgoing<'_>,
) -> Result<Vec<(&'static str, String)>, SignError> {
    fn check(ok: bool, field: &'static str, problem: &'static str) -> Result<(), SignError> {
        if ok {
            Ok(())
        } else {
            Err(SignError::InvalidInput { field, problem })
        }
    }
    let visible = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
    let method_ok = !request.method.is_empty()
        && request
            .method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    check(method_ok, "method", "must be an HTTP token such as POST")?;
    check(
        !request.authority.is_empty() && visible(request.authority),
        "authority",
        "must be non-empty visible ASCII (host[:port])",
    )?;
    check(
        (request.path.is_empty() || request.path.starts_with('/')) && visible(request.path),
        "path",
        "must be visible ASCII starting with `/`",
    )?;
    check(
        !request.webhook_id.is_empty() && visible(request.webhook_id),
        "webhook_id",
        "must be non-empty visible ASCII without spaces",
    )?;
    check(
        request.keyid.bytes().all(|b| (0x20..=0x7e).contains(&b)),
        "keyid",
        "must be printable ASCII (an RFC 8941 string)",
    )?;
    check(request.timestamp >= 0, "timestamp", "must not be negative")?;
    Ok(sign(secret, request))
}

/// Verifies both schemes; both must pass.
///
/// `method`, `authority` (`host[:port]` from `Host` or `:authority`) and `path`
/// describe the request as received, `body` is its exact bytes and `now` the
/// receiver's clock in Unix seconds. See [`verify_standard`] and
/// [`verify_rfc9421`] for what each checks. Behind a proxy that rewrites `Host`,
/// pass the public authority the server was given.
#[expect(
    clippy::too_many_arguments,
    reason = "the signature is the contract the server and the SDK are written against"
)]
pub fn verify(
    secret: &Secret,
    expected_keyid: &str,
    method: &str,
    authority: &str,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let standard = verify_standard(secret, headers, body, now)?;
    verify_rfc9421(
        secret,
        expected_keyid,
        method,
        authority,
        path,
        headers,
        body,
        now,
    )?;
    Ok(standard)
}

/// [`verify`] for a request received through `http` (axum, hyper): takes the
/// method and path from `parts`, and the authority from the URI (HTTP/2) or the
/// `Host` header (HTTP/1.1).
pub fn verify_parts(
    secret: &Secret,
    expected_keyid: &str,
    parts: &http::request::Parts,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let authority = match parts.uri.authority() {
        Some(authority) => authority.as_str(),
        None => standard::single_header(&parts.headers, http::header::HOST.as_str())?,
    };
    verify(
        secret,
        expected_keyid,
        parts.method.as_str(),
        authority,
        parts.uri.path(),
        &parts.headers,
        body,
        now,
    )
}
