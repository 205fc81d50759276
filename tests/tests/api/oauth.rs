//! Access tokens (issue 15): discovery (RFC 8414), the JWKS, the token exchange
//! grant (RFC 8693) of a static credential for an EdDSA JWT, the JWT used on the
//! API like the credential it came from (never with more), its expiry on the
//! server's clock, revocation (RFC 7009, and through its parent credential), key
//! rotation, several instances, OAuth-shaped errors, and an independent verifier
//! (PyJWT against the JWKS).

use base64::Engine as _;
use serde_json::{Value, json};
use std::time::Duration;
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::{Options, TestServer};

use crate::support::{Reply, call, send};

const EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS: &str = "urn:ietf:params:oauth:token-type:access_token";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub(crate) fn form(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// A form POST to `path` (outside `/api/v1`) with `body` as it is.
pub(crate) async fn post_raw(
    server: &TestServer,
    path: &str,
    content_type: &str,
    body: String,
) -> Reply {
    call(
        reqwest::Client::new()
            .post(format!("{}{path}", server.url))
            .header("content-type", content_type)
            .body(body),
    )
    .await
}

pub(crate) async fn post_form(server: &TestServer, path: &str, pairs: &[(&str, &str)]) -> Reply {
    post_raw(
        server,
        path,
        "application/x-www-form-urlencoded",
        form(pairs),
    )
    .await
}

/// Asks the token endpoint to exchange `token` (with `scope`, if any).
pub(crate) async fn exchange(server: &TestServer, token: &str, scope: Option<&str>) -> Reply {
    match scope {
        Some(scope) => exchange_with(server, token, &[("scope", scope)]).await,
        None => exchange_with(server, token, &[]).await,
    }
}

/// Asks the token endpoint to exchange `token`, with the `extra` parameters.
pub(crate) async fn exchange_with(
    server: &TestServer,
    token: &str,
    extra: &[(&str, &str)],
) -> Reply {
    let mut pairs = vec![
        ("grant_type", EXCHANGE),
        ("subject_token", token),
        ("subject_token_type", ACCESS),
    ];
    pairs.extend_from_slice(extra);
    post_form(server, "/oauth/token", &pairs).await
}

/// An access token for the static `token`.
async fn access_token(server: &TestServer, token: &str) -> String {
    let reply = exchange(server, token, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned()
}

/// Part `i` of a JWT (0 the header, 1 the claims), decoded without verifying.
pub(crate) fn part(jwt: &str, i: usize) -> Value {
    let text = jwt.split('.').nth(i).expect("three parts");
    serde_json::from_slice(&B64.decode(text).expect("base64url")).expect("JSON")
}

async fn get_json(url: &str) -> Value {
    let reply = call(reqwest::Client::new().get(url)).await;
    assert_eq!(reply.status, 200, "{url}: {}", reply.text());
    reply.json()
}

/// Asserts an OAuth error answer (RFC 6749 §5.2): JSON with `error` and a
/// description, kept by no cache.
#[track_caller]
pub(crate) fn oauth_error(reply: &Reply, status: u16, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.text());
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{:?}",
        reply.headers
    );
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_eq!(body["error"], error, "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

/// GET `/api/v1/{path}` with `bearer`.
pub(crate) async fn get_with(server: &TestServer, bearer: &str, path: &str) -> Reply {
    call(
        Client::new(&server.url, bearer)
            .unwrap()
            .request(Method::GET, path),
    )
    .await
}

#[tokio::test]
async fn discovery_names_this_servers_endpoints_and_keys() {
    let server = TestServer::start().await;
    let meta = get_json(&format!(
        "{}/.well-known/oauth-authorization-server",
        server.url
    ))
    .await;
    assert_eq!(meta["issuer"], server.url.as_str(), "{meta}");
    assert_eq!(
        meta["token_endpoint"],
        format!("{}/oauth/token", server.url)
    );
    assert_eq!(
        meta["revocation_endpoint"],
        format!("{}/oauth/revoke", server.url)
    );
    assert_eq!(meta["jwks_uri"], format!("{}/oauth/jwks.json", server.url));
    assert_eq!(
        meta["grant_types_supported"],
        json!([
            "authorization_code",
            "urn:ietf:params:oauth:grant-type:device_code",
            "refresh_token",
            EXCHANGE
        ])
    );
    assert_eq!(
        meta["device_authorization_endpoint"],
        format!("{}/oauth/device_authorization", server.url)
    );
    assert_eq!(
        meta["token_endpoint_auth_methods_supported"],
        json!(["none"])
    );
    let jwks = get_json(meta["jwks_uri"].as_str().unwrap()).await;
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1, "one key on a fresh server: {jwks}");
    let key = &keys[0];
    assert_eq!(
        (&key["kty"], &key["crv"], &key["alg"], &key["use"]),
        (
            &json!("OKP"),
            &json!("Ed25519"),
            &json!("EdDSA"),
            &json!("sig")
        )
    );
    assert_eq!(B64.decode(key["x"].as_str().unwrap()).unwrap().len(), 32);
    // Nothing private is published.
    assert!(key.get("d").is_none(), "{key}");
}

#[tokio::test]
async fn an_agent_exchanges_its_static_token_for_a_jwt_that_acts_as_it() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let reply = exchange(&server, &alice.token, None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["issued_token_type"], ACCESS);
    assert_eq!(body["expires_in"], 900, "15 minutes by default");
    let scope = format!("agent:{}:inbox messages:send", alice.agent_id);
    assert_eq!(body["scope"], scope.as_str());
    let jwt = body["access_token"].as_str().unwrap();

    let header = part(jwt, 0);
    assert_eq!(
        (&header["alg"], &header["typ"]),
        (&json!("EdDSA"), &json!("at+jwt"))
    );
    let jwks = get_json(&format!("{}/oauth/jwks.json", server.url)).await;
    assert!(
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["kid"] == header["kid"]),
        "the kid is published: {header} {jwks}"
    );
    let claims = part(jwt, 1);
    assert_eq!(claims["iss"], server.url.as_str());
    assert_eq!(claims["aud"], server.url.as_str());
    assert_eq!(claims["sub"], alice.agent_id.to_string());
    assert_eq!(claims["scope"], scope.as_str());
    assert!(claims["tenant"].as_str().is_some_and(|t| !t.is_empty()));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        900
    );
    assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 16));

    // It works the inbox and sends as alice.
    send(&bob, "alice", json!({"hi": 1})).await;
    let as_alice = Client::new(&server.url, jwt).unwrap();
    let page = as_alice
        .poll("alice", 0, None)
        .await
        .expect("alice's inbox");
    assert_eq!(page.events.len(), 1);
    send(&as_alice, "bob", json!({"back": 1})).await;
    // Not bob's inbox, nor the operator's API.
    get_with(&server, jwt, "agents/bob/inbox")
        .await
        .problem(404, "not_found");
    get_with(&server, jwt, "ops/agents")
        .await
        .problem(403, "forbidden");

    // An independent library verifies it against the JWKS.
    if let Some(verified) = pyjwt(&server, jwt).await {
        let verified = verified.unwrap_or_else(|e| panic!("PyJWT refused the access token:\n{e}"));
        assert_eq!(verified["claims"], claims);
        assert_eq!(verified["kid"], header["kid"]);
    }
}

/// Runs PyJWT (`verify_jwt.py`) on `jwt`, when the verifiers are installed (as
/// `cargo xtask test` does): what it printed, or why it refused.
async fn pyjwt(server: &TestServer, jwt: &str) -> Option<Result<Value, String>> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/verify_jwt.py");
    let input = json!({
        "token": jwt,
        "issuer": server.url,
        "jwks_uri": format!("{}/oauth/jwks.json", server.url),
    });
    crate::support::python_json(script, &[], &input).await
}

#[tokio::test]
async fn pyjwt_refuses_a_tampered_token() {
    // The verifier itself can fail: a token whose claims changed does not verify.
    let server = TestServer::start().await;
    if std::env::var_os("SWITCHBOARD_TEST_PYVERIFY").is_none() {
        return;
    }
    let (alice, _) = server.agent("alice").await;
    let jwt = access_token(&server, &alice.token).await;
    if let Err(e) = pyjwt(&server, &jwt).await.expect("installed") {
        panic!("PyJWT refused a good token: {e}");
    }
    let forged = with_claims(&jwt, |c| c["scope"] = json!("ops:write"));
    let refused = pyjwt(&server, &forged)
        .await
        .expect("installed")
        .expect_err("PyJWT accepted a forged token");
    assert!(refused.contains("InvalidSignatureError"), "{refused}");
}

/// `jwt` with its claims changed by `change` and its signature kept.
fn with_claims(jwt: &str, change: impl FnOnce(&mut Value)) -> String {
    let parts: Vec<&str> = jwt.split('.').collect();
    let mut claims = part(jwt, 1);
    change(&mut claims);
    format!(
        "{}.{}.{}",
        parts[0],
        B64.encode(claims.to_string()),
        parts[2]
    )
}

#[tokio::test]
async fn scopes_narrow_and_never_widen() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    server.agent("bob").await;
    let reply = exchange(&server, &alice.token, Some("messages:send messages:send")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["scope"], "messages:send");
    let jwt = reply.json()["access_token"].as_str().unwrap().to_owned();
    let sender = Client::new(&server.url, jwt.as_str()).unwrap();
    send(&sender, "bob", json!({"n": 1})).await;
    // Without the inbox scope, alice's inbox is not this token's.
    get_with(&server, &jwt, "agents/alice/inbox")
        .await
        .problem(404, "not_found");
    // A scope the static token lacks is refused, not dropped.
    oauth_error(
        &exchange(&server, &alice.token, Some("messages:send ops:write")).await,
        400,
        "invalid_scope",
    );
    // A token whose claims were widened by hand does not verify.
    let widened = with_claims(&jwt, |c| {
        c["scope"] = json!(format!("agent:{}:inbox messages:send", alice.agent_id))
    });
    let refused = get_with(&server, &widened, "agents/alice/inbox")
        .await
        .problem(401, "unauthorized");
    assert!(
        refused["detail"].as_str().unwrap().contains("signature"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_oauth_endpoints_answer_oauth_errors() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let jwt = access_token(&server, &alice.token).await;
    let token = |pairs: &[(&str, &str)]| {
        let mut all = vec![
            ("grant_type", EXCHANGE),
            ("subject_token", alice.token.as_str()),
            ("subject_token_type", ACCESS),
        ];
        for (k, v) in pairs {
            all.retain(|(name, _)| name != k);
            if !v.is_empty() {
                all.push((k, v));
            }
        }
        form(&all)
    };
    let form_type = "application/x-www-form-urlencoded";
    let cases: Vec<(String, &str, String, u16, &str)> = vec![
        (
            "a JSON body".into(),
            "application/json",
            json!({"grant_type": EXCHANGE}).to_string(),
            400,
            "invalid_request",
        ),
        (
            "no grant_type".into(),
            form_type,
            token(&[("grant_type", "")]),
            400,
            "invalid_request",
        ),
        (
            "the password grant".into(),
            form_type,
            token(&[("grant_type", "password")]),
            400,
            "unsupported_grant_type",
        ),
        (
            "no subject_token".into(),
            form_type,
            token(&[("subject_token", "")]),
            400,
            "invalid_request",
        ),
        (
            "a JWT subject type".into(),
            form_type,
            token(&[("subject_token_type", "urn:ietf:params:oauth:token-type:jwt")]),
            400,
            "invalid_request",
        ),
        (
            "a repeated parameter".into(),
            form_type,
            format!("{}&scope=messages:send&scope=messages:send", token(&[])),
            400,
            "invalid_request",
        ),
        (
            "an actor token".into(),
            form_type,
            token(&[("actor_token", "x"), ("actor_token_type", ACCESS)]),
            400,
            "invalid_request",
        ),
        (
            "an unknown token".into(),
            form_type,
            token(&[("subject_token", "sb_ag_nosuchtoken")]),
            400,
            "invalid_grant",
        ),
        (
            "a refresh token as subject".into(),
            form_type,
            token(&[("subject_token", "sb_rt_nosuchtoken")]),
            400,
            "invalid_grant",
        ),
        (
            "a malformed access token as subject".into(),
            form_type,
            token(&[("subject_token", "eyJ.not.ajwt")]),
            400,
            "invalid_grant",
        ),
        (
            "another audience".into(),
            form_type,
            token(&[("audience", "https://elsewhere.example")]),
            400,
            "invalid_target",
        ),
        (
            "a SAML token requested".into(),
            form_type,
            token(&[(
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:saml2",
            )]),
            400,
            "invalid_request",
        ),
    ];
    for (what, content_type, body, status, error) in cases {
        let reply = post_raw(&server, "/oauth/token", content_type, body).await;
        assert!(reply.status < 500, "{what}: {}", reply.text());
        if reply.json()["error"] != error {
            panic!("{what}: expected {error}, got {}", reply.text());
        }
        oauth_error(&reply, status, error);
    }
    oauth_error(
        &post_form(&server, "/oauth/revoke", &[]).await,
        400,
        "invalid_request",
    );
    oauth_error(
        &post_form(
            &server,
            "/oauth/revoke",
            &[("token", &jwt), ("token_type_hint", "id_token")],
        )
        .await,
        400,
        "unsupported_token_type",
    );
    // The exchange still works: none of that changed anything.
    access_token(&server, &alice.token).await;
}

#[tokio::test]
async fn an_access_token_expires_on_the_servers_clock() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (alice, _) = server.agent("alice").await;
    let jwt = access_token(&server, &alice.token).await;
    assert_eq!(
        get_with(&server, &jwt, "agents/alice/inbox").await.status,
        200
    );
    server.advance(Duration::from_secs(899));
    assert_eq!(
        get_with(&server, &jwt, "agents/alice/inbox").await.status,
        200
    );
    server.advance(Duration::from_secs(1));
    let expired = get_with(&server, &jwt, "agents/alice/inbox")
        .await
        .problem(401, "unauthorized");
    assert!(
        expired["detail"].as_str().unwrap().contains("expired"),
        "{expired}"
    );
    // The static token it came from still works, and gets a new one.
    let again = access_token(&server, &alice.token).await;
    assert_eq!(
        get_with(&server, &again, "agents/alice/inbox").await.status,
        200
    );
}

#[tokio::test]
async fn revocation_ends_an_access_token_and_its_parents_end_ends_them_all() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let (bob, _) = server.agent("bob").await;
    let first = access_token(&server, &alice.token).await;
    let second = access_token(&server, &alice.token).await;
    assert_eq!(
        get_with(&server, &first, "agents/alice/inbox").await.status,
        200
    );

    // RFC 7009: the holder revokes one; the other lives on.
    let revoked = post_form(&server, "/oauth/revoke", &[("token", &first)]).await;
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    assert!(revoked.body.is_empty());
    get_with(&server, &first, "agents/alice/inbox")
        .await
        .problem(401, "unauthorized");
    assert_eq!(
        get_with(&server, &second, "agents/alice/inbox")
            .await
            .status,
        200
    );
    // Revoking what is unknown or already revoked is answered 200 all the same.
    for token in [first.as_str(), "sb_ag_nosuchtoken", "eyJ.not.ajwt"] {
        let reply = post_form(&server, "/oauth/revoke", &[("token", token)]).await;
        assert_eq!(reply.status, 200, "{token}: {}", reply.text());
    }

    // Revoking the agent's credentials ends every access token issued from them.
    let third = access_token(&server, &alice.token).await;
    server.operator().revoke_agent("alice").await.unwrap();
    for jwt in [&second, &third] {
        get_with(&server, jwt, "agents/alice/inbox")
            .await
            .problem(401, "unauthorized");
    }
    oauth_error(
        &exchange(&server, &alice.token, None).await,
        400,
        "invalid_grant",
    );

    // A static token's holder may revoke it too.
    let reply = post_form(
        &server,
        "/oauth/revoke",
        &[("token", &bob.token), ("token_type_hint", "access_token")],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    get_with(&server, &bob.token, "agents/bob/inbox")
        .await
        .problem(401, "unauthorized");
}

#[tokio::test]
async fn a_token_of_another_server_or_address_or_algorithm_is_refused() {
    let server = TestServer::start().await;
    let elsewhere = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let (other_alice, _) = elsewhere.agent("alice").await;
    let jwt = access_token(&server, &alice.token).await;

    // Signed by another deployment's key.
    let foreign = access_token(&elsewhere, &other_alice.token).await;
    let refused = get_with(&server, &foreign, "agents/alice/inbox")
        .await
        .problem(401, "unauthorized");
    assert!(
        refused["detail"].as_str().unwrap().contains("kid"),
        "{refused}"
    );

    // Issued for this server's address, presented under another name.
    let reply = call(
        Client::new(&server.url, jwt.as_str())
            .unwrap()
            .request(Method::GET, "agents/alice/inbox")
            .header("host", "switchboard.example"),
    )
    .await;
    let refused = reply.problem(401, "unauthorized");
    assert!(
        refused["detail"].as_str().unwrap().contains("iss"),
        "{refused}"
    );

    // No signature (alg none), and HS256 keyed with the public key.
    let header = part(&jwt, 0);
    let claims = jwt.split('.').nth(1).unwrap();
    for alg in ["none", "HS256"] {
        let forged_header =
            B64.encode(json!({"alg": alg, "kid": header["kid"], "typ": "at+jwt"}).to_string());
        let signature = if alg == "none" {
            String::new()
        } else {
            B64.encode([0u8; 32])
        };
        let forged = format!("{forged_header}.{claims}.{signature}");
        let reply = get_with(&server, &forged, "agents/alice/inbox").await;
        reply.problem(401, "unauthorized");
    }
    assert_eq!(
        get_with(&server, &jwt, "agents/alice/inbox").await.status,
        200
    );
}

#[tokio::test]
async fn signing_keys_rotate_and_a_replaced_key_stays_published_while_its_tokens_live() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (alice, _) = server.agent("alice").await;
    let kids = || async {
        get_json(&format!("{}/oauth/jwks.json", server.url)).await["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let first = kids().await;
    assert_eq!(first.len(), 1);
    // Ten minutes before the rotation (7 days by default) is due.
    server.advance(Duration::from_secs(7 * 24 * 3600 - 600));
    server.tick().await;
    assert_eq!(kids().await, first, "not due yet");
    let old = access_token(&server, &alice.token).await;
    assert_eq!(part(&old, 0)["kid"], first[0].as_str());

    server.advance(Duration::from_secs(600));
    server.tick().await;
    let both = kids().await;
    assert_eq!(both.len(), 2, "{both:?}");
    assert_eq!(both[0], first[0], "the old key is still published");
    let new = access_token(&server, &alice.token).await;
    assert_eq!(part(&new, 0)["kid"], both[1].as_str(), "the new key signs");
    for jwt in [&old, &new] {
        assert_eq!(
            get_with(&server, jwt, "agents/alice/inbox").await.status,
            200
        );
    }

    // 35 minutes after its successor, every token the old key signed has expired
    // and the key is gone.
    server.advance(Duration::from_secs(35 * 60));
    server.tick().await;
    assert_eq!(kids().await, [both[1].clone()]);
    let newest = access_token(&server, &alice.token).await;
    assert_eq!(
        get_with(&server, &newest, "agents/alice/inbox")
            .await
            .status,
        200
    );
}

/// On PostgreSQL and MariaDB: a token one instance issued works on another, also
/// when it was signed by a key made after the other started (it reloads the keys
/// for the unknown `kid`), and a revocation through one instance reaches the other
/// within the token cache's 2 s.
#[tokio::test]
async fn a_token_works_on_every_instance_and_its_revocation_reaches_them_within_2_s() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    if !server.backend().shared() {
        return; // one process owns a SQLite file
    }
    let other = server
        .another_instance(Options {
            manual_clock: true,
            ..Options::default()
        })
        .await;
    let (alice, _) = server.agent("alice").await;
    // A new key on the first instance, made after the other started.
    for s in [&server, &other] {
        s.advance(Duration::from_secs(7 * 24 * 3600));
    }
    server.tick().await;
    let jwt = access_token(&server, &alice.token).await;
    // The issuer is the address the client uses: one for the team.
    let team_host = server.url.trim_start_matches("http://").to_owned();
    let on_other = async |jwt: &str| {
        call(
            Client::new(&other.url, jwt)
                .unwrap()
                .request(Method::GET, "agents/alice/inbox")
                .header("host", team_host.as_str()),
        )
        .await
    };
    assert_eq!(
        on_other(&jwt).await.status,
        200,
        "the other instance knows the new key"
    );

    let revoked = post_form(&server, "/oauth/revoke", &[("token", &jwt)]).await;
    assert_eq!(revoked.status, 200);
    other.advance(Duration::from_millis(1_900));
    assert_eq!(
        on_other(&jwt).await.status,
        200,
        "within the TTL the other instance still has it cached"
    );
    other.advance(Duration::from_millis(100));
    on_other(&jwt).await.problem(401, "unauthorized");
}

/// The access tokens of one subject share one bucket (a client cannot multiply
/// its rate by asking for more tokens), apart from its static token's, which the
/// token endpoint spends.
#[tokio::test]
async fn the_access_tokens_of_one_subject_share_one_bucket() {
    let server = TestServer::with(Options {
        manual_clock: true,
        rate_limit: Some(switchboard_tests::server::config::RateLimit {
            per_second: 1.0,
            burst: 4,
        }),
        tenant_rate_limit: Some(switchboard_tests::server::config::RateLimit::OFF),
        ..Options::default()
    })
    .await;
    let (alice, _) = server.agent("alice").await;
    let first = access_token(&server, &alice.token).await;
    let second = access_token(&server, &alice.token).await;
    for jwt in [&first, &second, &first, &second] {
        assert_eq!(
            get_with(&server, jwt, "agents/alice/inbox").await.status,
            200
        );
    }
    get_with(&server, &second, "agents/alice/inbox")
        .await
        .problem(429, "rate_limited");
    // The static token's bucket is its own: two exchanges spent two of four.
    assert_eq!(
        get_with(&server, &alice.token, "agents/alice/inbox")
            .await
            .status,
        200
    );
    access_token(&server, &alice.token).await;
    let refused = exchange(&server, &alice.token, None).await;
    oauth_error(&refused, 429, "rate_limited");
    assert_eq!(refused.header("retry-after"), Some("1"));
}
