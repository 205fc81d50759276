//! Verifying one received signature, whatever its algorithm: the parts every
//! verifier here shares. The caller picks the `Signature-Input` member, checks
//! the parameters its contract requires (and the time window), and then calls
//! [`verify_member`] with its key and the components it requires.

use sfv::{BareItem, Dictionary, FieldType as _, InnerList, ListEntry};

use super::base::{Message, sf_string, signature_base};
use crate::{SIGNATURE, SIGNATURE_INPUT, Secret, VerifyError};

/// The key a signature is checked with; its variant is the algorithm.
#[derive(Clone, Copy)]
pub(crate) enum Verifier<'a> {
    /// `hmac-sha256` with a webhook secret.
    HmacSha256(&'a Secret),
    /// `ed25519` with an agent's public key. Verification is RFC 8032's
    /// (cofactorless): a non-canonical signature (`S` not reduced, the malleable
    /// form) is refused. A small-order public key cannot get here: `PublicKey`
    /// refuses one when it is registered. dalek's `verify_strict` would also
    /// refuse a small-order `R`, which no honest signer makes and which helps no
    /// forger against a sound key, for ~15% more time per request (bench AUTH,
    /// issue 39); replays are refused by nonce, not by signature bytes.
    Ed25519(&'a ed25519_dalek::VerifyingKey),
}

impl Verifier<'_> {
    /// Whether `signature` is this key's signature of `base`.
    fn verify(&self, base: &[u8], signature: &[u8]) -> bool {
        match self {
            Self::HmacSha256(secret) => secret.verify_bytes(base, signature),
            Self::Ed25519(key) => {
                ed25519_dalek::Signature::from_slice(signature).is_ok_and(|signature| {
                    ed25519_dalek::Verifier::verify(*key, base, &signature).is_ok()
                })
            }
        }
    }
}

/// One received signature: its label, its `Signature-Input` member and the bytes
/// of its `Signature` member.
#[derive(Clone, Copy)]
pub(crate) struct Member<'a> {
    pub(crate) label: &'a str,
    pub(crate) input: &'a InnerList,
    pub(crate) signature: &'a [u8],
}

/// The components a verified signature covers, with the values it was checked
/// over, in the signed order.
pub(crate) struct Covered(Vec<(String, String)>);

impl Covered {
    /// The signed value of `component`, if it is covered.
    pub(crate) fn value(&self, component: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == component)
            .map(|(_, value)| value.as_str())
    }
}

/// The bytes of `label`'s member of the `Signature` dictionary.
pub(crate) fn signature_bytes<'a>(
    signatures: &'a Dictionary,
    label: &str,
) -> Result<&'a [u8], VerifyError> {
    match signatures.get(label) {
        None => return Err(VerifyError::MissingSignatureLabel(label.to_owned())),
        Some(ListEntry::Item(item)) => item.bare_item.as_byte_sequence(),
        Some(ListEntry::InnerList(_)) => None,
    }
    .ok_or_else(|| VerifyError::InvalidHeader {
        header: SIGNATURE.to_owned(),
        reason: format!("its `{label}` member is not a byte sequence"),
    })
}

/// Refuses an `alg` parameter other than `alg` (an absent one is the caller's
/// business).
pub(crate) fn check_alg(input: &InnerList, label: &str, alg: &str) -> Result<(), VerifyError> {
    match input.params.get("alg") {
        Some(found) if found.as_string().map(|found| found.as_str()) != Some(alg) => {
            Err(VerifyError::UnsupportedAlgorithm {
                label: label.to_owned(),
                alg: sfv::Item::new(found.clone()).serialize(),
            })
        }
        _ => Ok(()),
    }
}

/// A required integer parameter (`created`, `expires`).
pub(crate) fn integer_param(
    input: &InnerList,
    label: &str,
    param: &'static str,
) -> Result<i64, VerifyError> {
    let value = input
        .params
        .get(param)
        .ok_or_else(|| VerifyError::MissingParameter {
            label: label.to_owned(),
            param,
        })?;
    value
        .as_integer()
        .map(i64::from)
        .ok_or_else(|| VerifyError::InvalidParameter {
            label: label.to_owned(),
            param,
            expected: "an integer",
        })
}

/// A required string parameter (`keyid`, `nonce`, `alg`).
pub(crate) fn string_param<'a>(
    input: &'a InnerList,
    label: &str,
    param: &'static str,
) -> Result<&'a str, VerifyError> {
    let value = input
        .params
        .get(param)
        .ok_or_else(|| VerifyError::MissingParameter {
            label: label.to_owned(),
            param,
        })?;
    value
        .as_string()
        .map(|value| value.as_str())
        .ok_or_else(|| VerifyError::InvalidParameter {
            label: label.to_owned(),
            param,
            expected: "a string",
        })
}

/// Checks what `member` covers against `required`, rebuilds the signature base
/// from `message` and checks the signature with `key`.
///
/// The covered components must be plain strings (no component parameters),
/// each listed once and each one that [`Message::component_value`] can compute;
/// every component in `required` must be among them. The base's
/// `@signature-params` line is the received member as RFC 8941 serializes it, so
/// the sender's parameter order (and any parameter this code does not know) is
/// what is verified.
pub(crate) fn verify_member(
    key: Verifier<'_>,
    message: &Message<'_>,
    member: Member<'_>,
    required: &[&'static str],
) -> Result<Covered, VerifyError> {
    let Member {
        label,
        input,
        signature,
    } = member;
    let mut names: Vec<&str> = Vec::with_capacity(input.items.len());
    for item in &input.items {
        let name = match (&item.bare_item, item.params.is_empty()) {
            (BareItem::String(name), true) => name.as_str(),
            _ => return Err(VerifyError::UnsupportedComponent(item.serialize())),
        };
        if names.contains(&name) {
            return Err(VerifyError::DuplicateComponent(sf_string(name)));
        }
        names.push(name);
    }
    if let Some(missing) = required.iter().find(|c| !names.contains(c)) {
        return Err(VerifyError::MissingCoveredComponent {
            label: label.to_owned(),
            component: missing,
        });
    }
    let mut covered = Vec::with_capacity(names.len());
    for name in names {
        covered.push((name.to_owned(), message.component_value(name)?));
    }
    let lines: Vec<(&str, &str)> = covered
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();

    // The parameters as RFC 8941 serializes what was received (their order kept).
    let mut params = sfv::ListSerializer::new();
    {
        let mut list = params.inner_list();
        list.items(&input.items);
        _ = list.finish().parameters(&input.params);
    }
    let params = params.finish().ok_or_else(|| VerifyError::InvalidHeader {
        header: SIGNATURE_INPUT.to_owned(),
        reason: format!("its `{label}` member cannot be serialized"),
    })?;
    if !key.verify(signature_base(&lines, &params).as_bytes(), signature) {
        return Err(VerifyError::SignatureMismatch(label.to_owned()));
    }
    Ok(Covered(covered))
}
