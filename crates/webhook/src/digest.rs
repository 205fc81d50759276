//! RFC 9530 `Content-Digest`: `sha-256=:<base64 SHA-256 of the body>:`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sfv::{BareItem, Dictionary, ListEntry, Parser, Version};
use sha2::{Digest as _, Sha256, Sha512};

use crate::VerifyError;

/// The `Content-Digest` value the server sends: `sha-256=:<base64>:`.
pub fn content_digest(body: &[u8]) -> String {
    format!("sha-256=:{}:", STANDARD.encode(Sha256::digest(body)))
}

/// Checks a `Content-Digest` value against `body`.
///
/// The value is parsed as an RFC 8941 Dictionary. Every `sha-256` or `sha-512`
/// member must be a Byte Sequence equal to that digest of `body`, and at least one
/// of them must be present; members for other algorithms are ignored (RFC 9530
/// lets a recipient skip algorithms it does not support, and the deprecated ones
/// must not be relied on for integrity anyway).
pub fn verify_content_digest(value: &str, body: &[u8]) -> Result<(), VerifyError> {
    let dictionary: Dictionary = Parser::new(value)
        .with_version(Version::Rfc8941)
        .parse()
        .map_err(|error| VerifyError::InvalidHeader {
            header: crate::CONTENT_DIGEST.to_owned(),
            reason: format!("not a structured-field dictionary ({error})"),
        })?;
    let mut checked = false;
    for (algorithm, member) in &dictionary {
        let expected: Vec<u8> = match algorithm.as_str() {
            "sha-256" => Sha256::digest(body).to_vec(),
            "sha-512" => Sha512::digest(body).to_vec(),
            _ => continue,
        };
        let ListEntry::Item(item) = member else {
            return Err(invalid_member(algorithm.as_str()));
        };
        let BareItem::ByteSequence(actual) = &item.bare_item else {
            return Err(invalid_member(algorithm.as_str()));
        };
        if *actual != expected {
            return Err(VerifyError::ContentDigestMismatch {
                algorithm: algorithm.as_str().to_owned(),
            });
        }
        checked = true;
    }
    if checked {
        Ok(())
    } else {
        let present: Vec<&str> = dictionary.keys().map(|key| key.as_str()).collect();
        Err(VerifyError::UnsupportedDigest(present.join(", ")))
    }
}

fn invalid_member(algorithm: &str) -> VerifyError {
    VerifyError::InvalidHeader {
        header: crate::CONTENT_DIGEST.to_owned(),
        reason: format!("its `{algorithm}` member is not a byte sequence"),
    }
}
