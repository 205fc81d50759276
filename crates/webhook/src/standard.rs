//! Standard Webhooks v1 (<https://www.standardwebhooks.com/>): `webhook-id`,
//! `webhook-timestamp` and `webhook-signature: v1,<base64 HMAC-SHA256>` over
//! `{id}.{timestamp}.{body}`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;

use crate::{
    Secret, TIMESTAMP_TOLERANCE_SECS, Verified, VerifyError, WEBHOOK_ID, WEBHOOK_SIGNATURE,
    WEBHOOK_TIMESTAMP,
};

/// The bytes that are MACed: `{id}.{timestamp}.{body}`.
fn signed_content(webhook_id: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    let prefix = format!("{webhook_id}.{timestamp}.");
    let mut content = Vec::with_capacity(prefix.len() + body.len());
    content.extend_from_slice(prefix.as_bytes());
    content.extend_from_slice(body);
    content
}

/// The `webhook-signature` value for one message: `v1,<base64>`.
pub fn standard_signature(
    secret: &Secret,
    webhook_id: &str,
    timestamp: i64,
    body: &[u8],
) -> String {
    let tag = secret.sign_bytes(&signed_content(webhook_id, timestamp, body));
    format!("v1,{}", STANDARD.encode(tag))
}

/// Verifies the Standard Webhooks headers alone.
///
/// Requires `webhook-id`, `webhook-timestamp` (ASCII digits, Unix seconds, within
/// 300 s of `now` either way, the edges included) and `webhook-signature`, a
/// space-separated list of `<version>,<base64>` in which any `v1` entry may match
/// (constant-time). Other versions and malformed entries are skipped.
pub fn verify_standard(
    secret: &Secret,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, VerifyError> {
    let webhook_id = single_header(headers, WEBHOOK_ID)?;
    let timestamp_text = single_header(headers, WEBHOOK_TIMESTAMP)?;
    let timestamp = parse_timestamp(timestamp_text)?;
    check_tolerance(timestamp, now)?;

    let content = signed_content(webhook_id, timestamp, body);
    let mut any_entry = false;
    for value in headers.get_all(WEBHOOK_SIGNATURE) {
        any_entry = true;
        let value = value.to_str().map_err(|_| VerifyError::InvalidHeader {
            header: WEBHOOK_SIGNATURE.to_owned(),
            reason: "not visible ASCII".to_owned(),
        })?;
        let matched = value
            .split_ascii_whitespace()
            .filter_map(|entry| entry.split_once(','))
            .filter(|(version, _)| *version == "v1")
            .filter_map(|(_, signature)| STANDARD.decode(signature).ok())
            .any(|tag| secret.verify_bytes(&content, &tag));
        if matched {
            return Ok(Verified {
                webhook_id: webhook_id.to_owned(),
                timestamp,
            });
        }
    }
    if any_entry {
        Err(VerifyError::StandardSignatureMismatch)
    } else {
        Err(VerifyError::MissingHeader(WEBHOOK_SIGNATURE.to_owned()))
    }
}

/// The one value of a header that must appear exactly once, as a string.
pub(crate) fn single_header<'h>(
    headers: &'h HeaderMap,
    name: &str,
) -> Result<&'h str, VerifyError> {
    let mut values = headers.get_all(name).iter();
    let value = values
        .next()
        .ok_or_else(|| VerifyError::MissingHeader(name.to_owned()))?;
    if values.next().is_some() {
        return Err(VerifyError::InvalidHeader {
            header: name.to_owned(),
            reason: "it appears more than once".to_owned(),
        });
    }
    let value = value.to_str().map_err(|_| VerifyError::InvalidHeader {
        header: name.to_owned(),
        reason: "not visible ASCII".to_owned(),
    })?;
    let value = value.trim_matches([' ', '\t']);
    if value.is_empty() {
        return Err(VerifyError::InvalidHeader {
            header: name.to_owned(),
            reason: "it is empty".to_owned(),
        });
    }
    Ok(value)
}

/// `webhook-timestamp`: ASCII digits only (no sign, no spaces, no fraction).
pub(crate) fn parse_timestamp(text: &str) -> Result<i64, VerifyError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::InvalidTimestamp(text.to_owned()));
    }
    text.parse()
        .map_err(|_| VerifyError::InvalidTimestamp(text.to_owned()))
}

/// Refuses a timestamp more than [`TIMESTAMP_TOLERANCE_SECS`] away from `now`.
fn check_tolerance(timestamp: i64, now: i64) -> Result<(), VerifyError> {
    if now.saturating_sub(timestamp) > TIMESTAMP_TOLERANCE_SECS {
        Err(VerifyError::TimestampTooOld { timestamp, now })
    } else if timestamp.saturating_sub(now) > TIMESTAMP_TOLERANCE_SECS {
        Err(VerifyError::TimestampTooNew { timestamp, now })
    } else {
        Ok(())
    }
}
