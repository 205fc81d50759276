//! The console's session over plain HTTP (no browser needed): token login, one-time
//! links, the cookie's attributes, the Origin rule for cookie-authenticated changes,
//! read-only sessions, logout, and secrets kept out of the database file (I11).

use std::time::Duration;

use reqwest::header::{COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use reqwest::{Client, Response, StatusCode};
use serde_json::{Value, json};
use switchboard_tests::{Options, TestServer};

fn http() -> Client {
    Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("http client")
}

/// The `sb_session=…` pair of a response's Set-Cookie, and the whole header.
fn session_cookie(resp: &Response) -> (String, String) {
    let header = resp
        .headers()
        .get(SET_COOKIE)
        .expect("a Set-Cookie header")
        .to_str()
        .expect("ascii")
        .to_owned();
    let pair = header
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    assert!(pair.starts_with("sb_session="), "{header}");
    (pair, header)
}

async fn problem(resp: Response, status: u16, code: &str) -> Value {
    assert_eq!(resp.status().as_u16(), status);
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("application/problem+json"),
        "errors are RFC 9457 problem documents"
    );
    let body: Value = resp.json().await.expect("problem JSON");
    assert_eq!(body["code"], code, "{body}");
    assert!(body["detail"].as_str().is_some_and(|d| !d.is_empty()));
    body
}

async fn login(server: &TestServer, token: &str) -> Response {
    http()
        .post(format!("{}/api/v1/session", server.url))
        .json(&json!({ "token": token }))
        .send()
        .await
        .expect("POST /api/v1/session")
}

/// Mints a one-time link with the operator token; returns its path.
async fn link(server: &TestServer, read_only: bool) -> String {
    let resp = http()
        .post(format!("{}/api/v1/ops/login-links", server.url))
        .bearer_auth(&server.operator_token)
        .json(&json!({ "read_only": read_only }))
        .send()
        .await
        .expect("POST login-links");
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.expect("json");
    body["path"].as_str().expect("path").to_owned()
}

#[tokio::test]
async fn token_login_sets_a_strict_httponly_cookie_that_works_until_logout() {
    let server = TestServer::start().await;
    let resp = login(&server, &server.operator_token).await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let (cookie, header) = session_cookie(&resp);
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(header.contains(attribute), "{attribute} missing: {header}");
    }
    assert!(
        !header.contains(&server.operator_token),
        "the cookie is a fresh session id, not the token"
    );
    let info: Value = resp.json().await.expect("json");
    assert_eq!(info["via"], "cookie");
    assert_eq!(info["read_only"], false);

    let c = http();
    let overview = c
        .get(format!("{}/api/v1/ops/overview", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("overview");
    assert_eq!(
        overview.status(),
        StatusCode::OK,
        "the cookie authenticates"
    );
    let who: Value = c
        .get(format!("{}/api/v1/session", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("json");
    assert_eq!(who["via"], "cookie");
    assert!(who["expires_at"].is_string());

    let out = c
        .delete(format!("{}/api/v1/session", server.url))
        .header(COOKIE, &cookie)
        .header(ORIGIN, &server.url)
        .send()
        .await
        .expect("logout");
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let (cleared, header) = session_cookie(&out);
    assert_eq!(cleared, "sb_session=", "logout clears the cookie: {header}");
    let after = c
        .get(format!("{}/api/v1/ops/overview", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("overview");
    problem(after, 401, "unauthorized").await;
}

#[tokio::test]
async fn behind_a_tls_proxy_the_cookie_is_secure() {
    let server = TestServer::start().await;
    let plain = login(&server, &server.operator_token).await;
    let (_, header) = session_cookie(&plain);
    assert!(
        !header.contains("Secure"),
        "plain HTTP on 127.0.0.1: {header}"
    );
    let proxied = http()
        .post(format!("{}/api/v1/session", server.url))
        .header("x-forwarded-proto", "https")
        .json(&json!({ "token": server.operator_token }))
        .send()
        .await
        .expect("login");
    let (_, header) = session_cookie(&proxied);
    assert!(header.contains("Secure"), "{header}");
}

#[tokio::test]
async fn bad_logins_are_problems_not_sessions() {
    let server = TestServer::start().await;
    let wrong = login(&server, "sb_op_not-a-real-token").await;
    assert!(wrong.headers().get(SET_COOKIE).is_none());
    problem(wrong, 401, "unauthorized").await;

    let (agent, _) = server.agent("build-bot").await;
    problem(login(&server, &agent.token).await, 403, "forbidden").await;

    let c = http();
    let form = c
        .post(format!("{}/api/v1/session", server.url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", server.operator_token))
        .send()
        .await
        .expect("form post");
    problem(form, 415, "unsupported_media_type").await;
    let empty = c
        .post(format!("{}/api/v1/session", server.url))
        .json(&json!({}))
        .send()
        .await
        .expect("empty");
    problem(empty, 422, "validation_failed").await;
    let none = c
        .get(format!("{}/api/v1/session", server.url))
        .send()
        .await
        .expect("no credentials");
    problem(none, 401, "unauthorized").await;
    let forged = c
        .get(format!("{}/api/v1/ops/overview", server.url))
        .header(COOKIE, "sb_session=sb_ses_forged")
        .send()
        .await
        .expect("forged cookie");
    problem(forged, 401, "unauthorized").await;
}

#[tokio::test]
async fn cookie_changes_need_the_consoles_own_origin() {
    let server = TestServer::start().await;
    let (cookie, _) = session_cookie(&login(&server, &server.operator_token).await);
    let c = http();
    let replay = |origin: Option<&str>| {
        let mut req = c
            .post(format!("{}/api/v1/ops/bulk/replay", server.url))
            .header(COOKIE, &cookie)
            .json(&json!({ "filter": {} }));
        if let Some(o) = origin {
            req = req.header(ORIGIN, o);
        }
        req.send()
    };
    problem(replay(None).await.expect("no origin"), 403, "forbidden").await;
    problem(
        replay(Some("http://evil.example"))
            .await
            .expect("other origin"),
        403,
        "forbidden",
    )
    .await;
    let ok = replay(Some(&server.url)).await.expect("same origin");
    assert_eq!(
        ok.status(),
        StatusCode::OK,
        "the console's own origin may act"
    );
    // Reads need no Origin: EventSource and plain navigations do not send one.
    let read = c
        .get(format!("{}/api/v1/ops/audit", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("audit");
    assert_eq!(read.status(), StatusCode::OK);
}

#[tokio::test]
async fn login_links_work_once_and_leave_no_ticket_in_the_url() {
    let server = TestServer::start().await;
    let path = link(&server, false).await;
    assert!(path.starts_with("/login?ticket=sb_tk_"), "{path}");
    let c = http();
    let first = c
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .expect("redeem");
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        first.headers().get(LOCATION).and_then(|v| v.to_str().ok()),
        Some("/"),
        "the ticket does not stay in the address bar"
    );
    assert_eq!(
        first
            .headers()
            .get("referrer-policy")
            .and_then(|v| v.to_str().ok()),
        Some("no-referrer")
    );
    let (cookie, header) = session_cookie(&first);
    assert!(header.contains("HttpOnly") && header.contains("SameSite=Strict"));
    let who: Value = c
        .get(format!("{}/api/v1/session", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("json");
    assert_eq!(who["read_only"], false);

    let again = c
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .expect("redeem again");
    problem(again, 401, "unauthorized").await;
    let missing = c
        .get(format!("{}/login", server.url))
        .send()
        .await
        .expect("no ticket");
    problem(missing, 400, "validation_failed").await;
}

#[tokio::test]
async fn tickets_expire_after_two_minutes() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let path = link(&server, false).await;
    server.advance(Duration::from_secs(121));
    let late = http()
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .expect("redeem");
    problem(late, 401, "unauthorized").await;
}

#[tokio::test]
async fn read_only_sessions_look_but_do_not_touch() {
    let server = TestServer::start().await;
    let path = link(&server, true).await;
    let c = http();
    let (cookie, _) = session_cookie(
        &c.get(format!("{}{path}", server.url))
            .send()
            .await
            .expect("redeem"),
    );
    let who: Value = c
        .get(format!("{}/api/v1/session", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("json");
    assert_eq!(who["read_only"], true);
    assert_eq!(who["scopes"], json!(["ops:read"]));

    let read = c
        .get(format!("{}/api/v1/ops/events", server.url))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("events");
    assert_eq!(read.status(), StatusCode::OK, "reading is allowed");
    for (path, body) in [
        ("/api/v1/ops/bulk/purge", json!({ "filter": {} })),
        ("/api/v1/ops/agents", json!({ "name": "sneaky" })),
        ("/api/v1/ops/login-links", json!({ "read_only": false })),
    ] {
        let refused = c
            .post(format!("{}{path}", server.url))
            .header(COOKIE, &cookie)
            .header(ORIGIN, &server.url)
            .json(&body)
            .send()
            .await
            .expect("write");
        let p = problem(refused, 403, "forbidden").await;
        assert!(
            p["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("read-only"),
            "{path}: the detail says why: {p}"
        );
    }
    // The read-only session may still pass its own kind of link on.
    let ro = c
        .post(format!("{}/api/v1/ops/login-links", server.url))
        .header(COOKIE, &cookie)
        .header(ORIGIN, &server.url)
        .json(&json!({ "read_only": true }))
        .send()
        .await
        .expect("read-only link");
    assert_eq!(ro.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn session_ids_and_tickets_are_stored_hashed() {
    let server = TestServer::start().await;
    let (cookie, _) = session_cookie(&login(&server, &server.operator_token).await);
    let session_id = cookie.trim_start_matches("sb_session=").to_owned();
    let path = link(&server, false).await;
    let ticket = path.trim_start_matches("/login?ticket=").to_owned();
    // Everything stored: the database's files (WAL included), or every row.
    let bytes = server.stored_bytes().await;
    assert!(!bytes.is_empty(), "the database files were read");
    for secret in [&session_id, &ticket] {
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "a secret reached the database file"
        );
    }
}
