//! RFC 9421 as the server signs it: the exact header format, and sign→verify with
//! every tampering of the request refused for the right reason (the RFC's own
//! vectors are in `rfc9421_vectors.rs`, malformed signature headers in
//! `rfc9421_headers.rs`).

mod signing;
use signing::*;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderValue;
use switchboard_webhook::rfc9421::sign_signature_base;
use switchboard_webhook::{
    CONTENT_DIGEST, SIGNATURE_INPUT, Secret, Verified, VerifyError, WEBHOOK_ID, WEBHOOK_TIMESTAMP,
    content_digest, sign, sign_with_expiry, verify, verify_parts, verify_rfc9421,
};

#[test]
fn sign_emits_the_contracted_headers() {
    let secret = Secret::parse(SECRET).unwrap();
    let pairs = sign(&secret, &request(BODY));
    let names: Vec<&str> = pairs.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "content-digest",
            "signature-input",
            "signature"
        ]
    );
    let value = |name: &str| pairs.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    assert_eq!(value("webhook-id"), "msg_01JD0000000000000000000000");
    assert_eq!(value("webhook-timestamp"), "1700000000");
    assert!(value("webhook-signature").starts_with("v1,"));
    assert_eq!(value("content-digest"), content_digest(BODY));
    assert_eq!(
        value("signature-input"),
        r#"sig1=("@method" "@authority" "@path" "content-digest" "webhook-id" "webhook-timestamp");created=1700000000;expires=1700000300;keyid="cb_42";alg="hmac-sha256""#
    );
    let signature = value("signature");
    let b64 = signature
        .strip_prefix("sig1=:")
        .and_then(|s| s.strip_suffix(':'))
        .unwrap();
    assert_eq!(STANDARD.decode(b64).unwrap().len(), 32);
    // The signature base that was signed, rebuilt here by hand from the contract.
    let base = format!(
        "\"@method\": POST\n\"@authority\": hooks.example.com:8443\n\"@path\": /switchboard/cb\n\
         \"content-digest\": {}\n\"webhook-id\": msg_01JD0000000000000000000000\n\
         \"webhook-timestamp\": 1700000000\n\"@signature-params\": {}",
        content_digest(BODY),
        value("signature-input").strip_prefix("sig1=").unwrap()
    );
    assert_eq!(sign_signature_base(&secret, &base), b64);
}

#[test]
fn round_trip_sign_then_verify() {
    let (secret, headers) = signed();
    let expected = Verified {
        webhook_id: "msg_01JD0000000000000000000000".to_owned(),
        timestamp: TS,
    };
    assert_eq!(check(&headers, TS + 10), Ok(expected.clone()));
    // Edges: created may be up to 300 s ahead of the receiver; expires is inclusive.
    assert!(check(&headers, TS - 300).is_ok());
    assert!(check(&headers, TS + 300).is_ok());
    let both = verify(
        &secret,
        "cb_42",
        "POST",
        "hooks.example.com:8443",
        "/switchboard/cb",
        &headers,
        BODY,
        TS + 10,
    );
    assert_eq!(both, Ok(expected.clone()));

    // Host case and a query do not matter (@authority is lowercased, @path has no query).
    let secret2 = Secret::parse(SECRET).unwrap();
    assert!(
        verify_rfc9421(
            &secret2,
            "cb_42",
            "POST",
            "HOOKS.example.com:8443",
            "/switchboard/cb?retry=1",
            &headers,
            BODY,
            TS
        )
        .is_ok()
    );

    // Through http::request::Parts, as an axum receiver would (HTTP/1.1: Host).
    let mut builder = http::Request::builder()
        .method("POST")
        .uri("/switchboard/cb")
        .header("host", "hooks.example.com:8443");
    for (name, value) in &headers {
        builder = builder.header(name, value);
    }
    let (parts, ()) = builder.body(()).unwrap().into_parts();
    assert_eq!(
        verify_parts(&secret, "cb_42", &parts, BODY, TS + 1),
        Ok(expected)
    );
}

#[test]
fn tampered_body_is_refused() {
    let (secret, headers) = signed();
    let tampered = br#"{"type":"message.created","data":{"id":"m_2"}}"#;
    assert_eq!(
        verify_rfc9421(
            &secret,
            "cb_42",
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &headers,
            tampered,
            TS
        ),
        Err(VerifyError::ContentDigestMismatch {
            algorithm: "sha-256".to_owned()
        })
    );
    // Both schemes: the Standard Webhooks check runs first.
    assert_eq!(
        verify(
            &secret,
            "cb_42",
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &headers,
            tampered,
            TS
        ),
        Err(VerifyError::StandardSignatureMismatch)
    );
    // A Content-Digest rewritten to match the new body breaks the signature.
    let mut rewritten = headers.clone();
    rewritten.insert(
        CONTENT_DIGEST,
        HeaderValue::from_str(&content_digest(tampered)).unwrap(),
    );
    assert_eq!(
        verify_rfc9421(
            &secret,
            "cb_42",
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &rewritten,
            tampered,
            TS
        ),
        Err(VerifyError::SignatureMismatch("sig1".to_owned()))
    );
}

#[test]
fn tampered_path_authority_or_method_is_refused() {
    let (secret, headers) = signed();
    let mismatch = Err(VerifyError::SignatureMismatch("sig1".to_owned()));
    for (method, authority, path) in [
        ("POST", "hooks.example.com:8443", "/switchboard/other"),
        ("POST", "hooks.example.com:8443", "/switchboard/cb/"),
        ("POST", "evil.example.com:8443", "/switchboard/cb"),
        ("POST", "hooks.example.com", "/switchboard/cb"),
        ("PUT", "hooks.example.com:8443", "/switchboard/cb"),
    ] {
        let result = verify_rfc9421(
            &secret, "cb_42", method, authority, path, &headers, BODY, TS,
        );
        assert_eq!(result, mismatch, "{method} {authority}{path}");
    }
}

#[test]
fn tampered_webhook_headers_are_refused() {
    let (secret, headers) = signed();
    for (name, value) in [
        (WEBHOOK_ID, "msg_01JD0000000000000000000001"),
        (WEBHOOK_TIMESTAMP, "1700000001"),
    ] {
        let mut tampered = headers.clone();
        tampered.insert(name, HeaderValue::from_static(value));
        assert_eq!(
            check(&tampered, TS),
            Err(VerifyError::SignatureMismatch("sig1".to_owned())),
            "{name}"
        );
        assert_eq!(
            verify(
                &secret,
                "cb_42",
                "POST",
                "hooks.example.com:8443",
                "/switchboard/cb",
                &tampered,
                BODY,
                TS
            ),
            Err(VerifyError::StandardSignatureMismatch),
            "{name}"
        );
    }
}

#[test]
fn wrong_or_tampered_keyid_is_refused() {
    let (secret, headers) = signed();
    assert_eq!(
        verify_rfc9421(
            &secret,
            "cb_43",
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &headers,
            BODY,
            TS
        ),
        Err(VerifyError::KeyidMismatch {
            expected: "cb_43".to_owned(),
            found: vec!["cb_42".to_owned()],
        })
    );
    // Rewriting keyid in Signature-Input to the expected value breaks the MAC:
    // the parameters are signed.
    let input = headers[SIGNATURE_INPUT]
        .to_str()
        .unwrap()
        .replace("cb_42", "cb_43");
    let mut tampered = headers.clone();
    tampered.insert(SIGNATURE_INPUT, HeaderValue::from_str(&input).unwrap());
    assert_eq!(
        verify_rfc9421(
            &secret,
            "cb_43",
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &tampered,
            BODY,
            TS
        ),
        Err(VerifyError::SignatureMismatch("sig1".to_owned()))
    );
}

#[test]
fn expired_or_future_signatures_are_refused() {
    let (_, headers) = signed();
    assert_eq!(
        check(&headers, TS + 301),
        Err(VerifyError::Expired {
            label: "sig1".to_owned(),
            expires: TS + 300,
            now: TS + 301,
        })
    );
    assert_eq!(
        check(&headers, TS - 301),
        Err(VerifyError::CreatedInFuture {
            label: "sig1".to_owned(),
            created: TS,
            now: TS - 301,
        })
    );
    // An explicit short expiry.
    let secret = Secret::parse(SECRET).unwrap();
    let short = to_headers(sign_with_expiry(&secret, &request(BODY), TS + 60));
    assert!(check(&short, TS + 60).is_ok());
    assert!(matches!(
        check(&short, TS + 61),
        Err(VerifyError::Expired { expires, .. }) if expires == TS + 60
    ));
    // Rewriting expires breaks the MAC.
    let input = short[SIGNATURE_INPUT]
        .to_str()
        .unwrap()
        .replace("expires=1700000060", "expires=1700009999");
    let mut extended = short.clone();
    extended.insert(SIGNATURE_INPUT, HeaderValue::from_str(&input).unwrap());
    assert_eq!(
        check(&extended, TS + 61),
        Err(VerifyError::SignatureMismatch("sig1".to_owned()))
    );
}
