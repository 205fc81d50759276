//! Device login (RFC 8628) and refresh tokens (issue 15): a device asks, an
//! operator of its tenant approves or denies by the user code, the device's polls
//! are answered as the RFC says (`authorization_pending`, `slow_down`,
//! `access_denied`, `expired_token`), the approval gives an access token and a
//! refresh token once; refresh tokens rotate on every use, a reused one revokes its
//! whole login, and revocation (RFC 7009, or the agent's) ends the login.

use serde_json::{Value, json};
use std::time::Duration;
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::{Options, TestServer};

use crate::oauth::{get_with, oauth_error, post_form};
use crate::support::{Reply, call};

const DEVICE: &str = "urn:ietf:params:oauth:grant-type:device_code";

fn manual() -> Options {
    Options {
        manual_clock: true,
        ..Options::default()
    }
}

/// A device asks to log in as `agent` (in `tenant`, when named).
async fn ask(server: &TestServer, agent: &str, tenant: Option<&str>) -> Value {
    let scope = format!("agent:{agent}");
    let mut pairs = vec![("client_id", "switchboard-cli"), ("scope", scope.as_str())];
    if let Some(tenant) = tenant {
        pairs.push(("tenant", tenant));
    }
    let reply = post_form(server, "/oauth/device_authorization", &pairs).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    reply.json()
}

async fn poll(server: &TestServer, device: &Value) -> Reply {
    poll_as(server, device, "switchboard-cli").await
}

async fn poll_as(server: &TestServer, device: &Value, client: &str) -> Reply {
    post_form(
        server,
        "/oauth/token",
        &[
            ("grant_type", DEVICE),
            ("device_code", device["device_code"].as_str().unwrap()),
            ("client_id", client),
        ],
    )
    .await
}

async fn refresh(server: &TestServer, token: &str) -> Reply {
    post_form(
        server,
        "/oauth/token",
        &[("grant_type", "refresh_token"), ("refresh_token", token)],
    )
    .await
}

fn code(device: &Value) -> &str {
    device["user_code"].as_str().unwrap()
}

async fn decide(
    server: &TestServer,
    op_token: &str,
    code: &str,
    verb: &str,
    body: Option<Value>,
) -> Reply {
    let client = switchboard_tests::sdk::Client::new(&server.url, op_token).unwrap();
    let request = client.request(Method::POST, &format!("ops/device-requests/{code}/{verb}"));
    call(match body {
        Some(body) => request.json(&body),
        None => request,
    })
    .await
}

/// The default tenant's operator approves `device` as the agent it asked for.
async fn approve(server: &TestServer, device: &Value) {
    let reply = decide(
        server,
        &server.operator_token,
        code(device),
        "approve",
        None,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// An approved device's tokens: the access token and the refresh token.
async fn tokens(server: &TestServer, device: &Value) -> (String, String) {
    let reply = poll(server, device).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let body = reply.json();
    (
        body["access_token"].as_str().unwrap().to_owned(),
        body["refresh_token"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_device_logs_in_once_an_operator_approves_and_refreshes_by_rotation() {
    let server = TestServer::with(manual()).await;
    let device = ask(&server, "carol", None).await;
    assert_eq!(
        device["verification_uri"],
        format!("{}/devices", server.url)
    );
    assert_eq!(
        device["verification_uri_complete"],
        format!("{}/devices?user_code={}", server.url, code(&device))
    );
    assert_eq!(
        (&device["interval"], &device["expires_in"]),
        (&json!(5), &json!(600))
    );
    let user_code = code(&device);
    assert!(
        user_code.len() == 9 && user_code.as_bytes()[4] == b'-',
        "{user_code}"
    );

    // Polls before a decision: pending, and too soon is slow_down, which adds 5 s
    // to the interval for this and every later poll (RFC 8628 §3.5).
    oauth_error(&poll(&server, &device).await, 400, "authorization_pending");
    oauth_error(&poll(&server, &device).await, 400, "slow_down");
    server.advance(Duration::from_secs(9));
    oauth_error(&poll(&server, &device).await, 400, "slow_down");
    server.advance(Duration::from_secs(14));
    oauth_error(&poll(&server, &device).await, 400, "slow_down");
    server.advance(Duration::from_secs(20));
    oauth_error(&poll(&server, &device).await, 400, "authorization_pending");

    // The operator sees who asked, from where.
    let listed = call(
        server
            .operator()
            .request(Method::GET, "ops/device-requests"),
    )
    .await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    let listed = listed.json();
    let request = &listed[0];
    assert_eq!(request["user_code"], user_code);
    assert_eq!(request["client_id"], "switchboard-cli");
    assert_eq!(request["agent_name"], "carol");
    assert_eq!(request["status"], "pending");
    assert!(
        request["source"].as_str().unwrap().starts_with("127.0.0.1"),
        "{request}"
    );
    assert!(request.get("device_code").is_none(), "{request}");

    // Lower case and without the dash is the same code.
    let loose = user_code.replace('-', "").to_lowercase();
    let approved = decide(&server, &server.operator_token, &loose, "approve", None).await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    let approved = approved.json();
    assert_eq!(approved["status"], "approved");
    assert!(approved["decided_by"].as_str().is_some());
    let agent_id = approved["agent_id"].as_str().unwrap().to_owned();
    // Decided once.
    decide(&server, &server.operator_token, user_code, "deny", None)
        .await
        .problem(404, "not_found");

    server.advance(Duration::from_secs(20));
    let reply = poll(&server, &device).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    let body = reply.json();
    assert_eq!(
        body["scope"],
        format!("agent:{agent_id}:inbox messages:send")
    );
    assert_eq!(body["expires_in"], 900);
    let access = body["access_token"].as_str().unwrap().to_owned();
    let first_refresh = body["refresh_token"].as_str().unwrap().to_owned();
    assert!(first_refresh.starts_with("sb_rt_"));
    assert_eq!(crate::oauth::part(&access, 1)["sub"], agent_id.as_str());
    // The tokens are taken once.
    server.advance(Duration::from_secs(20));
    oauth_error(&poll(&server, &device).await, 400, "invalid_grant");
    assert_eq!(
        get_with(&server, &access, "agents/carol/inbox")
            .await
            .status,
        200
    );

    // The login is one of carol's credentials.
    let listed = call(server.operator().request(Method::GET, "ops/tokens"))
        .await
        .json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "device login: carol" && c["kind"] == "agent"),
        "{listed}"
    );

    // A scope on refresh is refused before the token is spent.
    let scoped = post_form(
        &server,
        "/oauth/token",
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &first_refresh),
            ("scope", "messages:send"),
        ],
    )
    .await;
    oauth_error(&scoped, 400, "invalid_scope");

    // Refresh rotates: a new pair each time.
    let reply = refresh(&server, &first_refresh).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let second_refresh = reply.json()["refresh_token"].as_str().unwrap().to_owned();
    let second_access = reply.json()["access_token"].as_str().unwrap().to_owned();
    assert_ne!(second_refresh, first_refresh);
    assert_eq!(
        get_with(&server, &second_access, "agents/carol/inbox")
            .await
            .status,
        200
    );

    // The first one used again: theft is assumed and the whole login ends.
    let reused = refresh(&server, &first_refresh).await;
    oauth_error(&reused, 400, "invalid_grant");
    assert!(reused.text().contains("used before"), "{}", reused.text());
    oauth_error(
        &refresh(&server, &second_refresh).await,
        400,
        "invalid_grant",
    );
    for jwt in [&access, &second_access] {
        get_with(&server, jwt, "agents/carol/inbox")
            .await
            .problem(401, "unauthorized");
    }
}

#[tokio::test]
async fn a_denied_an_expired_and_another_clients_code_get_no_tokens() {
    let server = TestServer::with(manual()).await;
    let denied = ask(&server, "dora", None).await;
    let unanswered = ask(&server, "erin", None).await;
    let reply = decide(&server, &server.operator_token, code(&denied), "deny", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["status"], "denied");
    oauth_error(&poll(&server, &denied).await, 400, "access_denied");
    // No agent was made for a denied request.
    let agents = call(server.operator().request(Method::GET, "ops/agents"))
        .await
        .json();
    assert!(!agents.to_string().contains("dora"), "{agents}");

    oauth_error(
        &poll_as(&server, &unanswered, "other-cli").await,
        400,
        "invalid_grant",
    );
    server.advance(Duration::from_secs(600));
    oauth_error(&poll(&server, &unanswered).await, 400, "expired_token");
    decide(
        &server,
        &server.operator_token,
        code(&unanswered),
        "approve",
        None,
    )
    .await
    .problem(404, "not_found");

    // Bad requests, as OAuth errors.
    for (pairs, error) in [
        (vec![("scope", "agent:x")], "invalid_request"),
        (vec![("client_id", "c")], "invalid_request"),
        (
            vec![("client_id", "c"), ("scope", "ops:write")],
            "invalid_scope",
        ),
        (
            vec![("client_id", "c"), ("scope", "agent:bad name")],
            "invalid_scope",
        ),
    ] {
        oauth_error(
            &post_form(&server, "/oauth/device_authorization", &pairs).await,
            400,
            error,
        );
    }
    // A user code of no shape is refused, not looked up.
    decide(&server, &server.operator_token, "nope", "approve", None)
        .await
        .problem(400, "validation_failed");
}

#[tokio::test]
async fn a_request_belongs_to_the_tenant_it_names_and_the_operator_names_the_agent() {
    let server = TestServer::with(manual()).await;
    let (research, research_op) = server.tenant("research").await;
    let ours = ask(&server, "frank", None).await;
    let theirs = ask(&server, "gina", Some("research")).await;
    let nobodys = ask(&server, "hank", Some("no-such-tenant")).await;

    let listed = |token: String| {
        let server = &server;
        async move {
            let client = switchboard_tests::sdk::Client::new(&server.url, token.as_str()).unwrap();
            call(client.request(Method::GET, "ops/device-requests"))
                .await
                .json()
        }
    };
    let default_list = listed(server.operator_token.clone()).await;
    let research_list = listed(research.operator_token.clone()).await;
    assert!(default_list.to_string().contains(code(&ours)));
    assert!(!default_list.to_string().contains(code(&theirs)));
    assert!(research_list.to_string().contains(code(&theirs)));
    assert!(!research_list.to_string().contains(code(&ours)));
    for list in [&default_list, &research_list] {
        assert!(!list.to_string().contains(code(&nobodys)), "{list}");
    }
    // Another tenant's code is one that does not exist.
    decide(
        &server,
        &research.operator_token,
        code(&ours),
        "approve",
        None,
    )
    .await
    .problem(404, "not_found");

    // The operator may log the device in as another agent, new or existing.
    let (_, _bob) = server.agent("bob").await;
    for (op_token, device, agent) in [
        (&server.operator_token, &ours, "bob"),
        (&research.operator_token, &theirs, "gina-2"),
    ] {
        let reply = decide(
            &server,
            op_token,
            code(device),
            "approve",
            Some(json!({ "agent": agent })),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        let (access, _) = tokens(&server, device).await;
        let inbox = get_with(&server, &access, &format!("agents/{agent}/inbox")).await;
        assert_eq!(inbox.status, 200, "{agent}: {}", inbox.text());
    }
    assert!(
        research_op
            .request(Method::GET, "ops/agents")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("gina-2")
    );
}

#[tokio::test]
async fn logging_out_or_revoking_the_agent_ends_the_login() {
    let server = TestServer::with(manual()).await;
    let device = ask(&server, "ivy", None).await;
    approve(&server, &device).await;
    let (access, refresh_token) = tokens(&server, &device).await;
    // RFC 7009 with the refresh token: the login and its access tokens end.
    let reply = post_form(
        &server,
        "/oauth/revoke",
        &[
            ("token", &refresh_token),
            ("token_type_hint", "refresh_token"),
        ],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    oauth_error(
        &refresh(&server, &refresh_token).await,
        400,
        "invalid_grant",
    );
    get_with(&server, &access, "agents/ivy/inbox")
        .await
        .problem(401, "unauthorized");

    // Another login of the same agent ends with the agent's credentials.
    let device = ask(&server, "ivy", None).await;
    approve(&server, &device).await;
    server.advance(Duration::from_secs(5));
    let (access, refresh_token) = tokens(&server, &device).await;
    assert_eq!(
        get_with(&server, &access, "agents/ivy/inbox").await.status,
        200
    );
    server.operator().revoke_agent("ivy").await.unwrap();
    oauth_error(
        &refresh(&server, &refresh_token).await,
        400,
        "invalid_grant",
    );
    get_with(&server, &access, "agents/ivy/inbox")
        .await
        .problem(401, "unauthorized");
}

/// Races: one refresh token used by many at once gets at most one new pair (and,
/// being reused, ends the login); one request approved by two operators at once
/// is approved once, with one credential.
#[tokio::test]
async fn one_refresh_token_used_at_once_by_many_rotates_at_most_once() {
    let server = TestServer::start().await;
    let device = ask(&server, "jo", None).await;
    approve(&server, &device).await;
    let (_, refresh_token) = tokens(&server, &device).await;
    let replies = futures::future::join_all((0..8).map(|_| refresh(&server, &refresh_token))).await;
    let won: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
    assert!(
        won.len() <= 1,
        "{} uses of one refresh token succeeded",
        won.len()
    );
    for reply in replies.iter().filter(|r| r.status != 200) {
        oauth_error(reply, 400, "invalid_grant");
    }
    if let Some(winner) = won.first() {
        // The others were reuses: the login is over, the new pair with it.
        let next = winner.json()["refresh_token"].as_str().unwrap().to_owned();
        oauth_error(&refresh(&server, &next).await, 400, "invalid_grant");
    }

    let device = ask(&server, "kim", None).await;
    let code = code(&device).to_owned();
    let (a, b) = tokio::join!(
        decide(&server, &server.operator_token, &code, "approve", None),
        decide(&server, &server.operator_token, &code, "approve", None)
    );
    let mut statuses = [a.status, b.status];
    statuses.sort();
    assert_eq!(statuses, [200, 404], "{} / {}", a.text(), b.text());
    let tokens = call(server.operator().request(Method::GET, "ops/tokens"))
        .await
        .json();
    let logins = tokens
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["label"] == "device login: kim")
        .count();
    assert_eq!(logins, 1, "{tokens}");
}

/// The SDK's side: a device login, then a client that renews its access token
/// from the refresh token. The server's clock passes the token's expiry between
/// claims; the next call is refused, renewed and retried, and no event is lost.
#[tokio::test]
async fn the_sdk_logs_in_by_device_and_renews_its_access_token_without_losing_work() {
    use std::sync::Arc;
    use switchboard_tests::sdk::login::{DeviceLogin, MemoryRefreshStore, RefreshTokenStore};
    use switchboard_tests::sdk::proto::{ClaimRequest, SendMessage};

    let server = TestServer::with(manual()).await;
    let http = switchboard_tests::sdk::reqwest::Client::new();
    let login = DeviceLogin::start(&http, &server.url, "sdk-test", "lena", None)
        .await
        .expect("device login");
    assert!(!format!("{login:?}").contains("sb_dc_"), "{login:?}");
    let approved = decide(
        &server,
        &server.operator_token,
        &login.user_code,
        "approve",
        None,
    )
    .await;
    assert_eq!(approved.status, 200, "{}", approved.text());
    let first = login.wait(&http).await.expect("approved");
    let store = Arc::new(MemoryRefreshStore::new(first.clone()));
    let lena = switchboard_tests::sdk::Client::builder()
        .build_with_login(&server.url, store.clone())
        .expect("client");

    let op = server.operator();
    for n in 0..3 {
        op.send_message(
            "lena",
            &SendMessage {
                payload: json!({"n": n}),
                ..Default::default()
            },
            &switchboard_tests::key(),
        )
        .await
        .expect("send");
    }
    let one = ClaimRequest {
        limit: Some(1),
        ..ClaimRequest::default()
    };
    let mut handled = Vec::new();
    for round in 0..3 {
        if round > 0 {
            // Past the access token's 15 minutes on the server's clock.
            server.advance(Duration::from_secs(15 * 60 + 1));
        }
        let claimed = lena.claim("lena", &one).await.expect("claim after renewal");
        let event = &claimed.events[0];
        lena.ack("lena", event.event.event_id, event.claim_token)
            .await
            .expect("ack");
        handled.push(
            event.event.payload.as_ref().expect("payload")["n"]
                .as_i64()
                .unwrap(),
        );
    }
    assert_eq!(handled, [0, 1, 2], "every event, once, in order");
    let snapshot = op.snapshot("lena").await.expect("snapshot");
    assert_eq!(snapshot.counts.completed, 3, "{snapshot:?}");
    // Each renewal rotated the refresh token the store keeps.
    let now = store.load().unwrap();
    assert_ne!(now.expose(), first.expose());

    // The first refresh token used again ends the login: the client says so.
    oauth_error(
        &refresh(&server, first.expose()).await,
        400,
        "invalid_grant",
    );
    server.advance(Duration::from_secs(15 * 60 + 1));
    let ended = lena.claim("lena", &one).await.expect_err("the login ended");
    assert!(ended.to_string().contains("log in again"), "{ended}");
}

/// Credentials form a tree (issue 36): a device login hangs from the operator
/// credential that approved it, and revoking that credential ends the login (its
/// refresh and access tokens) in the same transaction. The token list names the
/// approver of each login.
#[tokio::test]
async fn revoking_the_approving_operator_ends_the_logins_it_approved() {
    let server = TestServer::with(manual()).await;
    // A tenant's own operator (not the deployment admin's token, which the test
    // server needs) approves two logins; the admin's approves a third.
    let (b, b_op) = server.tenant("approvers").await;
    let first = ask(&server, "dora", Some("approvers")).await;
    let reply = decide(&server, &b.operator_token, code(&first), "approve", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let (access, refresh_token) = tokens(&server, &first).await;
    let second = ask(&server, "dora", Some("approvers")).await;
    let reply = decide(&server, &b.operator_token, code(&second), "approve", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    server.advance(Duration::from_secs(5));
    let (_, second_refresh) = tokens(&server, &second).await;
    assert_eq!(
        get_with(&server, &access, "agents/dora/inbox").await.status,
        200
    );

    let listed = b_op.tokens().await.expect("tokens");
    let approver = listed
        .iter()
        .find(|c| c.kind == "operator")
        .expect("B's operator token")
        .token_id
        .clone();
    let logins: Vec<_> = listed
        .iter()
        .filter(|c| c.label.starts_with("device login"))
        .collect();
    assert_eq!(logins.len(), 2, "{listed:?}");
    assert!(
        logins
            .iter()
            .all(|c| c.approved_by.as_deref() == Some(approver.as_str())),
        "each login names its approver: {logins:?}"
    );

    // The approver revokes itself (RFC 7009): both logins end with it.
    let reply = post_form(&server, "/oauth/revoke", &[("token", &b.operator_token)]).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    for token in [&refresh_token, &second_refresh] {
        oauth_error(&refresh(&server, token).await, 400, "invalid_grant");
    }
    get_with(&server, &access, "agents/dora/inbox")
        .await
        .problem(401, "unauthorized");
}

/// A login lives 30 days from its start and ends after 7 days without a refresh
/// (the defaults), on the server's clock.
#[tokio::test]
async fn a_login_ends_after_its_idle_and_its_absolute_lifetime() {
    let server = TestServer::with(manual()).await;
    let day = Duration::from_secs(24 * 3600);
    // Idle: unused for 7 days.
    let device = ask(&server, "sleepy", None).await;
    approve(&server, &device).await;
    let (_, refresh_token) = tokens(&server, &device).await;
    server.advance(day * 6);
    let reply = refresh(&server, &refresh_token).await;
    assert_eq!(reply.status, 200, "6 days idle is fine: {}", reply.text());
    let refresh_token = reply.json()["refresh_token"].as_str().unwrap().to_owned();
    server.advance(day * 7 + Duration::from_secs(1));
    let reply = refresh(&server, &refresh_token).await;
    oauth_error(&reply, 400, "invalid_grant");
    assert!(
        reply.text().contains("idle") && reply.text().contains("log in again"),
        "{}",
        reply.text()
    );

    // Absolute: refreshed every 6 days, it still ends 30 days after the login.
    let device = ask(&server, "busy", None).await;
    approve(&server, &device).await;
    let (_, mut refresh_token) = tokens(&server, &device).await;
    for _ in 0..4 {
        server.advance(day * 6);
        let reply = refresh(&server, &refresh_token).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        refresh_token = reply.json()["refresh_token"].as_str().unwrap().to_owned();
    }
    server.advance(day * 6);
    let reply = refresh(&server, &refresh_token).await;
    oauth_error(&reply, 400, "invalid_grant");
    assert!(reply.text().contains("absolute"), "{}", reply.text());
    // The login is ended, not only refused: its credential is revoked.
    let listed = server.operator().tokens().await.unwrap();
    let busy = listed
        .iter()
        .find(|c| c.label == "device login: busy")
        .expect("busy's login");
    assert!(busy.revoked_at.is_some(), "{busy:?}");
}
