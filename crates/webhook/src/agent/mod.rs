//! Agents' request signatures: RFC 9421 HTTP Message Signatures with Ed25519.
//!
//! An agent signs its critical calls (claim, ack, release, sends…) with its
//! [`SigningKey`]; the server verifies them with the [`PublicKey`] registered for
//! the signature's `keyid`. The signature is the `Signature-Input` /
//! `Signature` member labelled [`LABEL`] (`sig1`), with the parameters, in this
//! order, `created`, `expires` (`created` + [`MAX_VALIDITY_SECS`]), `nonce`,
//! `keyid` and `alg="ed25519"`. It covers:
//!
//! * `"@method" "@authority" "@path"`, always;
//! * `"@query"` when the request target has a `?` (RFC 9421 §2.2.7: `?` and the
//!   query as sent);
//! * `"content-digest"` when the body is not empty (RFC 9530, `sha-256`; [`sign`]
//!   adds the header unless the request has one);
//! * `"authorization"` when the request has that header: the signature then
//!   binds the bearer token to this one request.
//!
//! A receiver calls [`presented`] to read the `keyid` (and the `nonce`, to
//! refuse replays), looks the key up, then calls [`verify`] with its clock.
//! Everything RFC 9421 here (signature base, component values, structured
//! fields) is the code the webhook signatures use, in [`crate::rfc9421`].
//!
//! ```
//! use switchboard_webhook::agent::{self, Request, SigningKey};
//!
//! let key = SigningKey::generate();
//! let keyid = key.public_key().thumbprint();
//! let mut headers = http::HeaderMap::new();
//! headers.insert("authorization", "Bearer sb_at_example".parse()?);
//! let now = 1_700_000_000;
//! fn request(headers: &http::HeaderMap) -> Request<'_> {
//!     Request {
//!         method: "POST",
//!         authority: "switchboard.example.com",
//!         path_and_query: "/v1/agents/a/ack",
//!         headers,
//!         body: br#"{"lease":"l_1"}"#,
//!     }
//! }
//! let signed = agent::sign(&key, &keyid, &request(&headers), now, &agent::new_nonce());
//! for (name, value) in signed {
//!     headers.insert(name, value.parse()?);
//! }
//!
//! // The server:
//! let presented = agent::presented(&headers)?.expect("signed");
//! assert_eq!(presented.keyid, keyid);
//! agent::verify(&key.public_key(), &request(&headers), &presented, now + 2)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod key;
mod labelled;
mod sign;
mod verify;

use http::HeaderMap;

pub use key::{JWK_CRV, JWK_KTY, Jwk, KeyError, PublicKey, SigningKey};
pub use labelled::{sign_signature_base_ed25519, verify_ed25519};
pub use sign::{new_nonce, sign};
pub use verify::{Presented, presented, verify};

use crate::CONTENT_DIGEST;
use crate::rfc9421::{Message, Query, sf_string};

/// The `alg` parameter of an agent's signature.
pub const ALGORITHM: &str = "ed25519";
/// The label of an agent's signature in `Signature-Input` and `Signature`.
pub const LABEL: &str = "sig1";
/// The longest a signature may be valid: `expires - created` at most this.
pub const MAX_VALIDITY_SECS: i64 = 300;
/// How far the agent's clock may be from the server's, either way: `created`
/// may be this far in the future and `expires` this far in the past.
pub const CLOCK_SKEW_SECS: i64 = 30;
/// The longest `nonce` accepted, in characters: a receiver keeps each nonce it
/// has seen for as long as the signature could be replayed. [`new_nonce`] makes
/// 22.
pub const MAX_NONCE_LEN: usize = 128;

/// One request as signed and as received.
///
/// No `Debug`: the headers usually hold a bearer token.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    /// The method, as sent (methods are case-sensitive).
    pub method: &'a str,
    /// `host[:port]` as sent in `Host` (HTTP/1.1) or `:authority` (HTTP/2): the
    /// scheme's default port omitted, as the `url` crate and reqwest do. It is
    /// lowercased for `@authority`. Behind a proxy that rewrites `Host`, the
    /// receiver passes the public authority.
    pub authority: &'a str,
    /// The request target's path and query as sent, e.g. `/v1/agents/a/ack?x=1`
    /// (`http::Uri::path_and_query`): percent-encoding untouched.
    pub path_and_query: &'a str,
    /// All header fields. When signing, those the signature covers
    /// (`authorization`, an existing `content-digest`) must be the ones sent.
    pub headers: &'a HeaderMap,
    /// The exact body bytes.
    pub body: &'a [u8],
}

impl Request<'_> {
    /// The request for the shared RFC 9421 code: `@path` is what precedes the
    /// first `?`, `@query` is `?` and what follows it.
    pub(crate) fn message(&self) -> Message<'_> {
        let (path, query) = match self.path_and_query.split_once('?') {
            Some((path, query)) => (path, Query::Present(query)),
            None => (self.path_and_query, Query::Absent),
        };
        Message {
            method: self.method,
            authority: self.authority,
            path,
            query,
            headers: self.headers,
        }
    }

    /// What a signature of this request must cover, in the order [`sign`] lists
    /// them.
    pub(crate) fn required_components(&self) -> Vec<&'static str> {
        required_components(
            self.path_and_query.contains('?'),
            !self.body.is_empty(),
            self.headers.contains_key(http::header::AUTHORIZATION),
        )
    }
}

fn required_components(
    has_query: bool,
    has_body: bool,
    has_authorization: bool,
) -> Vec<&'static str> {
    let mut components = vec!["@method", "@authority", "@path"];
    if has_query {
        components.push("@query");
    }
    if has_body {
        components.push(CONTENT_DIGEST);
    }
    if has_authorization {
        components.push("authorization");
    }
    components
}

/// Why a signed request was refused. Messages say what to fix; they never
/// contain key material or signature bytes.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The signature is missing a part, malformed, does not cover what it must,
    /// or does not verify.
    #[error("{0}")]
    Invalid(String),
    /// The signature is not valid now: created in the future or expired (each
    /// beyond [`CLOCK_SKEW_SECS`]).
    #[error("{0}")]
    Expired(String),
    /// The signature verifies, but the `Content-Digest` it covers is not that of
    /// the body.
    #[error("{0}")]
    DigestMismatch(String),
}

impl Error {
    /// The stable machine code: `signature_invalid`, `signature_expired` or
    /// `digest_mismatch`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "signature_invalid",
            Self::Expired(_) => "signature_expired",
            Self::DigestMismatch(_) => "digest_mismatch",
        }
    }
}

/// The RFC 9421 §5.1 `Accept-Signature` value that asks for what [`verify`]
/// requires of a request with or without a query and a body (and with an
/// `Authorization` header, which agents' calls carry), e.g.
/// `sig1=("@method" "@authority" "@path" "content-digest" "authorization");created;expires;nonce;keyid;alg="ed25519"`.
///
/// `created` and `expires` are bare, as §5.1 defines them. So are `nonce` and
/// `keyid`, for which §5.1 defines a value to copy: here they only say that the
/// signature must carry them (a fresh nonce of the agent's choosing, and its own
/// key's id).
pub fn accept_signature(has_query: bool, has_body: bool) -> String {
    let components: Vec<String> = required_components(has_query, has_body, true)
        .into_iter()
        .map(sf_string)
        .collect();
    format!(
        "{LABEL}=({});created;expires;nonce;keyid;alg={}",
        components.join(" "),
        sf_string(ALGORITHM)
    )
}
