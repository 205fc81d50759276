//! Secret parsing and redaction, and the registration challenge.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use switchboard_webhook::{
    CHALLENGE_TYPE, Secret, SecretError, challenge_response, verify_challenge_response,
};

fn whsec(len: usize) -> String {
    let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    format!("whsec_{}", STANDARD.encode(bytes))
}

#[test]
fn good_secrets_parse_and_round_trip() {
    for text in [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
        &whsec(24),
        &whsec(32),
        &whsec(64),
    ] {
        let secret: Secret = text.parse().unwrap();
        assert_eq!(secret.to_whsec(), text);
    }
}

#[test]
fn wrong_lengths_are_refused() {
    assert_eq!(
        Secret::parse(&whsec(23)).unwrap_err(),
        SecretError::InvalidLength(23)
    );
    assert_eq!(
        Secret::parse(&whsec(65)).unwrap_err(),
        SecretError::InvalidLength(65)
    );
    assert_eq!(
        Secret::parse("whsec_").unwrap_err(),
        SecretError::InvalidLength(0)
    );
    assert_eq!(
        Secret::from_bytes(&[0; 23]).unwrap_err(),
        SecretError::InvalidLength(23)
    );
    assert_eq!(
        Secret::from_bytes(&[0; 65]).unwrap_err(),
        SecretError::InvalidLength(65)
    );
    assert_eq!(
        SecretError::InvalidLength(23).to_string(),
        "a webhook secret must decode to 24 to 64 bytes, this one has 23"
    );
}

#[test]
fn a_missing_prefix_is_refused() {
    for text in [
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "",
    ] {
        assert_eq!(
            Secret::parse(text).unwrap_err(),
            SecretError::MissingPrefix,
            "{text}"
        );
    }
}

#[test]
fn bad_base64_is_refused_without_echoing_it() {
    for text in [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w", // a character outside the alphabet
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",  // unpadded
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=", // stray padding
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwBr==", // trailing bits set (canonical: Bg==)
        "whsec_MfKQ9r8GKYqrTwjU_D8ILPZIo2LaLaSw", // URL-safe alphabet
        "whsec_MfKQ9r8GKYqrTwjU PD8ILPZIo2LaLaSw", // a space
    ] {
        let error = Secret::parse(text).unwrap_err();
        assert!(
            matches!(error, SecretError::InvalidBase64(_)),
            "{text}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            !message.contains("MfKQ") && !message.contains('!'),
            "{message}"
        );
    }
}

#[test]
fn debug_does_not_show_the_bytes() {
    let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    assert_eq!(format!("{secret:?}"), "Secret(..)");
    assert_eq!(format!("{secret:#?}"), "Secret(..)");
    let wrapped = format!("{:?}", Some(&secret));
    assert!(
        !wrapped.contains("MfKQ") && !wrapped.contains("31f290f6"),
        "{wrapped}"
    );
}

#[test]
fn generated_secrets_are_32_random_bytes() {
    let a = Secret::generate();
    let b = Secret::generate();
    let decoded = STANDARD
        .decode(a.to_whsec().strip_prefix("whsec_").unwrap())
        .unwrap();
    assert_eq!(decoded.len(), 32);
    assert_ne!(a.to_whsec(), b.to_whsec());
    // The text form parses back to the same key.
    let again = Secret::parse(&a.to_whsec()).unwrap();
    assert_eq!(challenge_response(&a, "c"), challenge_response(&again, "c"));
}

#[test]
fn challenge_response_matches_an_independent_hmac() {
    // Computed with Python: base64(hmac.new(b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    // b"chl_9wQd3kX2pLr7", sha256).digest()).
    let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let expected = "QHY5nbl4VvfgIxCOByqUMAM5WyZupmEm7GJ3gzO3akk=";
    assert_eq!(challenge_response(&secret, "chl_9wQd3kX2pLr7"), expected);
    assert!(verify_challenge_response(
        &secret,
        "chl_9wQd3kX2pLr7",
        expected
    ));
    assert_eq!(CHALLENGE_TYPE, "callback.challenge");
}

#[test]
fn wrong_challenge_responses_are_refused() {
    let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let right = challenge_response(&secret, "chl_9wQd3kX2pLr7");
    assert!(!verify_challenge_response(
        &secret,
        "chl_9wQd3kX2pLr8",
        &right
    ));
    assert!(!verify_challenge_response(
        &Secret::generate(),
        "chl_9wQd3kX2pLr7",
        &right
    ));
    let mut tag = STANDARD.decode(&right).unwrap();
    tag[31] ^= 0x80;
    assert!(!verify_challenge_response(
        &secret,
        "chl_9wQd3kX2pLr7",
        &STANDARD.encode(&tag)
    ));
    assert!(!verify_challenge_response(
        &secret,
        "chl_9wQd3kX2pLr7",
        &STANDARD.encode(&tag[..31])
    ));
    assert!(!verify_challenge_response(
        &secret,
        "chl_9wQd3kX2pLr7",
        "not base64!"
    ));
    assert!(!verify_challenge_response(&secret, "chl_9wQd3kX2pLr7", ""));
}
