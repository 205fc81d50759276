//! RFC 9421's Ed25519 examples (tests/vectors/rfc9421_ed25519.json, copied from
//! the shared vector collection): B.2.6 re-signed byte for byte and verified, and
//! B.4 with its six transformations, verified by the same code the agent
//! signatures use, with the RFC's own covered lists.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderValue;
use serde::Deserialize;
use switchboard_webhook::agent::{
    PublicKey, Request, SigningKey, sign_signature_base_ed25519, verify_ed25519,
};
use switchboard_webhook::rfc9421::{RequestView, SignatureParams, signature_base};
use switchboard_webhook::{SIGNATURE, SIGNATURE_INPUT, VerifyError};

mod signing;
use signing::parse_request;

const VECTORS: &str = include_str!("vectors/rfc9421_ed25519.json");

#[derive(Deserialize)]
struct File {
    test_key_ed25519: TestKey,
    test_request: String,
    cases: Vec<Case>,
    transformation_variants: Variants,
}

#[derive(Deserialize)]
struct TestKey {
    jwk: serde_json::Value,
}

#[derive(Deserialize)]
struct Case {
    id: String,
    keyid: String,
    label: String,
    message: String,
    signature_base: String,
    signature_input_header: String,
    signature_header: String,
    signature_base64: String,
}

#[derive(Deserialize)]
struct Variants {
    signature_label: String,
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct Variant {
    description: String,
    message: String,
    expected_valid: bool,
}

fn load() -> File {
    serde_json::from_str(VECTORS).unwrap()
}

/// test-key-ed25519 (RFC 9421 B.1.4) from its JWK: the private key `d` and the
/// public key `x`, which must be `d`'s.
fn test_key(file: &File) -> (SigningKey, PublicKey) {
    let member = |name: &str| {
        URL_SAFE_NO_PAD
            .decode(file.test_key_ed25519.jwk[name].as_str().unwrap())
            .unwrap()
    };
    let key = SigningKey::from_bytes(&member("d").try_into().unwrap());
    let public = PublicKey::from_bytes(&member("x")).unwrap();
    assert_eq!(key.public_key(), public, "x is d's public key");
    (key, public)
}

fn case<'a>(file: &'a File, id: &str) -> &'a Case {
    file.cases.iter().find(|c| c.id == id).unwrap()
}

/// Rebuilds `case`'s signature base with our code, re-signs it, and checks both
/// against the RFC's bytes.
fn reproduce(case: &Case, key: &SigningKey, components: &[&str]) {
    let (method, target, headers, _) = parse_request(&case.message);
    let view = RequestView {
        method: &method,
        authority: headers["host"].to_str().unwrap(),
        path: &target,
        headers: &headers,
    };
    let values: Vec<String> = components
        .iter()
        .map(|c| view.component_value(c).unwrap())
        .collect();
    let lines: Vec<(&str, &str)> = components
        .iter()
        .copied()
        .zip(values.iter().map(String::as_str))
        .collect();
    let params = SignatureParams {
        components,
        created: Some(1_618_884_473),
        keyid: Some(&case.keyid),
        ..SignatureParams::default()
    }
    .serialize();
    assert_eq!(
        format!("{}={params}", case.label),
        case.signature_input_header,
        "{}",
        case.id
    );
    let base = signature_base(&lines, &params);
    assert_eq!(base, case.signature_base, "{}", case.id);
    // Ed25519 is deterministic: the same key and base give the RFC's bytes.
    let signature = sign_signature_base_ed25519(key, &base);
    assert_eq!(signature, case.signature_base64, "{}", case.id);
    assert_eq!(
        format!("{}=:{signature}:", case.label),
        case.signature_header,
        "{}",
        case.id
    );
}

/// Verifies the signature labelled `label` in `message` (which carries
/// Signature-Input and Signature, or gets `extra` ones) with `key`.
fn verify_message(
    message: &str,
    extra: Option<&Case>,
    key: &PublicKey,
    label: &str,
) -> Result<(), VerifyError> {
    let (method, target, mut headers, body) = parse_request(message);
    if let Some(case) = extra {
        for (name, value) in [
            (SIGNATURE_INPUT, &case.signature_input_header),
            (SIGNATURE, &case.signature_header),
        ] {
            headers.insert(name, HeaderValue::from_str(value).unwrap());
        }
    }
    let authority = headers["host"].to_str().unwrap().to_owned();
    let request = Request {
        method: &method,
        authority: &authority,
        path_and_query: &target,
        headers: &headers,
        body: &body,
    };
    verify_ed25519(key, &request, label)
}

#[test]
fn reproduces_and_verifies_rfc_9421_b_2_6() {
    let file = load();
    let (key, public) = test_key(&file);
    let b26 = case(&file, "B.2.6");
    assert_eq!(b26.message, file.test_request);
    reproduce(
        b26,
        &key,
        &[
            "date",
            "@method",
            "@path",
            "@authority",
            "content-type",
            "content-length",
        ],
    );
    assert_eq!(
        verify_message(&b26.message, Some(b26), &public, &b26.label),
        Ok(())
    );

    // Controls: a covered header changed, another key, another label.
    let changed = b26.message.replace("application/json", "text/plain");
    assert_eq!(
        verify_message(&changed, Some(b26), &public, &b26.label),
        Err(VerifyError::SignatureMismatch(b26.label.clone()))
    );
    let other = SigningKey::from_bytes(&[7; 32]).public_key();
    assert_eq!(
        verify_message(&b26.message, Some(b26), &other, &b26.label),
        Err(VerifyError::SignatureMismatch(b26.label.clone()))
    );
    assert!(matches!(
        verify_message(&b26.message, Some(b26), &public, "sig1"),
        Err(VerifyError::InvalidHeader { header, .. }) if header == SIGNATURE_INPUT
    ));
}

#[test]
fn reproduces_and_verifies_rfc_9421_b_4() {
    let file = load();
    let (key, public) = test_key(&file);
    let b4 = case(&file, "B.4");
    reproduce(b4, &key, &["@method", "@path", "@authority", "accept"]);
    assert_eq!(
        verify_message(&b4.message, None, &public, &b4.label),
        Ok(())
    );
}

#[test]
fn rfc_9421_b_4_transformations_keep_or_break_the_signature() {
    let file = load();
    let (_, public) = test_key(&file);
    let variants = &file.transformation_variants;
    assert_eq!(variants.variants.len(), 6);
    let label = &variants.signature_label;
    for variant in &variants.variants {
        let result = verify_message(&variant.message, None, &public, label);
        let expected = if variant.expected_valid {
            Ok(())
        } else {
            Err(VerifyError::SignatureMismatch(label.clone()))
        };
        assert_eq!(result, expected, "{}", variant.description);
    }
}
