//! The receiver side: reading the signature a request presents, and verifying it
//! under the agent contract.

use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use sfv::{BareItem, Dictionary, InnerList, ListEntry};

use super::{
    ALGORITHM, CLOCK_SKEW_SECS, Error, LABEL, MAX_NONCE_LEN, MAX_VALIDITY_SECS, PublicKey, Request,
};
use crate::rfc9421::{
    Member, Verifier, dictionary_field, integer_param, signature_bytes, string_param, verify_member,
};
use crate::{CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, VerifyError, verify_content_digest};

/// The agent's signature on a request, as presented (not yet verified).
///
/// Equality and `Debug` are about the public fields; it also keeps the two header
/// fields as parsed, so that [`verify`] on the same request does not parse them
/// again.
#[derive(Clone)]
#[non_exhaustive]
pub struct Presented {
    /// Its label in `Signature-Input` and `Signature`, normally `sig1`.
    pub label: String,
    /// `keyid`: which registered key to verify it with.
    pub keyid: String,
    /// `nonce`: a receiver refuses one it has seen within the validity window.
    pub nonce: String,
    /// `created`, Unix seconds.
    pub created: i64,
    /// `expires`, Unix seconds.
    pub expires: i64,
    parsed: Arc<Parsed>,
}

/// `Signature-Input` and `Signature` as received and as parsed.
struct Parsed {
    input_values: Vec<HeaderValue>,
    signature_values: Vec<HeaderValue>,
    inputs: Dictionary,
    signatures: Dictionary,
}

impl Parsed {
    fn of(headers: &HeaderMap) -> Result<Self, Error> {
        Ok(Self {
            input_values: headers.get_all(SIGNATURE_INPUT).iter().cloned().collect(),
            signature_values: headers.get_all(SIGNATURE).iter().cloned().collect(),
            inputs: dictionary_field(headers, SIGNATURE_INPUT).map_err(invalid)?,
            signatures: dictionary_field(headers, SIGNATURE).map_err(invalid)?,
        })
    }

    /// Whether `headers` carry the very fields this was parsed from.
    fn is_of(&self, headers: &HeaderMap) -> bool {
        headers
            .get_all(SIGNATURE_INPUT)
            .iter()
            .eq(self.input_values.iter())
            && headers
                .get_all(SIGNATURE)
                .iter()
                .eq(self.signature_values.iter())
    }
}

impl PartialEq for Presented {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.label,
            &self.keyid,
            &self.nonce,
            self.created,
            self.expires,
        ) == (
            &other.label,
            &other.keyid,
            &other.nonce,
            other.created,
            other.expires,
        )
    }
}

impl Eq for Presented {}

impl fmt::Debug for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Presented")
            .field("label", &self.label)
            .field("keyid", &self.keyid)
            .field("nonce", &self.nonce)
            .field("created", &self.created)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

/// The agent's signature on a request, to look its key up before [`verify`].
///
/// `Ok(None)` when the request has neither `signature-input` nor `signature`.
/// Otherwise picks the member labelled `sig1`, else the one member whose `alg`
/// is `ed25519`, and refuses (as [`Error::Invalid`]) a `signature` without
/// `signature-input` or the reverse, a member without `keyid`, `nonce`,
/// `created`, `expires` or `alg`, an `alg` other than `ed25519`, an empty
/// `keyid` or `nonce`, and a nonce longer than [`MAX_NONCE_LEN`].
pub fn presented(headers: &HeaderMap) -> Result<Option<Presented>, Error> {
    match (
        headers.contains_key(SIGNATURE_INPUT),
        headers.contains_key(SIGNATURE),
    ) {
        (false, false) => return Ok(None),
        (false, true) => {
            return Err(Error::Invalid(
                "the request has a signature header but no signature-input: \
                 send both (RFC 9421 §4)"
                    .to_owned(),
            ));
        }
        _ => {}
    }
    let parsed = Arc::new(Parsed::of(headers)?);
    let (selected, _) = select(&parsed.inputs, &parsed.signatures)?;
    Ok(Some(selected.presented(parsed.clone())))
}

/// What [`select`] read of the member it picked.
#[derive(PartialEq, Eq)]
struct Selected<'a> {
    label: &'a str,
    keyid: &'a str,
    nonce: &'a str,
    created: i64,
    expires: i64,
}

impl Selected<'_> {
    fn presented(&self, parsed: Arc<Parsed>) -> Presented {
        Presented {
            label: self.label.to_owned(),
            keyid: self.keyid.to_owned(),
            nonce: self.nonce.to_owned(),
            created: self.created,
            expires: self.expires,
            parsed,
        }
    }

    fn is(&self, presented: &Presented) -> bool {
        *self
            == Selected {
                label: &presented.label,
                keyid: &presented.keyid,
                nonce: &presented.nonce,
                created: presented.created,
                expires: presented.expires,
            }
    }
}

/// The member [`presented`] describes, and what it says.
fn select<'a>(
    inputs: &'a Dictionary,
    signatures: &Dictionary,
) -> Result<(Selected<'a>, &'a InnerList), Error> {
    let label = if inputs.contains_key(LABEL) {
        LABEL
    } else {
        let ed25519: Vec<&str> = inputs
            .iter()
            .filter(|(_, entry)| {
                matches!(entry, ListEntry::InnerList(input)
                    if input.params.get("alg").and_then(BareItem::as_string)
                        .is_some_and(|alg| alg.as_str() == ALGORITHM))
            })
            .map(|(label, _)| label.as_str())
            .collect();
        match ed25519.as_slice() {
            [label] => *label,
            [] => {
                return Err(Error::Invalid(format!(
                    "no signature is labelled \"{LABEL}\" or has alg=\"{ALGORITHM}\": \
                     sign the request with the agent's Ed25519 key and label it {LABEL}"
                )));
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "several signatures have alg=\"{ALGORITHM}\" and none is labelled \
                     \"{LABEL}\": label the agent's signature {LABEL}"
                )));
            }
        }
    };
    let Some(ListEntry::InnerList(input)) = inputs.get(label) else {
        return Err(Error::Invalid(format!(
            "signature-input's `{label}` member must be an inner list of components, \
             e.g. (\"@method\" \"@authority\" \"@path\")"
        )));
    };

    let alg = string_param(input, label, "alg").map_err(invalid)?;
    if alg != ALGORITHM {
        return Err(Error::Invalid(format!(
            "signature `{label}` has alg {alg:?}; agents sign with alg=\"{ALGORITHM}\""
        )));
    }
    let keyid = string_param(input, label, "keyid").map_err(invalid)?;
    let nonce = string_param(input, label, "nonce").map_err(invalid)?;
    let created = integer_param(input, label, "created").map_err(invalid)?;
    let expires = integer_param(input, label, "expires").map_err(invalid)?;
    if keyid.is_empty() {
        return Err(Error::Invalid(format!(
            "signature `{label}` has an empty keyid: give the id of the agent's registered key"
        )));
    }
    if nonce.is_empty() || nonce.len() > MAX_NONCE_LEN {
        return Err(Error::Invalid(format!(
            "signature `{label}` has a nonce of {} characters: use a fresh random one of \
             1 to {MAX_NONCE_LEN} (16 random bytes in base64url are 22)",
            nonce.len()
        )));
    }
    signature_bytes(signatures, label).map_err(invalid)?;
    let selected = Selected {
        label,
        keyid,
        nonce,
        created,
        expires,
    };
    Ok((selected, input))
}

/// Verifies `presented` (from [`presented`] on this request's headers) with the
/// key registered for its `keyid`, at `now` (Unix seconds).
///
/// In this order: the time window (`created` more than [`CLOCK_SKEW_SECS`] after
/// `now`, or `expires` more than that before it, is [`Error::Expired`];
/// `expires` not after `created`, or more than [`MAX_VALIDITY_SECS`] after it, is
/// [`Error::Invalid`]); the covered components (those [`super::sign`] covers for
/// this request at least, each once, no component parameters); the Ed25519
/// signature over the rebuilt signature base ([`Error::Invalid`]); then the
/// covered `Content-Digest` against the body ([`Error::DigestMismatch`]; a
/// `sha-256` or `sha-512` member is required, and every one given must match).
///
/// Replays are the caller's: refuse a `nonce` already seen for this key until
/// `expires` + [`CLOCK_SKEW_SECS`].
pub fn verify(
    key: &PublicKey,
    request: &Request<'_>,
    presented: &Presented,
    now: i64,
) -> Result<(), Error> {
    // The fields presented() parsed, when they are this request's; else parsed
    // again, and the signature they select must be the one presented.
    let parsed_here;
    let parsed = if presented.parsed.is_of(request.headers) {
        &presented.parsed
    } else {
        parsed_here = Parsed::of(request.headers)?;
        &parsed_here
    };
    let (found, input) = select(&parsed.inputs, &parsed.signatures)?;
    if !found.is(presented) {
        return Err(Error::Invalid(
            "the presented signature is not this request's: call presented() on the \
             headers of the request being verified"
                .to_owned(),
        ));
    }
    check_window(presented, now)?;

    let label = presented.label.as_str();
    let member = Member {
        label,
        input,
        signature: signature_bytes(&parsed.signatures, label).map_err(invalid)?,
    };
    let required = request.required_components();
    let covered = verify_member(
        Verifier::Ed25519(&key.0),
        &request.message(),
        member,
        &required,
    )
    .map_err(invalid)?;

    // Authenticated from here on.
    if let Some(digest) = covered.value(CONTENT_DIGEST) {
        verify_content_digest(digest, request.body).map_err(|error| {
            Error::DigestMismatch(format!(
                "{error}: content-digest must be the sha-256 of the exact body bytes sent \
                 (RFC 9530), as sha-256=:<base64>:"
            ))
        })?;
    }
    Ok(())
}

/// `created` and `expires` against the receiver's clock and each other.
fn check_window(presented: &Presented, now: i64) -> Result<(), Error> {
    let Presented {
        created, expires, ..
    } = *presented;
    let ahead = created.saturating_sub(now);
    if ahead > CLOCK_SKEW_SECS {
        return Err(Error::Expired(format!(
            "created is in the future: {created} is {ahead} s after the server's clock \
             ({now}), more than the {CLOCK_SKEW_SECS} s of skew tolerated; check the \
             agent's clock"
        )));
    }
    let late = now.saturating_sub(expires);
    if late > CLOCK_SKEW_SECS {
        return Err(Error::Expired(format!(
            "the signature expired at {expires}, {late} s before the server's clock ({now}); \
             sign each request just before sending it"
        )));
    }
    let validity = expires.saturating_sub(created);
    if validity <= 0 || validity > MAX_VALIDITY_SECS {
        return Err(Error::Invalid(format!(
            "expires - created is {validity} s: it must be between 1 and \
             {MAX_VALIDITY_SECS} s (expires = created + {MAX_VALIDITY_SECS})"
        )));
    }
    Ok(())
}

/// A refusal from the shared RFC 9421 code, with what to do about it.
fn invalid(error: VerifyError) -> Error {
    let message = match &error {
        VerifyError::MissingCoveredComponent { component, .. } => {
            let when = match *component {
                "@query" => " when the request has a query",
                CONTENT_DIGEST => " when the request has a body",
                "authorization" => " when the request has an Authorization header",
                _ => "",
            };
            format!("the signature must cover \"{component}\"{when}")
        }
        VerifyError::SignatureMismatch(label) => format!(
            "the Ed25519 signature `{label}` does not verify with the key registered for its \
             keyid: sign the request exactly as sent (method, authority, path, query and the \
             covered headers) with that key"
        ),
        VerifyError::MissingHeader(name) if name == SIGNATURE => {
            "the request has a signature-input header but no signature: send both (RFC 9421 §4)"
                .to_owned()
        }
        VerifyError::MissingHeader(name) => {
            format!("the signature covers `{name}` but the request has no such header")
        }
        VerifyError::MissingParameter { .. } | VerifyError::InvalidParameter { .. } => format!(
            "{error}: an agent's signature has created and expires (integers), nonce, keyid \
             and alg=\"{ALGORITHM}\" (strings)"
        ),
        VerifyError::UnsupportedComponent(_) => format!(
            "{error}: cover only \"@method\", \"@authority\", \"@path\", \"@query\" and \
             header fields, without component parameters"
        ),
        VerifyError::DuplicateComponent(_) => format!("{error}: list each component once"),
        VerifyError::MissingSignatureLabel(_) => format!(
            "{error}: signature must have a member with the same label as signature-input's"
        ),
        _ => error.to_string(),
    };
    Error::Invalid(message)
}
