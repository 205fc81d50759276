//! RFC 9421 signature headers a receiver must refuse, or accept: missing covered
//! components, other parameter orders, malformed parameters, duplicate or unknown
//! components, several signatures; and `try_sign`'s checks.

mod signing;
use signing::*;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderValue};
use switchboard_webhook::rfc9421::{
    COVERED_COMPONENTS, RequestView, sign_signature_base, signature_base,
};
use switchboard_webhook::{
    CONTENT_DIGEST, Outgoing, SIGNATURE, SIGNATURE_INPUT, Secret, SignError, VerifyError, sign,
    try_sign, verify_rfc9421,
};

/// Replaces `sig1` with a correctly MACed signature over `components` and
/// `params_tail` (everything after the inner list), as a signer that made other
/// choices would.
fn resign(headers: &HeaderMap, components: &[&str], params_tail: &str) -> HeaderMap {
    let secret = Secret::parse(SECRET).unwrap();
    let view = RequestView {
        method: "POST",
        authority: "hooks.example.com:8443",
        path: "/switchboard/cb",
        headers,
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
    let list: Vec<String> = components.iter().map(|c| format!("\"{c}\"")).collect();
    let params = format!("({}){params_tail}", list.join(" "));
    let signature = sign_signature_base(&secret, &signature_base(&lines, &params));
    let mut out = headers.clone();
    out.insert(
        SIGNATURE_INPUT,
        HeaderValue::from_str(&format!("sig1={params}")).unwrap(),
    );
    out.insert(
        SIGNATURE,
        HeaderValue::from_str(&format!("sig1=:{signature}:")).unwrap(),
    );
    out
}

const TAIL: &str = r#";created=1700000000;expires=1700000300;keyid="cb_42";alg="hmac-sha256""#;

#[test]
fn a_missing_covered_component_is_refused_even_when_the_mac_is_right() {
    let (_, headers) = signed();
    for missing in COVERED_COMPONENTS {
        let components: Vec<&str> = COVERED_COMPONENTS
            .iter()
            .copied()
            .filter(|c| *c != missing)
            .collect();
        let resigned = resign(&headers, &components, TAIL);
        assert_eq!(
            check(&resigned, TS),
            Err(VerifyError::MissingCoveredComponent {
                label: "sig1".to_owned(),
                component: missing,
            })
        );
    }
    // Sanity: the same helper with the full list verifies.
    assert!(check(&resign(&headers, &COVERED_COMPONENTS, TAIL), TS).is_ok());
}

#[test]
fn extra_components_and_other_parameter_orders_are_accepted() {
    let (_, mut headers) = signed();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    let mut components = COVERED_COMPONENTS.to_vec();
    components.insert(0, "content-type");
    components.reverse();
    // keyid first, alg absent, a nonce and a tag: the base uses the received
    // serialization, not a fixed order.
    let tail =
        r#";keyid="cb_42";nonce="n-1";expires=1700000300;created=1700000000;tag="switchboard""#;
    assert!(check(&resign(&headers, &components, tail), TS).is_ok());
}

#[test]
fn malformed_signature_parameters_are_refused() {
    let (_, headers) = signed();
    let label = || "sig1".to_owned();
    let cases: [(&str, VerifyError); 5] = [
        (
            r#";created=1700000000;expires=1700000300;keyid="cb_42";alg="ed25519""#,
            VerifyError::UnsupportedAlgorithm {
                label: label(),
                alg: "\"ed25519\"".to_owned(),
            },
        ),
        (
            r#";expires=1700000300;keyid="cb_42""#,
            VerifyError::MissingParameter {
                label: label(),
                param: "created",
            },
        ),
        (
            r#";created=1700000000;keyid="cb_42""#,
            VerifyError::MissingParameter {
                label: label(),
                param: "expires",
            },
        ),
        (
            r#";created="1700000000";expires=1700000300;keyid="cb_42""#,
            VerifyError::InvalidParameter {
                label: label(),
                param: "created",
                expected: "an integer",
            },
        ),
        (
            r#";created=1700000000;expires=1700000300.5;keyid="cb_42""#,
            VerifyError::InvalidParameter {
                label: label(),
                param: "expires",
                expected: "an integer",
            },
        ),
    ];
    for (tail, expected) in cases {
        assert_eq!(
            check(&resign(&headers, &COVERED_COMPONENTS, tail), TS),
            Err(expected),
            "{tail}"
        );
    }
}

#[test]
fn duplicate_or_unsupported_components_are_refused() {
    let (_, headers) = signed();
    let mut input = headers[SIGNATURE_INPUT].to_str().unwrap().to_owned();
    input = input.replace("(\"@method\"", "(\"@method\" \"@method\"");
    let mut duplicated = headers.clone();
    duplicated.insert(SIGNATURE_INPUT, HeaderValue::from_str(&input).unwrap());
    assert_eq!(
        check(&duplicated, TS),
        Err(VerifyError::DuplicateComponent("\"@method\"".to_owned()))
    );

    for (extra, shown) in [
        ("\"@query\"", "\"@query\""),
        ("\"content-type\";sf", "\"content-type\";sf"),
        ("\"webhook-id\";bs", "\"webhook-id\";bs"),
    ] {
        let input = headers[SIGNATURE_INPUT]
            .to_str()
            .unwrap()
            .replace("(\"@method\"", &format!("({extra} \"@method\""));
        let mut unsupported = headers.clone();
        unsupported.insert(SIGNATURE_INPUT, HeaderValue::from_str(&input).unwrap());
        assert_eq!(
            check(&unsupported, TS),
            Err(VerifyError::UnsupportedComponent(shown.to_owned()))
        );
    }
}

#[test]
fn missing_or_malformed_signature_headers_are_refused() {
    let (_, headers) = signed();
    for name in [SIGNATURE_INPUT, SIGNATURE] {
        let mut missing = headers.clone();
        missing.remove(name);
        assert_eq!(
            check(&missing, TS),
            Err(VerifyError::MissingHeader(name.to_owned()))
        );
    }
    let mut no_digest = headers.clone();
    no_digest.remove(CONTENT_DIGEST);
    assert_eq!(
        check(&no_digest, TS),
        Err(VerifyError::MissingHeader(CONTENT_DIGEST.to_owned()))
    );

    let mut renamed = headers.clone();
    let signature = headers[SIGNATURE]
        .to_str()
        .unwrap()
        .replace("sig1=", "sig2=");
    renamed.insert(SIGNATURE, HeaderValue::from_str(&signature).unwrap());
    assert_eq!(
        check(&renamed, TS),
        Err(VerifyError::MissingSignatureLabel("sig1".to_owned()))
    );

    let mut garbled = headers.clone();
    garbled.insert(
        SIGNATURE_INPUT,
        HeaderValue::from_static("sig1=(\"@method\""),
    );
    assert!(matches!(
        check(&garbled, TS),
        Err(VerifyError::InvalidHeader { header, .. }) if header == SIGNATURE_INPUT
    ));

    let mut flipped = headers.clone();
    let mut tag = STANDARD
        .decode(
            headers[SIGNATURE]
                .to_str()
                .unwrap()
                .trim_start_matches("sig1=:")
                .trim_end_matches(':'),
        )
        .unwrap();
    tag[0] ^= 1;
    flipped.insert(
        SIGNATURE,
        HeaderValue::from_str(&format!("sig1=:{}:", STANDARD.encode(tag))).unwrap(),
    );
    assert_eq!(
        check(&flipped, TS),
        Err(VerifyError::SignatureMismatch("sig1".to_owned()))
    );
}

#[test]
fn another_signature_with_another_keyid_is_skipped() {
    let (_, headers) = signed();
    let input = format!(
        r#"proxy=("@method");created=1700000000;keyid="proxy-key", {}"#,
        headers[SIGNATURE_INPUT].to_str().unwrap()
    );
    let signature = format!("proxy=:AAAA:, {}", headers[SIGNATURE].to_str().unwrap());
    let mut both = headers.clone();
    both.insert(SIGNATURE_INPUT, HeaderValue::from_str(&input).unwrap());
    both.insert(SIGNATURE, HeaderValue::from_str(&signature).unwrap());
    assert!(check(&both, TS).is_ok());
}

#[test]
fn try_sign_checks_its_input() {
    let secret = Secret::parse(SECRET).unwrap();
    assert_eq!(
        try_sign(&secret, &request(BODY)).unwrap(),
        sign(&secret, &request(BODY))
    );
    fn refused(result: Result<Vec<(&'static str, String)>, SignError>, field: &'static str) {
        assert!(
            matches!(result, Err(SignError::InvalidInput { field: f, .. }) if f == field),
            "{field}"
        );
    }
    let base = request(BODY);
    refused(
        try_sign(
            &secret,
            &Outgoing {
                method: "PO ST",
                ..base
            },
        ),
        "method",
    );
    refused(
        try_sign(
            &secret,
            &Outgoing {
                authority: "",
                ..base
            },
        ),
        "authority",
    );
    refused(try_sign(&secret, &Outgoing { path: "cb", ..base }), "path");
    refused(
        try_sign(
            &secret,
            &Outgoing {
                webhook_id: "msg 1",
                ..base
            },
        ),
        "webhook_id",
    );
    refused(
        try_sign(
            &secret,
            &Outgoing {
                keyid: "cb_\u{e9}",
                ..base
            },
        ),
        "keyid",
    );
    refused(
        try_sign(
            &secret,
            &Outgoing {
                timestamp: -1,
                ..base
            },
        ),
        "timestamp",
    );
    // A keyid with quotes and backslashes is escaped, and still verifies.
    let odd = Outgoing {
        keyid: r#"cb "4\2""#,
        ..request(BODY)
    };
    let headers = to_headers(try_sign(&secret, &odd).unwrap());
    assert!(
        verify_rfc9421(
            &secret,
            r#"cb "4\2""#,
            "POST",
            "hooks.example.com:8443",
            "/switchboard/cb",
            &headers,
            BODY,
            TS
        )
        .is_ok()
    );
}
