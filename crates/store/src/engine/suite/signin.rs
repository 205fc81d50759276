//! Authorization codes' statements: a code is redeemed once, by its client, its
//! redirect URI and its verifier, before it expires; every attempt spends it; the
//! redemption makes the sign-in's credential with the code's scopes and its first
//! tokens; a second redemption revokes that credential; expired codes are
//! forgotten.

use super::note;
use crate::*;

/// RFC 7636 Appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:49152/callback";

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("signin", 1).await.unwrap();
    let scopes = vec!["ops:read".to_owned(), "ops:write".to_owned()];
    let code = |hash: &'static [u8], expires_at| NewAuthorizationCode {
        code_hash: hash,
        tenant,
        client_id: "desktop",
        redirect_uri: REDIRECT,
        code_challenge: CHALLENGE,
        scopes: &scopes,
        granted_by: "0123456789abcdef",
        parent_hash: &[0x5a; 32],
        created_at: 100,
        expires_at,
    };
    let redeem = |hash: &'static [u8], verifier: &'static str, family: &'static [u8]| Redemption {
        code_hash: hash,
        client_id: "desktop",
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        family_hash: family,
    };
    let issue = |refresh: &'static [u8], jti: &'static str| Issue {
        refresh_hash: refresh,
        jti,
        expires_at: 10_000,
        key: None,
    };

    // Unknown.
    let unknown = d
        .redeem_authorization_code(
            &redeem(&[0xc0; 32], VERIFIER, &[0xf0; 32]),
            200,
            &issue(&[0xe0; 32], "s0"),
        )
        .await
        .unwrap();
    assert!(matches!(unknown, Redeemed::Unknown), "{unknown:?}");

    // A wrong verifier spends the code.
    d.insert_authorization_code(&code(&[0xc1; 32], 1_000), &note())
        .await
        .unwrap();
    let wrong = d
        .redeem_authorization_code(
            &redeem(&[0xc1; 32], CHALLENGE, &[0xf1; 32]),
            200,
            &issue(&[0xe1; 32], "s1"),
        )
        .await
        .unwrap();
    assert!(matches!(wrong, Redeemed::Mismatch), "{wrong:?}");
    let after = d
        .redeem_authorization_code(
            &redeem(&[0xc1; 32], VERIFIER, &[0xf1; 32]),
            200,
            &issue(&[0xe1; 32], "s1"),
        )
        .await
        .unwrap();
    assert!(matches!(after, Redeemed::Reused), "{after:?}");

    // Expired (at its expiry).
    d.insert_authorization_code(&code(&[0xc2; 32], 1_000), &note())
        .await
        .unwrap();
    let late = d
        .redeem_authorization_code(
            &redeem(&[0xc2; 32], VERIFIER, &[0xf2; 32]),
            1_000,
            &issue(&[0xe2; 32], "s2"),
        )
        .await
        .unwrap();
    assert!(matches!(late, Redeemed::Expired), "{late:?}");

    // Redeemed: the sign-in's credential with the code's scopes, its tokens live.
    d.insert_authorization_code(&code(&[0xc3; 32], 1_000), &note())
        .await
        .unwrap();
    let issued = d
        .redeem_authorization_code(
            &redeem(&[0xc3; 32], VERIFIER, &[0xf3; 32]),
            200,
            &issue(&[0xe3; 32], "s3"),
        )
        .await
        .unwrap();
    let Redeemed::Issued(grant) = issued else {
        panic!("{issued:?}");
    };
    assert_eq!(grant.parent_hash, vec![0xf3; 32]);
    assert_eq!(grant.record.tenant_id, tenant);
    assert_eq!(grant.record.agent_id, None);
    assert_eq!(grant.record.scopes, scopes);
    assert!(d.access_token("s3", 300).await.unwrap().is_some());
    assert!(d.token(&[0xf3; 32]).await.unwrap().is_some());
    // Again: the sign-in is revoked, its access token with it.
    let again = d
        .redeem_authorization_code(
            &redeem(&[0xc3; 32], VERIFIER, &[0xf4; 32]),
            300,
            &issue(&[0xe4; 32], "s4"),
        )
        .await
        .unwrap();
    assert!(matches!(again, Redeemed::Reused), "{again:?}");
    assert!(d.token(&[0xf3; 32]).await.unwrap().is_none());
    assert!(d.access_token("s3", 300).await.unwrap().is_none());

    // Forgotten once expired.
    assert_eq!(d.forget_authorization_codes(1_000).await.unwrap(), 0);
    assert_eq!(d.forget_authorization_codes(1_001).await.unwrap(), 3);
}
