//! The agent side: the headers that sign one request.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;

use super::sign_signature_base_ed25519;
use super::{ALGORITHM, LABEL, MAX_VALIDITY_SECS, Request, SigningKey};
use crate::rfc9421::{SignatureParams, signature_base};
use crate::{CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, content_digest};

/// The headers to add to `request`, as lowercase `(name, value)` pairs:
/// `content-digest` (RFC 9530 `sha-256`; only when the body is not empty and the
/// request has no `content-digest` yet), then `signature-input` and `signature`.
/// Insert them, replacing any left from an earlier attempt.
///
/// The signature covers `"@method" "@authority" "@path"`, then `"@query"` when
/// `path_and_query` has a `?`, `"content-digest"` when the body is not empty and
/// `"authorization"` when the headers have one; its parameters are `created`,
/// `expires` (`created` + [`MAX_VALIDITY_SECS`]), `nonce`, `keyid` and
/// `alg="ed25519"`, in that order.
///
/// This does not check its input. `keyid` and `nonce` must be printable ASCII
/// (a thumbprint and [`super::new_nonce`] are), the nonce at most
/// [`super::MAX_NONCE_LEN`] long, and covered header values visible ASCII;
/// otherwise the headers are still produced but [`super::verify`] refuses them.
pub fn sign(
    key: &SigningKey,
    keyid: &str,
    request: &Request<'_>,
    created: i64,
    nonce: &str,
) -> Vec<(&'static str, String)> {
    let mut headers = Vec::with_capacity(3);
    let added_digest = (!request.body.is_empty() && !request.headers.contains_key(CONTENT_DIGEST))
        .then(|| content_digest(request.body));
    if let Some(digest) = &added_digest {
        headers.push((CONTENT_DIGEST, digest.clone()));
    }

    let components = request.required_components();
    let message = request.message();
    let values: Vec<String> = components
        .iter()
        .map(|&component| match (component, &added_digest) {
            (CONTENT_DIGEST, Some(digest)) => digest.clone(),
            // A value that cannot be computed is left empty: the signature is
            // still made, and the receiver, failing the same way, refuses it.
            _ => message.component_value(component).unwrap_or_default(),
        })
        .collect();
    let lines: Vec<(&str, &str)> = components
        .iter()
        .copied()
        .zip(values.iter().map(String::as_str))
        .collect();
    let params = SignatureParams {
        components: &components,
        created: Some(created),
        expires: Some(created.saturating_add(MAX_VALIDITY_SECS)),
        nonce: Some(nonce),
        keyid: Some(keyid),
        alg: Some(ALGORITHM),
    }
    .serialize();
    let signature = sign_signature_base_ed25519(key, &signature_base(&lines, &params));
    headers.push((SIGNATURE_INPUT, format!("{LABEL}={params}")));
    headers.push((SIGNATURE, format!("{LABEL}=:{signature}:")));
    headers
}

/// A fresh nonce: 16 bytes from the thread-local CSPRNG, base64url without
/// padding (22 characters).
pub fn new_nonce() -> String {
    let mut bytes = [0_u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}
