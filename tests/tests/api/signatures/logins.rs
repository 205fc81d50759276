//! A device login with a key (issue 39): every access token of the login is bound
//! to it (`cnf.jkt`), so the token alone is refused; the SDK, holding the key, signs
//! and keeps working through a rotation (its renewed token bound to the new key);
//! a refresh cannot bind another key; and ending the login ends its keys.

use std::sync::Arc;

use serde_json::json;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::login::{DeviceLogin, MemoryRefreshStore};
use switchboard_tests::sdk::proto::ClaimRequest;
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::sdk::signing::SigningKey;

use crate::oauth::{get_with, oauth_error, part, post_form};
use crate::support::{call, send};

/// A device login of agent `name` presenting `key`, approved by the operator: its
/// first refresh token.
async fn device_login(server: &TestServer, name: &str, key: &SigningKey) -> String {
    let http = switchboard_tests::sdk::reqwest::Client::new();
    let login = DeviceLogin::start(&http, &server.url, "sig-test", name, None)
        .await
        .expect("device login")
        .with_signing_key(&key.public_key());
    let approved = call(server.operator().request(
        Method::POST,
        &format!("ops/device-requests/{}/approve", login.user_code),
    ))
    .await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    login
        .wait(&http)
        .await
        .expect("approved")
        .expose()
        .to_owned()
}

async fn refresh(
    server: &TestServer,
    token: &str,
    extra: &[(&str, &str)],
) -> crate::support::Reply {
    let mut pairs = vec![("grant_type", "refresh_token"), ("refresh_token", token)];
    pairs.extend_from_slice(extra);
    post_form(server, "/oauth/token", &pairs).await
}

#[tokio::test]
async fn a_device_logins_tokens_are_bound_to_its_key_until_the_login_ends() {
    let server = TestServer::start().await;
    let key = SigningKey::generate();
    let first = device_login(&server, "lena", &key).await;

    // A refresh cannot bind another key (a thief's); nothing was spent by asking.
    let other = serde_json::to_string(&SigningKey::generate().public_key().to_jwk()).unwrap();
    oauth_error(
        &refresh(&server, &first, &[("signing_key", &other)]).await,
        400,
        "invalid_request",
    );
    let answer = refresh(&server, &first, &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let tokens = answer.json();
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(part(access, 1)["cnf"]["jkt"], key.public_key().thumbprint());
    // Stolen, the access token alone does nothing.
    get_with(&server, access, "agents/lena/inbox")
        .await
        .problem(401, "signature_required");

    // The SDK with the key signs, renews, and rotates the key while it works.
    let store = Arc::new(MemoryRefreshStore::new(
        tokens["refresh_token"].as_str().unwrap().into(),
    ));
    let lena = Client::builder()
        .signing_key(Some(key.clone()))
        .build_with_login(&server.url, store)
        .expect("client");
    let op = server.operator();
    send(&op, "lena", json!({"n": 1})).await;
    let one = ClaimRequest {
        limit: Some(1),
        ..ClaimRequest::default()
    };
    let claimed = lena.claim("lena", &one).await.expect("a signed claim");
    let rotated = lena.rotate_key().await.expect("a rotation");
    assert_ne!(rotated.public_key(), key.public_key());
    let event = &claimed.events[0];
    lena.ack("lena", event.event.event_id, event.claim_token)
        .await
        .expect("an ack signed by the new key, with a token bound to it");
    let keys = lena.keys().await.unwrap();
    assert_eq!(keys.len(), 1, "the old key is revoked");
    assert_eq!(keys[0].jkt, rotated.public_key().thumbprint());
    // The old access token named the old key: refused even when signed by it.
    let mut stale = super::Signed::new(&server, access, &key, "agents/lena/inbox");
    stale.method = Method::GET;
    stale.send().await.problem(401, "signature_invalid");

    // Revoking the login's approver ends the login, and its keys with it.
    let overview = op.signatures().await.unwrap();
    let row = overview.agents.iter().find(|a| a.name == "lena").unwrap();
    assert_eq!(row.keys.len(), 1);
    assert_eq!(row.keys[0].credential, "device login: lena");
    let credentials = op.tokens().await.unwrap();
    let login = credentials
        .iter()
        .find(|c| c.label == "device login: lena")
        .unwrap();
    op.revoke_token(&login.token_id).await.unwrap();
    let overview = op.signatures().await.unwrap();
    let row = overview.agents.iter().find(|a| a.name == "lena").unwrap();
    assert!(row.keys.is_empty(), "{row:?}");
    assert!(lena.claim("lena", &one).await.is_err(), "the login ended");
}
