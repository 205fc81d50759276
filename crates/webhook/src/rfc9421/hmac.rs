//! `hmac-sha256` webhook signatures: what the server signs on every delivery and
//! what a receiver verifies.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use sfv::{BareItem, ListEntry};

use super::base::{
    Message, RequestView, SignatureParams, dictionary_field, normalize_authority, normalize_path,
    signature_base,
};
use super::verify::{Member, Verifier, check_alg, integer_param, signature_bytes, verify_member};
use crate::digest::verify_content_digest;
use crate::standard::parse_timestamp;
use crate::{
    CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, Secret, TIMESTAMP_TOLERANCE_SECS, Verified,
    VerifyError, WEBHOOK_ID, WEBHOOK_TIMESTAMP,
};

/// The label of Switchboard's signature in `Signature-Input` and `Signature`.
pub const SIGNATURE_LABEL: &str = "sig1";
/// The `alg` parameter.
pub const ALGORITHM: &str = "hmac-sha256";
/// What the server's signature covers, in this order. A verified signature must
/// cover at least these.
pub const COVERED_COMPONENTS: [&str; 6] = [
    "@method",
    "@authority",
    "@path",
    CONTENT_DIGEST,
    WEBHOOK_ID,
    WEBHOOK_TIMESTAMP,
];
/// `expires - created` of the server's signatures unless told otherwise.
pub const DEFAULT_VALIDITY_SECS: i64 = 300;

/// The `hmac-sha256` signature of a signature base, base64 (standard, padded):
/// what goes between the colons of a `Signature` member.
pub fn sign_signature_base(secret: &Secret, base: &str) -> String {
    STANDARD.encode(secret.sign_bytes(base.as_bytes()))
}

/// The server side: `(Signature-Input, Signature)` values for one request.
pub(crate) fn sign_rfc9421(
    secret: &Secret,
    request: &crate::Outgoing<'_>,
    content_digest: &str,
    expires: i64,
) -> (String, String) {
    let authority = normalize_authority(request.authority);
    let timestamp = request.timestamp.to_string();
    let values = [
        request.method,
        authority.as_str(),
        normalize_path(request.path),
        content_digest,
        request.webhook_id,
        timestamp.as_str(),
    ];
    let lines: Vec<(&str, &str)> = COVERED_COMPONENTS.iter().copied().zip(values).collect();
    let params = SignatureParams {
        components: &COVERED_COMPONENTS,
        created: Some(request.timestamp),
        expires: Some(expires),
        nonce: None,
        keyid: Some(request.keyid),
        alg: Some(ALGORITHM),
    }
    .serialize();
    let signature = sign_signature_base(secret, &signature_base(&lines, &params));
    (
        format!("{SIGNATURE_LABEL}={params}"),
        format!("{SIGNATURE_LABEL}=:{signature}:"),
    )
}

/// Verifies the RFC 9421 signature alone (with its `Content-Digest`).
///
/// Looks for the signatures in `Signature-Input` whose `keyid` is `expected_keyid`
/// (`sig1` first) and accepts the request if one of them passes every check:
/// `alg`, if present, is `hmac-sha256`; `created` and `expires` are present,
/// `created` is at most 300 s after `now` and `expires` is not before `now`; the
/// covered components include [`COVERED_COMPONENTS`], with no duplicates and none
/// this verifier cannot compute; the HMAC over the rebuilt signature base matches
/// (constant-time); and the covered `Content-Digest` matches `body`. If none
/// passes, the error is the first candidate's.
#[expect(
    clippy::too_many_arguments,
    reason = "mirrors `verify`, whose signature is the contract the server and SDK use"
)]
pub fn verify_rfc9421(
    secret: &Secret,
    expected_keyid: &str,
    method: &str,
    authority: &str,
    path: &str,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let inputs = dictionary_field(headers, SIGNATURE_INPUT)?;
    let signatures = dictionary_field(headers, SIGNATURE)?;
    let request = RequestView {
        method,
        authority,
        path,
        headers,
    };

    let mut found = Vec::new();
    let mut candidates = Vec::new();
    for (label, entry) in &inputs {
        let ListEntry::InnerList(input) = entry else {
            continue;
        };
        match input.params.get("keyid").and_then(BareItem::as_string) {
            Some(keyid) if keyid.as_str() == expected_keyid => {
                candidates.push((label.as_str(), input))
            }
            Some(keyid) => found.push(keyid.as_str().to_owned()),
            None => {}
        }
    }
    candidates.sort_by_key(|(label, _)| *label != SIGNATURE_LABEL);

    let mut first_error = None;
    for (label, input) in candidates {
        match verify_one(
            secret,
            &request.message(),
            label,
            input,
            &signatures,
            body,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| VerifyError::KeyidMismatch {
        expected: expected_keyid.to_owned(),
        found,
    }))
}

/// One candidate signature, under the webhook contract: `alg` absent or
/// `hmac-sha256`, `created` and `expires` required, [`COVERED_COMPONENTS`]
/// covered, and the covered `Content-Digest` checked against `body`.
fn verify_one(
    secret: &Secret,
    request: &Message<'_>,
    label: &str,
    input: &sfv::InnerList,
    signatures: &sfv::Dictionary,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let signature = signature_bytes(signatures, label)?;
    check_alg(input, label, ALGORITHM)?;
    let created = integer_param(input, label, "created")?;
    let expires = integer_param(input, label, "expires")?;
    if created.saturating_sub(now) > TIMESTAMP_TOLERANCE_SECS {
        return Err(VerifyError::CreatedInFuture {
            label: label.to_owned(),
            created,
            now,
        });
    }
    if expires < now {
        return Err(VerifyError::Expired {
            label: label.to_owned(),
            expires,
            now,
        });
    }

    let member = Member {
        label,
        input,
        signature,
    };
    let covered = verify_member(
        Verifier::HmacSha256(secret),
        request,
        member,
        &COVERED_COMPONENTS,
    )?;

    // Authenticated from here on; the three are covered (COVERED_COMPONENTS).
    let value_of = |name: &str| covered.value(name).unwrap_or_default();
    verify_content_digest(value_of(CONTENT_DIGEST), body)?;
    Ok(Verified {
        webhook_id: value_of(WEBHOOK_ID).to_owned(),
        timestamp: parse_timestamp(value_of(WEBHOOK_TIMESTAMP))?,
    })
}
