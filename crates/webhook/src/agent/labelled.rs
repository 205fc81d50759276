//! `ed25519` signatures (RFC 9421 §3.3.6) as RFC 9421 defines them, without
//! Switchboard's contract: signing a signature base, and verifying one labelled
//! signature over whatever it covers. Agent requests, which must cover a given
//! list and carry `created`, `expires` and a `nonce`, go through
//! [`crate::agent::verify`], which uses the same code.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sfv::ListEntry;

use super::{self as agent, PublicKey, SigningKey};
use crate::rfc9421::{
    Member, Verifier, check_alg, dictionary_field, signature_bytes, verify_member,
};
use crate::{CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, VerifyError, verify_content_digest};

/// The `ed25519` signature of a signature base, base64 (standard, padded): what
/// goes between the colons of a `Signature` member. Ed25519 is deterministic, so
/// the same key and base always give the same signature.
pub fn sign_signature_base_ed25519(key: &SigningKey, base: &str) -> String {
    STANDARD.encode(key.sign_bytes(base.as_bytes()))
}

/// Verifies the signature labelled `label` with `key`, over the components it
/// covers, whatever they are.
///
/// Checks that the `Signature-Input` member is there and that `Signature` has a
/// byte sequence of the same label; that `alg`, if present, is `ed25519`; that
/// the covered components are ones this code computes (`@method`, `@authority`,
/// `@path`, `@query`, header fields; no component parameters), each listed once;
/// the signature over the rebuilt base; and a covered `Content-Digest` against
/// `request.body`. It reads no other parameter: `created`, `expires`, `keyid`
/// and `nonce` (freshness, key choice and replay) are the caller's to check.
pub fn verify_ed25519(
    key: &PublicKey,
    request: &agent::Request<'_>,
    label: &str,
) -> Result<(), VerifyError> {
    let inputs = dictionary_field(request.headers, SIGNATURE_INPUT)?;
    let signatures = dictionary_field(request.headers, SIGNATURE)?;
    let input = match inputs.get(label) {
        Some(ListEntry::InnerList(input)) => input,
        Some(ListEntry::Item(_)) => {
            return Err(VerifyError::InvalidHeader {
                header: SIGNATURE_INPUT.to_owned(),
                reason: format!("its `{label}` member is not an inner list of components"),
            });
        }
        None => {
            return Err(VerifyError::InvalidHeader {
                header: SIGNATURE_INPUT.to_owned(),
                reason: format!("it has no `{label}` member"),
            });
        }
    };
    let signature = signature_bytes(&signatures, label)?;
    check_alg(input, label, agent::ALGORITHM)?;
    let member = Member {
        label,
        input,
        signature,
    };
    let covered = verify_member(Verifier::Ed25519(&key.0), &request.message(), member, &[])?;
    match covered.value(CONTENT_DIGEST) {
        Some(digest) => verify_content_digest(digest, request.body),
        None => Ok(()),
    }
}
