//! Agents' Ed25519 keys: RFC 8037's example key and its RFC 7638 thumbprint
//! (appendices A.1 and A.3), the JWK's refusals, and the public key's checks.

use switchboard_webhook::agent::{Jwk, KeyError, PublicKey, SigningKey};

/// RFC 8037 appendix A.1: the example key's `d` and `x`.
const RFC8037_D: &str = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
const RFC8037_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
/// RFC 8037 appendix A.3: its JWK thumbprint.
const RFC8037_THUMBPRINT: &str = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k";

fn unb64url(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .unwrap()
}

fn jwk(json: &str) -> Jwk {
    serde_json::from_str(json).unwrap()
}

#[test]
fn rfc_8037_key_and_thumbprint() {
    let secret: [u8; 32] = unb64url(RFC8037_D).try_into().unwrap();
    let key = SigningKey::from_bytes(&secret);
    assert_eq!(key.to_bytes(), secret);
    let public = key.public_key();
    assert_eq!(public.as_bytes().as_slice(), unb64url(RFC8037_X));
    assert_eq!(public.thumbprint(), RFC8037_THUMBPRINT);

    let jwk = public.to_jwk();
    assert_eq!(
        serde_json::to_string(&jwk).unwrap(),
        format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{RFC8037_X}"}}"#)
    );
    assert_eq!(PublicKey::from_jwk(&jwk), Ok(public.clone()));
    // Members outside the thumbprint's input change neither the key nor it.
    let with_kid = self::jwk(&format!(
        r#"{{"kid":"k1","use":"sig","x":"{RFC8037_X}","crv":"Ed25519","kty":"OKP"}}"#
    ));
    let parsed = PublicKey::from_jwk(&with_kid).unwrap();
    assert_eq!(parsed, public);
    assert_eq!(parsed.thumbprint(), RFC8037_THUMBPRINT);
    // The thumbprint depends on x.
    assert_ne!(
        SigningKey::generate().public_key().thumbprint(),
        RFC8037_THUMBPRINT
    );
}

#[test]
fn debug_never_prints_the_secret() {
    let secret: [u8; 32] = unb64url(RFC8037_D).try_into().unwrap();
    let shown = format!("{:?}", SigningKey::from_bytes(&secret));
    assert_eq!(shown, format!("SigningKey(public {RFC8037_THUMBPRINT})"));
    assert!(!shown.contains(RFC8037_D));
}

#[test]
fn generated_keys_differ_and_round_trip() {
    let a = SigningKey::generate();
    let b = SigningKey::generate();
    assert_ne!(a.to_bytes(), b.to_bytes());
    let again = SigningKey::from_bytes(&a.to_bytes());
    assert_eq!(again.public_key(), a.public_key());
    let public = a.public_key();
    assert_eq!(PublicKey::from_bytes(public.as_bytes()), Ok(public.clone()));
    assert_eq!(PublicKey::from_jwk(&public.to_jwk()), Ok(public));
}

#[test]
fn a_private_jwk_is_refused() {
    let private = jwk(&format!(
        r#"{{"kty":"OKP","crv":"Ed25519","d":"{RFC8037_D}","x":"{RFC8037_X}"}}"#
    ));
    assert!(private.has_private_key);
    let error = PublicKey::from_jwk(&private).unwrap_err();
    assert_eq!(error, KeyError::PrivateJwk);
    assert!(error.to_string().contains("private key"), "{error}");
    assert!(!format!("{private:?}").contains(RFC8037_D), "d is not kept");
    // Whatever d's value, its presence is what counts.
    let null_d = jwk(&format!(
        r#"{{"kty":"OKP","crv":"Ed25519","x":"{RFC8037_X}","d":null}}"#
    ));
    assert_eq!(PublicKey::from_jwk(&null_d), Err(KeyError::PrivateJwk));
}

#[test]
fn other_jwks_are_refused_with_the_reason() {
    let refused = |json: &str| PublicKey::from_jwk(&jwk(json)).unwrap_err();
    assert_eq!(
        refused(&format!(
            r#"{{"kty":"OKP","crv":"X25519","x":"{RFC8037_X}"}}"#
        )),
        KeyError::UnsupportedJwk {
            kty: "OKP".to_owned(),
            crv: "X25519".to_owned()
        }
    );
    assert!(matches!(
        refused(&format!(
            r#"{{"kty":"EC","crv":"Ed25519","x":"{RFC8037_X}"}}"#
        )),
        KeyError::UnsupportedJwk { .. }
    ));
    for (x, reason) in [
        (format!("{RFC8037_X}="), "padding"),
        (RFC8037_X.replace('_', "/"), "outside"),
        (RFC8037_X[..42].to_owned(), "bits set"),
        (RFC8037_X[..41].to_owned(), "number of characters"),
    ] {
        let error = refused(&format!(r#"{{"kty":"OKP","crv":"Ed25519","x":"{x}"}}"#));
        assert!(
            matches!(error, KeyError::InvalidX(why) if why.contains(reason)),
            "{x}: {error}"
        );
    }
    // Valid base64url of the wrong length.
    assert_eq!(
        refused(r#"{"kty":"OKP","crv":"Ed25519","x":"AAAA"}"#),
        KeyError::InvalidLength(3)
    );
    // A JWK without x is not a JWK at all.
    assert!(serde_json::from_str::<Jwk>(r#"{"kty":"OKP","crv":"Ed25519"}"#).is_err());
}

#[test]
fn public_key_bytes_are_checked() {
    assert_eq!(
        PublicKey::from_bytes(&[7; 31]),
        Err(KeyError::InvalidLength(31))
    );
    // y = 2: (y² - 1) / (d·y² + 1) is not a square mod 2^255 - 19, so no point.
    let mut not_a_point = [0_u8; 32];
    not_a_point[0] = 2;
    assert_eq!(
        PublicKey::from_bytes(&not_a_point),
        Err(KeyError::NotAPoint)
    );
    // y = 1 is the identity, a small-order point: any signature would verify.
    let mut identity = [0_u8; 32];
    identity[0] = 1;
    assert_eq!(PublicKey::from_bytes(&identity), Err(KeyError::WeakKey));
    // And a real key is accepted.
    let good = SigningKey::generate().public_key();
    assert_eq!(PublicKey::from_bytes(good.as_bytes()), Ok(good));
}
