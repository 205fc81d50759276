//! Sign-in of a native app (issue 15): the authorization code grant with PKCE
//! (RFC 6749 §4.1, RFC 7636 S256) and a loopback redirect (RFC 8252), driven by the
//! SDK's `SignIn` (the desktop's own code) against a real server; the consent is
//! the operator's API call the console page makes (the page itself is driven in
//! Chromium by `tests/browser`). A code is bound to its client, redirect URI and
//! challenge, lives a minute, is redeemed once, and a second redemption ends the
//! sign-in it made.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_tests::sdk::login::MemoryRefreshStore;
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::sdk::signin::SignIn;
use switchboard_tests::sdk::{Client, Token};
use switchboard_tests::{Options, TestServer};

use crate::oauth::{get_with, oauth_error, part, post_form};
use crate::support::{Reply, call};

/// The shared PKCE vector (RFC 7636 Appendix B), as the server's unit test reads it.
const VECTORS: &str = include_str!("../../../crates/store/src/vectors/oauth_pkce_device_flow.json");
const REDIRECT: &str = "http://127.0.0.1:49152/callback";
const CLIENT: &str = "switchboard-desktop";

fn pkce_vector() -> (String, String) {
    let v: Value = serde_json::from_str(VECTORS).unwrap();
    let v = &v["pkce_rfc7636"];
    (
        v["code_verifier"].as_str().unwrap().to_owned(),
        v["code_challenge"].as_str().unwrap().to_owned(),
    )
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Opens the one-time console link `path`: the session cookie it sets.
async fn open_link(server: &TestServer, path: &str) -> String {
    let opened = no_redirects()
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 303);
    opened.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

/// An authorization request's query for `challenge` (and `extra` pairs).
fn request_query(challenge: &str, extra: &[(&str, &str)]) -> String {
    let mut pairs = vec![
        ("response_type", "code"),
        ("client_id", CLIENT),
        ("redirect_uri", REDIRECT),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "s-1"),
    ];
    pairs.extend_from_slice(extra);
    crate::oauth::form(&pairs)
}

/// The consent page's call: allow or deny the request `query` as `op`.
async fn consent(server: &TestServer, op: &str, query: &str, allow: bool) -> Reply {
    let client = Client::new(&server.url, op).unwrap();
    call(
        client
            .request(Method::POST, "ops/authorizations")
            .json(&json!({"request": query, "allow": allow})),
    )
    .await
}

/// Allows `query` as the default operator: the code the redirect carries.
async fn code_for(server: &TestServer, query: &str) -> String {
    let reply = consent(server, &server.operator_token, query, true).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let to = url::Url::parse(reply.json()["redirect_to"].as_str().unwrap()).unwrap();
    assert!(to.as_str().starts_with(REDIRECT), "{to}");
    let pairs: Vec<(String, String)> = to.query_pairs().into_owned().collect();
    assert!(pairs.contains(&("state".into(), "s-1".into())), "{to}");
    pairs
        .into_iter()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v)
        .expect("a code")
}

async fn redeem(server: &TestServer, code: &str, verifier: Option<&str>, redirect: &str) -> Reply {
    let mut pairs = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect),
        ("client_id", CLIENT),
    ];
    if let Some(v) = verifier {
        pairs.push(("code_verifier", v));
    }
    post_form(server, "/oauth/token", &pairs).await
}

/// Whether `bearer` still reads the overview, within the 2 s revocation bound.
async fn still_works(server: &TestServer, bearer: &str) -> bool {
    for _ in 0..30 {
        if get_with(server, bearer, "ops/overview").await.status == 401 {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

#[tokio::test]
async fn an_app_signs_in_through_the_browser_and_opens_a_console_session() {
    let server = TestServer::start().await;
    let meta = call(reqwest::Client::new().get(format!(
        "{}/.well-known/oauth-authorization-server",
        server.url
    )))
    .await
    .json();
    assert_eq!(
        meta["authorization_endpoint"],
        format!("{}/oauth/authorize", server.url)
    );
    assert_eq!(meta["response_types_supported"], json!(["code"]));
    assert_eq!(meta["code_challenge_methods_supported"], json!(["S256"]));
    assert!(
        meta["grant_types_supported"]
            .as_array()
            .unwrap()
            .contains(&json!("authorization_code"))
    );

    let signin = SignIn::start(&server.url, CLIENT, None).await.unwrap();
    let authorize = signin.authorize_url().clone();
    let redirect_uri = signin.redirect_uri().to_owned();
    let http = reqwest::Client::new();
    let finish = tokio::spawn(async move { signin.finish(&reqwest::Client::new()).await });

    // The browser opens the authorization URL: the console (whatever this build
    // serves), never framed, never cached.
    let page = call(no_redirects().get(authorize.as_str())).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert_eq!(page.header("cache-control"), Some("no-store"));

    // A request to the app's port without the sign-in's state is turned away.
    let stray = http
        .get(format!("{redirect_uri}?code=sb_ac_forged&state=other"))
        .send()
        .await
        .unwrap();
    assert_eq!(stray.status(), 400);

    // The operator allows; the browser follows the answer to the app.
    let reply = consent(
        &server,
        &server.operator_token,
        authorize.query().unwrap(),
        true,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let to = reply.json()["redirect_to"].as_str().unwrap().to_owned();
    assert!(to.starts_with(&redirect_uri), "{to}");
    let landed = http.get(&to).send().await.unwrap();
    assert_eq!(landed.status(), 200);
    assert!(landed.text().await.unwrap().contains("Signed in"));

    let signed_in = tokio::time::timeout(Duration::from_secs(10), finish)
        .await
        .expect("the app finished")
        .unwrap()
        .unwrap();
    assert_eq!(signed_in.scope, "ops:read ops:write");
    let access = signed_in.access_token.expose().to_owned();
    let claims = part(&access, 1);
    assert!(
        claims["sub"].as_str().unwrap().starts_with("token:"),
        "{claims}"
    );
    assert_eq!(claims["client_id"], CLIENT);
    assert_eq!(get_with(&server, &access, "ops/overview").await.status, 200);

    // The sign-in is a credential of the tenant, listed and revocable.
    let tokens = call(server.operator().request(Method::GET, "ops/tokens"))
        .await
        .json();
    let row = tokens
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["label"] == format!("sign-in: {CLIENT}"))
        .unwrap_or_else(|| panic!("the sign-in is listed: {tokens}"));
    assert!(row["revoked_at"].is_null(), "{row}");

    // As the desktop does: a refreshing client mints the console's one-time link,
    // which opens a cookie session.
    let refresh = signed_in.refresh_token.clone();
    let store = std::sync::Arc::new(MemoryRefreshStore::new(refresh));
    let client = Client::builder()
        .build_with_login(&server.url, store.clone())
        .unwrap();
    let link = client.login_link(false).await.unwrap();
    let cookie = open_link(&server, &link.path).await;
    let session = |cookie: String| {
        let url = format!("{}/api/v1/session", server.url);
        async move {
            reqwest::Client::new()
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(session(cookie.clone()).await, 200);

    // Quitting the app revokes the sign-in: its tokens and the console session end.
    use switchboard_tests::sdk::login::RefreshTokenStore as _;
    let current: Token = store.load().unwrap();
    switchboard_tests::sdk::login::revoke(&http, &server.url, &current)
        .await
        .unwrap();
    assert!(
        !still_works(&server, &access).await,
        "the access token ends"
    );
    let mut ended = false;
    for _ in 0..30 {
        if session(cookie.clone()).await == 401 {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "the console session ends with the sign-in");
}

#[tokio::test]
async fn a_code_is_redeemed_once_by_its_verifier_client_and_redirect_within_a_minute() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (verifier, challenge) = pkce_vector();
    let query = request_query(&challenge, &[]);

    // A wrong verifier spends the code: even the right one fails after it.
    let code = code_for(&server, &query).await;
    let other = format!("{}x", &verifier[..verifier.len() - 1]);
    oauth_error(
        &redeem(&server, &code, Some(&other), REDIRECT).await,
        400,
        "invalid_grant",
    );
    oauth_error(
        &redeem(&server, &code, Some(&verifier), REDIRECT).await,
        400,
        "invalid_grant",
    );
    // No verifier (RFC 7636 §4.6), the challenge itself as the verifier (plain),
    // another redirect URI or client: refused.
    let code = code_for(&server, &query).await;
    oauth_error(
        &redeem(&server, &code, None, REDIRECT).await,
        400,
        "invalid_grant",
    );
    let code = code_for(&server, &query).await;
    oauth_error(
        &redeem(&server, &code, Some(&challenge), REDIRECT).await,
        400,
        "invalid_grant",
    );
    let code = code_for(&server, &query).await;
    let elsewhere = "http://127.0.0.1:49153/callback";
    oauth_error(
        &redeem(&server, &code, Some(&verifier), elsewhere).await,
        400,
        "invalid_grant",
    );
    let code = code_for(&server, &query).await;
    let reply = post_form(
        &server,
        "/oauth/token",
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("client_id", "another-app"),
            ("code_verifier", &verifier),
        ],
    )
    .await;
    oauth_error(&reply, 400, "invalid_grant");
    // A minute later it has expired.
    let code = code_for(&server, &query).await;
    server.advance(Duration::from_secs(61));
    oauth_error(
        &redeem(&server, &code, Some(&verifier), REDIRECT).await,
        400,
        "invalid_grant",
    );

    // The RFC's verifier redeems the code made for the RFC's challenge, once.
    let code = code_for(&server, &query).await;
    let reply = redeem(&server, &code, Some(&verifier), REDIRECT).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    let access = body["access_token"].as_str().unwrap().to_owned();
    let refresh = body["refresh_token"].as_str().unwrap().to_owned();
    assert!(refresh.starts_with("sb_rt_"));
    assert_eq!(get_with(&server, &access, "ops/overview").await.status, 200);
    // A second redemption revokes the sign-in it made (RFC 6749 §4.1.2).
    let again = redeem(&server, &code, Some(&verifier), REDIRECT).await;
    oauth_error(&again, 400, "invalid_grant");
    assert!(!still_works(&server, &access).await);
    let reply = post_form(
        &server,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", &refresh)],
    )
    .await;
    oauth_error(&reply, 400, "invalid_grant");
}

/// Every redemption after the first is a replay (RFC 6749 §4.1.2): racing
/// redemptions make one sign-in, and the replays that lost revoke it.
#[tokio::test]
async fn racing_redemptions_of_one_code_make_one_sign_in_and_the_replays_end_it() {
    let server = TestServer::start().await;
    let (verifier, challenge) = pkce_vector();
    for round in 1..=3 {
        let code = code_for(&server, &request_query(&challenge, &[])).await;
        let attempts = (0..8).map(|_| {
            let (server_url, code, verifier) = (server.url.clone(), code.clone(), verifier.clone());
            tokio::spawn(async move {
                reqwest::Client::new()
                    .post(format!("{server_url}/oauth/token"))
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(crate::oauth::form(&[
                        ("grant_type", "authorization_code"),
                        ("code", &code),
                        ("redirect_uri", REDIRECT),
                        ("client_id", CLIENT),
                        ("code_verifier", &verifier),
                    ]))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        });
        let statuses: Vec<u16> = futures::future::join_all(attempts)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert!(
            statuses.iter().filter(|s| **s == 200).count() <= 1,
            "at most one redemption gets tokens: {statuses:?}"
        );
        assert!(
            statuses.iter().all(|s| *s == 200 || *s == 400),
            "{statuses:?}"
        );
        let tokens = call(server.operator().request(Method::GET, "ops/tokens"))
            .await
            .json();
        let sign_ins: Vec<&Value> = tokens
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["label"] == format!("sign-in: {CLIENT}"))
            .collect();
        assert_eq!(sign_ins.len(), round, "one sign-in per code: {sign_ins:?}");
        assert!(
            sign_ins.iter().all(|t| !t["revoked_at"].is_null()),
            "the replays revoked it: {sign_ins:?}"
        );
    }
}

#[tokio::test]
async fn consent_is_the_operators_and_never_more_than_they_hold() {
    let server = TestServer::start().await;
    let (_, challenge) = pkce_vector();
    let query = request_query(&challenge, &[]);

    // Denied: the app is told, with its state.
    let reply = consent(&server, &server.operator_token, &query, false).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let to = reply.json()["redirect_to"].as_str().unwrap().to_owned();
    assert!(
        to.starts_with(REDIRECT) && to.contains("error=access_denied") && to.contains("state=s-1"),
        "{to}"
    );
    // An agent cannot consent; a read-only operator cannot grant ops:write.
    let (agent, _) = server.agent("ann").await;
    consent(&server, &agent.token, &query, true)
        .await
        .problem(403, "forbidden");
    // A read-only console session (a read-only login link) may look, not sign
    // an app in (that makes a credential).
    let link = call(
        server
            .operator()
            .request(Method::POST, "ops/login-links")
            .json(&json!({"read_only": true})),
    )
    .await;
    assert_eq!(link.status, 201, "{}", link.text());
    let cookie = open_link(&server, link.json()["path"].as_str().unwrap()).await;
    let narrow = request_query(&challenge, &[("scope", "ops:read")]);
    let reply = Reply::read(
        reqwest::Client::new()
            .post(format!("{}/api/v1/ops/authorizations", server.url))
            .header("cookie", cookie)
            .header("origin", server.url.as_str())
            .json(&json!({"request": narrow, "allow": true}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let refused = reply.problem(403, "forbidden");
    assert!(
        refused["detail"].as_str().unwrap().contains("ops:write"),
        "{refused}"
    );
    // An operator whose token lacks a scope the app asks for cannot grant it.
    let asks_admin = request_query(&challenge, &[("scope", "ops:read admin")]);
    let (_, other_op) = server.tenant("other").await;
    let reply = call(
        other_op
            .request(Method::POST, "ops/authorizations")
            .json(&json!({"request": asks_admin, "allow": true})),
    )
    .await;
    let refused = reply.problem(403, "forbidden");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("\"admin\", which this session does not hold"),
        "{refused}"
    );
    // A request the server would not have served is refused again here.
    let foreign = query.replace("127.0.0.1", "evil.example");
    consent(&server, &server.operator_token, &foreign, true)
        .await
        .problem(400, "validation_failed");
    let plain = request_query(&challenge, &[]).replace("S256", "plain");
    let reply = consent(&server, &server.operator_token, &plain, true).await;
    assert!(
        reply.json()["redirect_to"]
            .as_str()
            .unwrap()
            .contains("error=invalid_request"),
        "{}",
        reply.text()
    );
}

#[tokio::test]
async fn the_authorization_endpoint_never_redirects_to_an_untrusted_address() {
    let server = TestServer::start().await;
    let (_, challenge) = pkce_vector();
    let get = |query: String| {
        let url = format!("{}/oauth/authorize?{query}", server.url);
        async move { call(no_redirects().get(url)).await }
    };
    for bad in [
        "https://evil.example/cb",
        "http://localhost:8000/cb",
        "http://127.0.0.1/cb",
    ] {
        let reply = get(request_query(&challenge, &[]).replace(
            &crate::oauth::form(&[("redirect_uri", REDIRECT)]),
            &crate::oauth::form(&[("redirect_uri", bad)]),
        ))
        .await;
        assert_eq!(reply.status, 400, "{bad}: {}", reply.text());
        assert_eq!(reply.header("location"), None, "{bad}");
        assert!(reply.text().contains("loopback"), "{}", reply.text());
    }
    // Faults after a trusted redirect go back to the app, with its state.
    let reply = get(request_query(&challenge, &[]).replace("S256", "plain")).await;
    assert_eq!(reply.status, 303, "{}", reply.text());
    let location = reply.header("location").unwrap();
    assert!(
        location.starts_with(REDIRECT)
            && location.contains("error=invalid_request")
            && location.contains("state=s-1"),
        "{location}"
    );
    let reply = get(request_query(&challenge, &[("scope", "agent:x")])).await;
    assert!(
        reply
            .header("location")
            .unwrap()
            .contains("error=invalid_scope")
    );
    // A repeated parameter is shown, never redirected.
    let reply = get(format!("{}&client_id=two", request_query(&challenge, &[]))).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.header("location"), None);
}

/// An app's sign-in hangs from the operator credential that consented: revoking
/// that credential (here by an operator of the tenant, from the token list) ends
/// the sign-in, its access tokens and refresh token, in the same transaction.
#[tokio::test]
async fn revoking_the_consenting_credential_ends_the_sign_in() {
    let server = TestServer::start().await;
    let (b, b_op) = server.tenant("consenting").await;
    let (verifier, challenge) = pkce_vector();
    let query = request_query(&challenge, &[("scope", "ops:read")]);
    let reply = consent(&server, &b.operator_token, &query, true).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let to = url::Url::parse(reply.json()["redirect_to"].as_str().unwrap()).unwrap();
    let code = to
        .query_pairs()
        .find(|(k, _)| k == "code")
        .map(|(_, v)| v.into_owned())
        .expect("a code");
    let tokens = redeem(&server, &code, Some(&verifier), REDIRECT).await;
    assert_eq!(tokens.status, 200, "{}", tokens.text());
    let access = tokens.json()["access_token"].as_str().unwrap().to_owned();
    let refresh_token = tokens.json()["refresh_token"].as_str().unwrap().to_owned();
    assert_eq!(get_with(&server, &access, "ops/overview").await.status, 200);
    let listed = b_op.tokens().await.unwrap();
    let operator = listed.iter().find(|c| c.kind == "operator").unwrap();
    let sign_in = listed
        .iter()
        .find(|c| c.label.starts_with("sign-in"))
        .expect("the sign-in's credential");
    assert_eq!(sign_in.approved_by.as_ref(), Some(&operator.token_id));

    // The tenant's operator token is revoked from the list: 2 credentials end.
    let reply = call(b_op.request(
        Method::POST,
        &format!("ops/tokens/{}/revoke", operator.token_id),
    ))
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["revoked"], 2, "the operator and its sign-in");
    assert!(
        !still_works(&server, &access).await,
        "the sign-in's access ended"
    );
    let again = post_form(
        &server,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh_token),
        ],
    )
    .await;
    crate::oauth::oauth_error(&again, 400, "invalid_grant");
}
