//! Proof Key for Code Exchange (RFC 7636), S256 only: the authorization request
//! carries `BASE64URL(SHA256(code_verifier))`, the token request the verifier, and
//! the code is honoured only when the two match. `plain` is refused: a client
//! that can hash must (§4.2), and every client of this server can.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The only method this server accepts.
pub const METHOD_S256: &str = "S256";

/// RFC 7636 §4.1: 43 to 128 characters of `[A-Za-z0-9-._~]`. A challenge has the
/// same syntax (§4.2); an S256 one is always 43 characters.
fn unreserved(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// Whether `verifier` is a code verifier by RFC 7636 §4.1.
pub fn valid_verifier(verifier: &str) -> bool {
    unreserved(verifier, 43, 128)
}

/// Whether `challenge` can be an S256 challenge: 43 characters of base64url (the
/// encoding of 32 bytes).
pub fn valid_s256_challenge(challenge: &str) -> bool {
    unreserved(challenge, 43, 43) && !challenge.contains(['.', '~'])
}

/// The S256 challenge of `verifier` (RFC 7636 §4.2).
pub fn challenge_s256(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether `verifier` is the one whose challenge is `challenge`, compared in
/// constant time (a timing difference would tell how much of a guess is right).
pub fn verifies(challenge: &str, verifier: &str) -> bool {
    valid_verifier(verifier)
        && challenge_s256(verifier)
            .as_bytes()
            .ct_eq(challenge.as_bytes())
            .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared vectors (`shared/vectors/oauth_pkce_device_flow.json`, copied).
    const VECTORS: &str = include_str!("vectors/oauth_pkce_device_flow.json");

    fn vector() -> serde_json::Value {
        serde_json::from_str::<serde_json::Value>(VECTORS).unwrap()["pkce_rfc7636"].clone()
    }

    #[test]
    fn the_rfc_7636_appendix_b_vector() {
        let v = vector();
        let verifier = v["code_verifier"].as_str().unwrap();
        let challenge = v["code_challenge"].as_str().unwrap();
        assert_eq!(v["code_challenge_method"], METHOD_S256);
        // The verifier is the base64url of the listed octets (§4.1's recipe).
        let octets: Vec<u8> = v["verifier_octets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_u64().unwrap() as u8)
            .collect();
        assert_eq!(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&octets),
            verifier
        );
        let sha: Vec<u8> = v["sha256_octets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_u64().unwrap() as u8)
            .collect();
        assert_eq!(Sha256::digest(verifier.as_bytes())[..], sha[..]);
        assert_eq!(challenge_s256(verifier), challenge);
        assert!(valid_verifier(verifier));
        assert!(valid_s256_challenge(challenge));
        assert!(verifies(challenge, verifier));
    }

    #[test]
    fn a_wrong_or_plain_verifier_does_not_verify() {
        let v = vector();
        let verifier = v["code_verifier"].as_str().unwrap();
        let challenge = v["code_challenge"].as_str().unwrap();
        // `plain` sends the verifier as the challenge: never accepted.
        let plain = v["plain_example"]["code_challenge"].as_str().unwrap();
        assert!(!verifies(plain, verifier));
        // One character off.
        let mut other = verifier.to_owned();
        other.replace_range(0..1, "e");
        assert!(!verifies(challenge, &other));
        // The challenge itself is not a verifier of itself.
        assert!(!verifies(challenge, challenge));
    }

    #[test]
    fn verifier_and_challenge_syntax() {
        assert!(!valid_verifier(&"a".repeat(42)), "too short");
        assert!(valid_verifier(&"a".repeat(43)));
        assert!(valid_verifier(&"a".repeat(128)));
        assert!(!valid_verifier(&"a".repeat(129)), "too long");
        assert!(
            !valid_verifier(&format!("{}+", "a".repeat(43))),
            "not unreserved"
        );
        assert!(!valid_verifier(&format!("{} ", "a".repeat(43))));
        assert!(!valid_s256_challenge(&"a".repeat(44)));
        assert!(
            !valid_s256_challenge(&format!("{}=", "a".repeat(42))),
            "padding"
        );
        assert!(!valid_s256_challenge(&format!("{}~", "a".repeat(42))));
    }
}
