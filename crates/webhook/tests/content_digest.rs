//! RFC 9530 Content-Digest: the RFC's sha-256 (and sha-512) vectors
//! (tests/vectors/rfc9530_digests.json, copied from the shared vector collection).

use serde::Deserialize;
use switchboard_webhook::{VerifyError, content_digest, verify_content_digest};

const VECTORS: &str = include_str!("vectors/rfc9530_digests.json");

#[derive(Deserialize)]
struct File {
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    id: String,
    alg: String,
    content_hex: String,
    sf_value: String,
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn vectors() -> Vec<Vector> {
    serde_json::from_str::<File>(VECTORS).unwrap().vectors
}

#[test]
fn sha256_vectors_are_reproduced_and_verified() {
    let sha256: Vec<Vector> = vectors()
        .into_iter()
        .filter(|v| v.alg == "sha-256")
        .collect();
    assert_eq!(sha256.len(), 9);
    for v in &sha256 {
        let content = unhex(&v.content_hex);
        assert_eq!(content_digest(&content), v.sf_value, "{}", v.id);
        assert_eq!(
            verify_content_digest(&v.sf_value, &content),
            Ok(()),
            "{}",
            v.id
        );
        let mut other = content.clone();
        other.push(b'x');
        assert_eq!(
            verify_content_digest(&v.sf_value, &other),
            Err(VerifyError::ContentDigestMismatch {
                algorithm: "sha-256".to_owned()
            }),
            "{}",
            v.id
        );
    }
}

#[test]
fn sha512_vectors_verify() {
    let sha512: Vec<Vector> = vectors()
        .into_iter()
        .filter(|v| v.alg == "sha-512")
        .collect();
    assert_eq!(sha512.len(), 3);
    for v in &sha512 {
        let content = unhex(&v.content_hex);
        assert_eq!(
            verify_content_digest(&v.sf_value, &content),
            Ok(()),
            "{}",
            v.id
        );
        assert!(verify_content_digest(&v.sf_value, b"").is_err(), "{}", v.id);
    }
}

#[test]
fn every_known_member_must_match_and_one_must_be_known() {
    let body = br#"{"hello": "world"}"#;
    let sha256 = "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:";
    let sha512 = "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:";
    assert_eq!(
        verify_content_digest(&format!("{sha256}, {sha512}"), body),
        Ok(())
    );
    // A deprecated algorithm is ignored, not trusted.
    assert_eq!(
        verify_content_digest(&format!("md5=:Sd/dVLAcvNLSq16eXua5uQ==:, {sha256}"), body),
        Ok(())
    );
    assert_eq!(
        verify_content_digest("md5=:Sd/dVLAcvNLSq16eXua5uQ==:", body),
        Err(VerifyError::UnsupportedDigest("md5".to_owned()))
    );
    // A right sha-256 does not excuse a wrong sha-512.
    let wrong512 = "sha-512=:YMAam51Jz/jOATT6/zvHrLVgOYTGFy1d6GJiOHTohq4yP+pgk4vf2aCsyRZOtw8MjkM7iw7yZ/WkppmM44T3qg==:";
    assert_eq!(
        verify_content_digest(&format!("{sha256}, {wrong512}"), body),
        Err(VerifyError::ContentDigestMismatch {
            algorithm: "sha-512".to_owned()
        })
    );
    // Not a byte sequence, or not a dictionary.
    for bad in [
        "sha-256=\"X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=\"",
        "sha-256=:X48E9q",
        ":X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
    ] {
        assert!(
            matches!(
                verify_content_digest(bad, body),
                Err(VerifyError::InvalidHeader { .. })
            ),
            "{bad}"
        );
    }
}

#[test]
fn the_rfc_text_typo_with_double_padding_is_not_accepted() {
    // RFC 9530's source prints this 32-byte digest with "==" (see text_typos in the
    // vectors file); only the one-"=" form is a valid encoding.
    let body = b"{\"hello\": \"world\"}\n";
    assert_eq!(
        verify_content_digest(
            "sha-256=:RK/0qy18MlBSVnWgjwz6lZEWjP/lF5HF9bvEF8FabDg=:",
            body
        ),
        Ok(())
    );
    assert!(
        verify_content_digest(
            "sha-256=:RK/0qy18MlBSVnWgjwz6lZEWjP/lF5HF9bvEF8FabDg==:",
            body
        )
        .is_err()
    );
}
