//! The token exchange of an access token (issue 40, RFC 8693): a host holding an
//! agent's login (or static token) hands its sidecars narrower, shorter-lived
//! tokens made from its own access token. Over real HTTP on every backend:
//!
//! - the new token has the subject's scopes or fewer (`invalid_scope` otherwise),
//!   lives at most 15 minutes, keeps the subject's `sub` and `tenant`, and names
//!   the host in `act` (RFC 8693 §4.1), nested when an exchanged token is
//!   exchanged again;
//! - a subject bound to a key (`cnf.jkt`) is exchanged only by a token request
//!   signed with that key (RFC 9421, as the API's calls are), once per signature;
//! - `signing_key` binds the new token to the sidecar's key;
//! - revoking the host's login, or logging it out, ends every token made from it,
//!   on every instance within the token cache's 2 s;
//! - an expired, revoked or forged subject is `invalid_grant`, never a 500.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::login::DeviceLogin;
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::sdk::signing::{SigningKey, sign_request};
use switchboard_tests::{Options, TestServer};

use crate::oauth::{exchange, exchange_with, form, get_with, oauth_error, part, post_form};
use crate::support::{Reply, call, send};

const EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A device login of agent `name` (with `key` bound to it, if any), approved by the
/// operator, then refreshed once as the host program `host-cli`: the login's access
/// token and its next refresh token.
async fn host_login(server: &TestServer, name: &str, key: Option<&SigningKey>) -> (String, String) {
    let http = reqwest::Client::new();
    let mut login = DeviceLogin::start(&http, &server.url, "host-cli", name, None)
        .await
        .expect("device login");
    if let Some(key) = key {
        login = login.with_signing_key(&key.public_key());
    }
    let approved = call(server.operator().request(
        Method::POST,
        &format!("ops/device-requests/{}/approve", login.user_code),
    ))
    .await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    let refresh = login.wait(&http).await.expect("approved");
    let reply = post_form(
        server,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.expose()),
            ("client_id", "host-cli"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let tokens = reply.json();
    (
        tokens["access_token"].as_str().unwrap().to_owned(),
        tokens["refresh_token"].as_str().unwrap().to_owned(),
    )
}

/// The access token of a 200 answer.
#[track_caller]
fn issued(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["access_token"]
        .as_str()
        .expect("access_token")
        .to_owned()
}

/// A token exchange of `subject` with the `extra` parameters, signed by `key`
/// with the SDK's `sign_request`: the request, to send (and send again).
fn signed_exchange(
    server: &TestServer,
    subject: &str,
    extra: &[(&str, &str)],
    key: &SigningKey,
) -> reqwest::Request {
    let mut pairs = vec![
        ("grant_type", EXCHANGE),
        ("subject_token", subject),
        ("subject_token_type", ACCESS),
    ];
    pairs.extend_from_slice(extra);
    let mut request = reqwest::Client::new()
        .post(format!("{}/oauth/token", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&pairs))
        .build()
        .expect("a request");
    sign_request(&mut request, key).expect("signed");
    request
}

async fn execute(request: reqwest::Request) -> Reply {
    Reply::read(
        reqwest::Client::new()
            .execute(request)
            .await
            .expect("request is sent"),
    )
    .await
}

/// The `token_id` of the tenant's credential that `pick` finds, as the credentials
/// list shows it.
async fn token_id(
    server: &TestServer,
    pick: impl Fn(&switchboard_tests::sdk::proto::Credential) -> bool,
) -> String {
    let tokens = server.operator().tokens().await.expect("credentials");
    tokens
        .iter()
        .find(|c| pick(c))
        .unwrap_or_else(|| panic!("no such credential in {tokens:?}"))
        .token_id
        .clone()
}

/// The OAuth error's description.
fn description(reply: &Reply) -> String {
    reply.json()["error_description"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A client that signs with `key` (the holder of a token bound to it).
fn signing(server: &TestServer, token: &str, key: &SigningKey) -> Client {
    Client::builder()
        .signing_key(Some(key.clone()))
        .build(&server.url, token)
        .expect("client")
}

/// The HTTP status an SDK call was refused with.
fn refused_status<T: std::fmt::Debug>(result: Result<T, switchboard_tests::sdk::Error>) -> u16 {
    match result {
        Err(switchboard_tests::sdk::Error::Api { status, .. }) => status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn an_access_token_is_exchanged_for_a_narrower_shorter_one_that_names_the_host() {
    let server = TestServer::start().await;
    let (host, _) = server.agent("host").await;
    let (_, bob) = server.agent("bob").await;
    // The host's own access token, from its static token.
    let own =
        issued(&exchange_with(&server, host.token.as_str(), &[("client_id", "host-cli")]).await);
    let own_claims = part(&own, 1);
    assert!(
        own_claims.get("act").is_none(),
        "a static token's exchange has no actor"
    );
    let host_id = token_id(&server, |c| c.agent_name.as_deref() == Some("host")).await;

    // Narrower: sending only.
    let reply = exchange_with(
        &server,
        &own,
        &[("scope", "messages:send"), ("client_id", "sidecar-a")],
    )
    .await;
    let first = issued(&reply);
    let body = reply.json();
    assert_eq!(body["scope"], "messages:send");
    assert_eq!(body["issued_token_type"], ACCESS);
    assert_eq!(body["token_type"], "Bearer");
    let expires_in = body["expires_in"].as_i64().unwrap();
    assert!((1..=900).contains(&expires_in), "{body}");
    let claims = part(&first, 1);
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 900);
    assert_eq!(claims["sub"], host.agent_id.to_string(), "the same agent");
    assert_eq!(claims["tenant"], own_claims["tenant"]);
    assert_eq!(claims["scope"], "messages:send");
    assert_eq!(claims["client_id"], "sidecar-a");
    assert!(claims.get("cnf").is_none(), "{claims}");
    assert_eq!(
        claims["act"],
        json!({"sub": format!("token:{host_id}"), "client_id": "host-cli"}),
        "the actor is the host's credential as the credentials list names it"
    );

    // It sends as the host, and does nothing else.
    let sidecar = Client::new(&server.url, first.as_str()).unwrap();
    send(&sidecar, "bob", json!({"from": "sidecar"})).await;
    let events = crate::support::inbox(&bob, "bob").await;
    assert_eq!(events.len(), 1);
    get_with(&server, &first, "agents/host/inbox")
        .await
        .problem(404, "not_found");

    // Never wider: the inbox scope the host has is not the sidecar token's to give.
    let inbox = format!("agent:{}:inbox", host.agent_id);
    for asked in [inbox.as_str(), "messages:send ops:write"] {
        let reply = exchange(&server, &first, Some(asked)).await;
        oauth_error(&reply, 400, "invalid_scope");
        assert!(
            description(&reply).contains("messages:send"),
            "the refusal names what may be asked: {}",
            reply.text()
        );
    }

    // Exchanged again (equal scope by default): the actors nest, newest outermost.
    let second = issued(&exchange_with(&server, &first, &[("client_id", "sidecar-b")]).await);
    let claims = part(&second, 1);
    assert_eq!(claims["scope"], "messages:send");
    assert_eq!(claims["sub"], host.agent_id.to_string());
    assert_eq!(
        claims["act"],
        json!({
            "sub": format!("token:{host_id}"),
            "client_id": "sidecar-a",
            "act": {"sub": format!("token:{host_id}"), "client_id": "host-cli"},
        })
    );
    send(
        &Client::new(&server.url, second.as_str()).unwrap(),
        "bob",
        json!({"from": "sidecar of a sidecar"}),
    )
    .await;

    // The host's own token may still ask for its inbox, for the default of all.
    let all = exchange(&server, &own, None).await;
    assert_eq!(
        all.json()["scope"],
        format!("agent:{}:inbox messages:send", host.agent_id)
    );
}

#[tokio::test]
async fn a_bound_subject_is_exchanged_only_by_a_request_signed_with_its_key_once() {
    let server = TestServer::start().await;
    let key = SigningKey::generate();
    let (access, _) = host_login(&server, "lena", Some(&key)).await;
    assert_eq!(
        part(&access, 1)["cnf"]["jkt"],
        key.public_key().thumbprint()
    );
    let login_id = token_id(&server, |c| c.label == "device login: lena").await;

    // Stolen, the bound token is not exchanged unsigned, nor signed by another key.
    let unsigned = exchange(&server, &access, None).await;
    oauth_error(&unsigned, 400, "invalid_request");
    let why = description(&unsigned);
    assert!(why.contains("cnf.jkt") && why.contains("sign"), "{why}");
    let thief = SigningKey::generate();
    let thiefs = serde_json::to_string(&thief.public_key().to_jwk()).unwrap();
    let reply = execute(signed_exchange(
        &server,
        &access,
        &[("signing_key", &thiefs)],
        &thief,
    ))
    .await;
    oauth_error(&reply, 400, "invalid_grant");

    // Signed by its key: a token bound to the same key (an exchange never loosens
    // a binding), with the login as its actor.
    let request = signed_exchange(&server, &access, &[("client_id", "sidecar")], &key);
    let replay = request.try_clone().expect("a body in memory");
    let kept = issued(&execute(request).await);
    let claims = part(&kept, 1);
    assert_eq!(claims["cnf"]["jkt"], key.public_key().thumbprint());
    assert_eq!(
        claims["act"],
        json!({"sub": format!("token:{login_id}"), "client_id": "host-cli"})
    );
    get_with(&server, &kept, "agents/lena/inbox")
        .await
        .problem(401, "signature_required");
    signing(&server, &kept, &key)
        .poll("lena", 0, None)
        .await
        .expect("signed by the key it is bound to");

    // The same signed request again is a replay: refused, nothing issued.
    let replayed = execute(replay).await;
    oauth_error(&replayed, 400, "invalid_request");
    assert!(
        description(&replayed).contains("nonce"),
        "{}",
        replayed.text()
    );

    // `signing_key`: the sidecar's own key binds the new token.
    let sidecar = SigningKey::generate();
    let jwk = serde_json::to_string(&sidecar.public_key().to_jwk()).unwrap();
    let bound = issued(
        &execute(signed_exchange(
            &server,
            &access,
            &[("signing_key", &jwk)],
            &key,
        ))
        .await,
    );
    assert_eq!(
        part(&bound, 1)["cnf"]["jkt"],
        sidecar.public_key().thumbprint()
    );
    get_with(&server, &bound, "agents/lena/inbox")
        .await
        .problem(401, "signature_required");
    assert_eq!(
        refused_status(signing(&server, &bound, &key).poll("lena", 0, None).await),
        401,
        "the host's key is not the sidecar token's"
    );
    signing(&server, &bound, &sidecar)
        .poll("lena", 0, None)
        .await
        .expect("signed by the sidecar's key");

    // The sidecar exchanges its token again, narrower, with its own key; the host's
    // key does not do for it.
    let read = format!("agent:{}:read", claims["sub"].as_str().unwrap());
    let reply = execute(signed_exchange(&server, &bound, &[("scope", &read)], &key)).await;
    oauth_error(&reply, 400, "invalid_grant");
    let narrower = issued(
        &execute(signed_exchange(
            &server,
            &bound,
            &[("scope", &read)],
            &sidecar,
        ))
        .await,
    );
    let claims = part(&narrower, 1);
    assert_eq!(claims["scope"], read.as_str());
    assert_eq!(claims["cnf"]["jkt"], sidecar.public_key().thumbprint());
    assert_eq!(
        claims["act"]["act"],
        json!({"sub": format!("token:{login_id}"), "client_id": "host-cli"})
    );
}

/// A static token a key binds must sign its API calls; its token exchange too, or
/// a stolen one would be exchanged for a token bound to the thief's key.
#[tokio::test]
async fn a_static_token_bound_to_a_key_signs_its_exchange_too() {
    let server = TestServer::start().await;
    let (created, unsigned) = server.agent("kept").await;
    let key = SigningKey::generate();
    unsigned
        .register_key(&key.public_key())
        .await
        .expect("the first key");
    let thief = SigningKey::generate();
    let thiefs = serde_json::to_string(&thief.public_key().to_jwk()).unwrap();
    let reply = exchange_with(&server, created.token.as_str(), &[("signing_key", &thiefs)]).await;
    oauth_error(&reply, 400, "invalid_request");
    let reply = execute(signed_exchange(
        &server,
        created.token.as_str(),
        &[("signing_key", &thiefs)],
        &thief,
    ))
    .await;
    oauth_error(&reply, 400, "invalid_grant");
    let jwt = issued(&execute(signed_exchange(&server, created.token.as_str(), &[], &key)).await);
    signing(&server, &jwt, &key)
        .poll("kept", 0, None)
        .await
        .expect("signed by the token's key");
}

#[tokio::test]
async fn revoking_or_logging_out_the_host_ends_every_token_it_exchanged() {
    let server = TestServer::start().await;
    let op = server.operator();
    for (name, ends) in [
        ("revoked", "the operator revokes"),
        ("logged-out", "logout"),
    ] {
        let key = SigningKey::generate();
        let (access, refresh) = host_login(&server, name, Some(&key)).await;
        let sidecar = SigningKey::generate();
        let jwk = serde_json::to_string(&sidecar.public_key().to_jwk()).unwrap();
        let exchanged = issued(
            &execute(signed_exchange(
                &server,
                &access,
                &[("signing_key", &jwk)],
                &key,
            ))
            .await,
        );
        // And one exchanged from that (the cascade reaches every generation).
        let again = issued(&execute(signed_exchange(&server, &exchanged, &[], &sidecar)).await);
        for token in [&exchanged, &again] {
            signing(&server, token, &sidecar)
                .poll(name, 0, None)
                .await
                .expect("works while the login lives");
        }
        let label = format!("device login: {name}");
        let login_id = token_id(&server, |c| c.label == label).await;
        assert_eq!(
            part(&exchanged, 1)["act"]["sub"],
            format!("token:{login_id}")
        );

        if name == "revoked" {
            op.revoke_token(&login_id).await.expect("revoked");
        } else {
            let reply = post_form(&server, "/oauth/revoke", &[("token", &refresh)]).await;
            assert_eq!(reply.status, 200, "{}", reply.text());
        }
        for token in [&exchanged, &again] {
            assert_eq!(
                refused_status(signing(&server, token, &sidecar).poll(name, 0, None).await),
                401,
                "{ends}: an exchanged token ends with the host's login"
            );
        }
        // No new token either, from the host's token or an exchanged one.
        let reply = execute(signed_exchange(&server, &access, &[], &key)).await;
        oauth_error(&reply, 400, "invalid_grant");
        assert!(description(&reply).contains("revoked"), "{}", reply.text());
        let reply = execute(signed_exchange(&server, &exchanged, &[], &sidecar)).await;
        oauth_error(&reply, 400, "invalid_grant");
    }
}

/// On PostgreSQL and MariaDB: the host's login revoked through one instance ends
/// what it exchanged on another within the token cache's 2 s.
#[tokio::test]
async fn a_revoked_host_login_ends_its_exchanged_tokens_on_every_instance_within_2_s() {
    let manual = || Options {
        manual_clock: true,
        ..Options::default()
    };
    let server = TestServer::with(manual()).await;
    if !server.backend().shared() {
        return; // one process owns a SQLite file
    }
    let other = server.another_instance(manual()).await;
    // An unbound login: nothing here is about signatures.
    let (access, _) = host_login(&server, "host", None).await;
    let exchanged = issued(&exchange(&server, &access, None).await);
    let team_host = server.url.trim_start_matches("http://").to_owned();
    let on_other = async |jwt: &str| {
        call(
            Client::new(&other.url, jwt)
                .unwrap()
                .request(Method::GET, "agents/host/inbox")
                .header("host", team_host.as_str()),
        )
        .await
    };
    assert_eq!(on_other(&exchanged).await.status, 200);
    let login_id = token_id(&server, |c| c.label == "device login: host").await;
    server
        .operator()
        .revoke_token(&login_id)
        .await
        .expect("revoked");
    other.advance(Duration::from_millis(1_900));
    assert_eq!(
        on_other(&exchanged).await.status,
        200,
        "within the TTL the other instance still has it cached"
    );
    other.advance(Duration::from_millis(100));
    on_other(&exchanged).await.problem(401, "unauthorized");
}

#[tokio::test]
async fn an_expired_revoked_or_forged_subject_is_refused() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (host, _) = server.agent("host").await;
    let own = issued(&exchange(&server, host.token.as_str(), None).await);
    let exchanged = issued(&exchange(&server, &own, Some("messages:send")).await);

    // Revoked by its holder (RFC 7009).
    let revoked = post_form(&server, "/oauth/revoke", &[("token", &exchanged)]).await;
    assert_eq!(revoked.status, 200);
    oauth_error(
        &exchange(&server, &exchanged, None).await,
        400,
        "invalid_grant",
    );

    // Forged: claims widened by hand no longer verify.
    let parts: Vec<&str> = own.split('.').collect();
    let mut claims = part(&own, 1);
    claims["scope"] = json!("ops:write");
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        base64::Engine::encode(&b64, claims.to_string()),
        parts[2]
    );
    let reply = exchange(&server, &forged, None).await;
    oauth_error(&reply, 400, "invalid_grant");
    assert!(
        description(&reply).contains("signature"),
        "{}",
        reply.text()
    );

    // Expired on the server's clock.
    server.advance(Duration::from_secs(900));
    let reply = exchange(&server, &own, None).await;
    oauth_error(&reply, 400, "invalid_grant");
    assert!(description(&reply).contains("expired"), "{}", reply.text());

    // Nothing of that reached the static token it came from.
    issued(&exchange(&server, host.token.as_str(), None).await);
    let malformed: Value = exchange(&server, "eyJ.not.ajwt", None).await.json();
    assert_eq!(malformed["error"], "invalid_grant", "{malformed}");
}

/// An access token's exchanges draw from its subject's bucket, the one its API
/// calls draw from (a sidecar cannot multiply the host's rate by exchanging).
#[tokio::test]
async fn exchanges_of_an_access_token_draw_from_its_subjects_bucket() {
    let server = TestServer::with(Options {
        manual_clock: true,
        rate_limit: Some(switchboard_tests::server::config::RateLimit {
            per_second: 1.0,
            burst: 3,
        }),
        tenant_rate_limit: Some(switchboard_tests::server::config::RateLimit::OFF),
        ..Options::default()
    })
    .await;
    let (host, _) = server.agent("host").await;
    let own = issued(&exchange(&server, host.token.as_str(), None).await);
    let first = issued(&exchange(&server, &own, None).await);
    issued(&exchange(&server, &first, None).await);
    assert_eq!(
        get_with(&server, &own, "agents/host/inbox").await.status,
        200
    );
    let refused = exchange(&server, &first, None).await;
    oauth_error(&refused, 429, "rate_limited");
    assert_eq!(refused.header("retry-after"), Some("1"));
}

#[tokio::test]
async fn an_exchanged_access_token_lives_at_most_15_minutes_whatever_the_server_s_ttl() {
    // Access tokens live 30 min on this server (the most it allows); one exchanged
    // from an access token still gets 15 min at most.
    let server = TestServer::with(Options {
        access_token_ttl: Some(Duration::from_secs(30 * 60)),
        ..Options::default()
    })
    .await;
    let (host, _) = server.agent("host").await;
    let own = exchange(&server, host.token.as_str(), None).await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["expires_in"], 30 * 60, "{}", own.text());
    let reply = exchange(&server, &issued(&own), None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let expires_in = reply.json()["expires_in"].as_i64().unwrap();
    assert!((1..=15 * 60).contains(&expires_in), "{}", reply.text());
    let claims = part(&issued(&reply), 1);
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 15 * 60);
}
