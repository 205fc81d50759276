//! The registration challenge: proof that a receiver holds the callback's secret.
//!
//! The server POSTs `{"type":"callback.challenge","challenge":"<random token>"}`
//! (signed like any delivery) and the receiver answers
//! `{"challenge_response": "<base64 of HMAC-SHA256(secret, challenge)>"}`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::Secret;

/// The `type` of the challenge request's JSON body.
pub const CHALLENGE_TYPE: &str = "callback.challenge";

/// The receiver's answer to `challenge`: base64 (standard, padded) of
/// HMAC-SHA256(key = the secret's bytes, message = the challenge's UTF-8 bytes).
pub fn challenge_response(secret: &Secret, challenge: &str) -> String {
    STANDARD.encode(secret.sign_bytes(challenge.as_bytes()))
}

/// Whether `response` is the right answer to `challenge`. The MAC comparison is
/// constant-time; a response that is not base64 is simply wrong.
pub fn verify_challenge_response(secret: &Secret, challenge: &str, response: &str) -> bool {
    STANDARD
        .decode(response)
        .is_ok_and(|tag| secret.verify_bytes(challenge.as_bytes(), &tag))
}
