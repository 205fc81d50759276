//! `switchboard serve` as a user runs it: the ready line, the operator token file,
//! JSON logs that never carry secrets or payloads (I11), graceful SIGTERM with an SSE
//! stream open, and one process per database file.

mod common;

use common::{ready_line, serve_command, sqlite_url};
use futures::StreamExt;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use switchboard_sdk::Client;
use switchboard_sdk::proto::{ClaimRequest, CreateAgent, SendMessage};

fn spawn(dir: &Path, extra: &[&str]) -> Child {
    serve_command(&sqlite_url(dir), dir)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchboard serve")
}

/// Reads the ready line; returns the URL.
fn ready(child: &mut Child) -> String {
    let v = ready_line(child);
    let obj = v.as_object().expect("an object");
    let mut keys: Vec<_> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["console_url", "ready", "url"],
        "exactly these members: {v}"
    );
    let url = v["url"].as_str().expect("url").to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(
        !url.ends_with(":0"),
        "the real port is printed, not 0: {url}"
    );
    assert_eq!(v["console_url"], format!("{url}/"));
    url
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_ready_keeps_secrets_out_of_logs_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = spawn(
        dir.path(),
        &["--log-format", "json", "--heartbeat-seconds", "0.2"],
    );
    let url = ready(&mut child);

    let token_file = dir.path().join("operator-token");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file)
            .expect("token file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the operator token file is private");
    }
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_owned();
    let op = Client::new(&url, token.as_str()).expect("client");
    let agent = op
        .create_agent(&CreateAgent {
            name: "logger".into(),
        })
        .await
        .expect("agent");
    let key = "idem-key-that-must-not-be-logged-7f3a";
    let marker = "payload-marker-that-must-not-be-logged-91c2";
    let msg = SendMessage {
        payload: serde_json::json!({ "secret": marker }),
        ..Default::default()
    };
    op.send_message("logger", &msg, key).await.expect("send");
    let ag = Client::new(&url, agent.token.as_str()).expect("agent client");
    let claimed = ag
        .claim("logger", &ClaimRequest::default())
        .await
        .expect("claim");
    assert_eq!(claimed.events.len(), 1);
    // A failing request too: errors are logged, secrets still are not.
    let bad = Client::new(&url, "sb_op_not-a-real-token-5d1e").expect("client");
    assert_eq!(bad.overview().await.expect_err("401").status(), Some(401));

    // An open SSE stream must not hold up shutdown.
    let mut stream = ag.subscribe("logger").await.expect("subscribe");
    let first = stream.next().await.expect("first event").expect("ok");
    assert_eq!(first.event, "inbox_updated");

    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "graceful shutdown exits 0, got {status}");
    // The stream ends (closed by the server), rather than hanging.
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(item) = stream.next().await {
            if item.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(rest.is_ok(), "the SSE stream ended at shutdown");

    let mut logs = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut logs)
        .expect("read logs");
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 5, "requests were logged: {logs}");
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("--log-format json writes JSON lines ({e}): {line}"));
    }
    for secret in [
        token.as_str(),
        agent.token.as_str(),
        key,
        marker,
        "sb_op_not-a-real-token-5d1e",
    ] {
        assert!(
            !logs.contains(secret),
            "a secret or payload reached the logs: {secret}"
        );
    }
    assert!(
        logs.contains("/api/v1/agents/logger/messages"),
        "paths are logged"
    );
    assert!(
        logs.contains("database closed"),
        "the database was closed: {logs}"
    );

    // A restart reuses the token file's token.
    let mut again = spawn(dir.path(), &[]);
    let url = ready(&mut again);
    let op = Client::new(&url, token.as_str()).expect("client");
    op.overview()
        .await
        .expect("the same operator token works after a restart");
    assert_eq!(
        std::fs::read_to_string(&token_file).expect("token").trim(),
        token,
        "the token file is unchanged"
    );

    // A second server on the same file refuses to start, and says why.
    let mut second = spawn(dir.path(), &[]);
    let status = wait_exit(&mut second, Duration::from_secs(10));
    assert!(
        !status.success(),
        "a second server on the same file must not start"
    );
    let mut err = String::new();
    second
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("stderr");
    assert!(err.contains("another switchboard process"), "{err}");

    sigterm(&again);
    assert!(wait_exit(&mut again, Duration::from_secs(10)).success());
}

/// The second line `serve` prints: a one-time console login link. It logs the browser
/// in (an HttpOnly, SameSite=Strict session cookie, then a redirect to the console
/// without the ticket), works once, and never reaches the logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_prints_a_one_time_console_login_link() {
    use switchboard_sdk::reqwest;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = spawn(dir.path(), &["--log-format", "json"]);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    let url = ready["url"].as_str().expect("url").to_owned();
    let mut second = String::new();
    out.read_line(&mut second).expect("login line");
    let line: serde_json::Value = serde_json::from_str(&second).expect("the login line is JSON");
    assert_eq!(line["login_expires_in_seconds"], 120, "{second}");
    let login_url = line["login_url"].as_str().expect("login_url").to_owned();
    assert!(
        login_url.starts_with(&format!("{url}/login?ticket=")),
        "{login_url}"
    );

    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let answer = http.get(&login_url).send().await.expect("login");
    assert_eq!(answer.status(), 303, "redeemed with a redirect");
    assert_eq!(
        answer.headers()["location"],
        "/",
        "no ticket left in the URL"
    );
    let cookie = answer.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .to_owned();
    for attribute in ["sb_session=", "HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{attribute} in {cookie}");
    }
    let session = cookie.split(';').next().expect("name=value").to_owned();
    let me: serde_json::Value = http
        .get(format!("{url}/api/v1/session"))
        .header("cookie", &session)
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("JSON");
    assert_eq!(me["via"], "cookie");
    assert_eq!(me["read_only"], false, "the printed link is the operator's");

    let again = http.get(&login_url).send().await.expect("second use");
    assert_eq!(again.status(), 401, "a link works once");
    let problem: serde_json::Value = again.json().await.expect("a problem document");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("already used")),
        "{problem}"
    );

    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    let mut logs = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut logs)
        .expect("read logs");
    let ticket = login_url.split("ticket=").nth(1).expect("ticket");
    assert!(!logs.contains(ticket), "the ticket reached the logs");
    assert!(logs.contains("console login link redeemed"), "{logs}");
}

#[test]
fn webhook_loopback_targets_are_refused_on_a_public_listener() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "0.0.0.0:0", "--webhook-allow-loopback"])
        // Past the plain-HTTP refusal (tests/tls.rs), to the loopback one.
        .arg("--allow-plain-http")
        .arg("--database-url")
        .arg(sqlite_url(dir.path()))
        .arg("--operator-token-file")
        .arg(dir.path().join("operator-token"))
        .output()
        .expect("run switchboard serve");
    assert!(!out.status.success(), "it must not start");
    assert!(out.stdout.is_empty(), "no ready line");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--webhook-allow-loopback is for development"),
        "{stderr}"
    );
}

/// I11 at the most verbose level: every credential a deployment mints and uses (the
/// admin's and another tenant's operator tokens, agent tokens, a metrics token, a
/// read-only console link and its session), used, refused after revocation and
/// faked, never reaches the logs, even with `SWITCHBOARD_LOG=trace` (every crate's
/// debug and trace lines, what an operator turns on to chase a problem).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_reaches_the_trace_logs() {
    use switchboard_sdk::reqwest;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = serve_command(&sqlite_url(dir.path()), dir.path())
        .args(["--log-format", "json"])
        .env("SWITCHBOARD_LOG", "trace")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn switchboard serve");
    // Debug logs are many: read them as they come, or the pipe fills and the
    // server blocks on its next line.
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut logs = String::new();
        stderr.read_to_string(&mut logs).expect("read logs");
        logs
    });
    let url = ready(&mut child);
    let admin_token = std::fs::read_to_string(dir.path().join("operator-token"))
        .expect("token")
        .trim()
        .to_owned();
    let admin = Client::new(&url, admin_token.as_str()).expect("client");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let mut secrets = vec![admin_token.clone()];

    // Another tenant, its operator, its agent and a metrics token.
    let beta = admin.create_tenant("beta").await.expect("tenant");
    secrets.push(beta.operator_token.clone());
    let beta_op = Client::new(&url, beta.operator_token.as_str()).expect("client");
    let beta_agent = beta_op
        .create_agent(&CreateAgent { name: "b1".into() })
        .await
        .expect("agent");
    secrets.push(beta_agent.token.as_str().to_owned());
    let minted: serde_json::Value = beta_op
        .request(reqwest::Method::POST, "ops/tokens")
        .json(&serde_json::json!({"scopes": ["metrics:read"], "label": "prometheus"}))
        .send()
        .await
        .expect("mint")
        .json()
        .await
        .expect("JSON");
    let metrics_token = minted["token"].as_str().expect("token").to_owned();
    secrets.push(metrics_token.clone());
    let scrape = || {
        http.get(format!("{url}/metrics"))
            .bearer_auth(&metrics_token)
            .send()
    };
    assert_eq!(scrape().await.expect("scrape").status(), 200);

    // An agent of the default tenant at work.
    let a1 = admin
        .create_agent(&CreateAgent { name: "a1".into() })
        .await
        .expect("agent");
    secrets.push(a1.token.as_str().to_owned());
    let agent = Client::new(&url, a1.token.as_str()).expect("client");
    admin
        .send_message("a1", &SendMessage::default(), "key-1")
        .await
        .expect("send");
    agent
        .claim("a1", &ClaimRequest::default())
        .await
        .expect("claim");

    // A read-only console link, redeemed into a session.
    let link: serde_json::Value = admin
        .request(reqwest::Method::POST, "ops/login-links")
        .json(&serde_json::json!({"read_only": true}))
        .send()
        .await
        .expect("link")
        .json()
        .await
        .expect("JSON");
    let path = link["path"].as_str().expect("path");
    secrets.push(path.split("ticket=").nth(1).expect("ticket").to_owned());
    let redeemed = http
        .get(format!("{url}{path}"))
        .send()
        .await
        .expect("redeem");
    assert_eq!(redeemed.status(), 303);
    let cookie = redeemed.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("name=value")
        .to_owned();
    secrets.push(cookie.trim_start_matches("sb_session=").to_owned());
    let me = http
        .get(format!("{url}/api/v1/session"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("session");
    assert_eq!(me.status(), 200);

    // An access token (a JWT) for a1, used, then revoked by its holder; a token
    // endpoint refusal that names the subject token.
    let exchanged: serde_json::Value = http
        .post(format!("{url}/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange\
             &subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
             &subject_token={}",
            a1.token.as_str()
        ))
        .send()
        .await
        .expect("exchange")
        .json()
        .await
        .expect("JSON");
    let jwt = exchanged["access_token"]
        .as_str()
        .expect("access token")
        .to_owned();
    secrets.push(jwt.clone());
    secrets.push(jwt.rsplit('.').next().expect("signature").to_owned());
    let as_a1 = Client::new(&url, jwt.as_str()).expect("client");
    as_a1
        .poll("a1", 0, None)
        .await
        .expect("the access token works");
    let revoke = |token: String| {
        http.post(format!("{url}/oauth/revoke"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    assert_eq!(revoke(jwt.clone()).await.expect("revoke").status(), 200);
    assert!(as_a1.poll("a1", 0, None).await.is_err(), "revoked");

    // A device login of beta's b2: asked, approved by beta's operator, polled,
    // refreshed (rotating), then ended with its refresh token; a repeated device
    // code and a reused refresh token are refused.
    let form = |path: &str, body: String| {
        http.post(format!("{url}{path}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let device: serde_json::Value = form(
        "/oauth/device_authorization",
        "client_id=trace-test&scope=agent%3Ab2&tenant=beta".to_owned(),
    )
    .await
    .expect("device authorization")
    .json()
    .await
    .expect("JSON");
    let device_code = device["device_code"]
        .as_str()
        .expect("device_code")
        .to_owned();
    secrets.push(device_code.clone());
    let poll = || {
        form(
            "/oauth/token",
            format!(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code\
                 &client_id=trace-test&device_code={device_code}"
            ),
        )
    };
    let user_code = device["user_code"].as_str().expect("user_code");
    let approved = beta_op
        .request(
            reqwest::Method::POST,
            &format!("ops/device-requests/{user_code}/approve"),
        )
        .send()
        .await
        .expect("approve");
    assert_eq!(approved.status(), 200);
    let tokens: serde_json::Value = poll().await.expect("poll").json().await.expect("JSON");
    let first_refresh = tokens["refresh_token"]
        .as_str()
        .expect("refresh")
        .to_owned();
    secrets.push(first_refresh.clone());
    secrets.push(tokens["access_token"].as_str().expect("access").to_owned());
    let refreshed: serde_json::Value = form(
        "/oauth/token",
        format!("grant_type=refresh_token&refresh_token={first_refresh}"),
    )
    .await
    .expect("refresh")
    .json()
    .await
    .expect("JSON");
    let second_refresh = refreshed["refresh_token"]
        .as_str()
        .expect("refresh")
        .to_owned();
    secrets.push(second_refresh.clone());
    secrets.push(
        refreshed["access_token"]
            .as_str()
            .expect("access")
            .to_owned(),
    );
    assert_eq!(poll().await.expect("poll").status(), 400, "taken once");
    assert_eq!(revoke(second_refresh).await.expect("revoke").status(), 200);
    let reused = form(
        "/oauth/token",
        format!("grant_type=refresh_token&refresh_token={first_refresh}"),
    )
    .await
    .expect("reuse");
    assert_eq!(reused.status(), 400);

    // An app's sign-in (authorization code + PKCE) allowed by beta's operator: the
    // code verifier, the code and the tokens it gave; the code redeemed twice.
    let verifier = "trace-test-code-verifier-0123456789-abcdefghijklmn";
    secrets.push(verifier.to_owned());
    let challenge = switchboard_sdk::signin::code_challenge(verifier);
    let redirect = "http%3A%2F%2F127.0.0.1%3A9%2Fcb";
    let request = format!(
        "response_type=code&client_id=trace-test&redirect_uri={redirect}\
         &code_challenge={challenge}&code_challenge_method=S256&state=st"
    );
    let page = http
        .get(format!("{url}/oauth/authorize?{request}"))
        .send()
        .await
        .expect("authorize");
    assert_eq!(page.status(), 200);
    let allowed: serde_json::Value = beta_op
        .request(reqwest::Method::POST, "ops/authorizations")
        .json(&serde_json::json!({"request": request, "allow": true}))
        .send()
        .await
        .expect("consent")
        .json()
        .await
        .expect("JSON");
    let to =
        reqwest::Url::parse(allowed["redirect_to"].as_str().expect("redirect_to")).expect("a URL");
    let code = to
        .query_pairs()
        .find(|(k, _)| k == "code")
        .expect("a code")
        .1
        .into_owned();
    secrets.push(code.clone());
    let redeem = || {
        form(
            "/oauth/token",
            format!(
                "grant_type=authorization_code&code={code}&redirect_uri={redirect}\
                 &client_id=trace-test&code_verifier={verifier}"
            ),
        )
    };
    let signed_in: serde_json::Value = redeem().await.expect("redeem").json().await.expect("JSON");
    for token in ["refresh_token", "access_token"] {
        secrets.push(signed_in[token].as_str().expect("a token").to_owned());
    }
    assert_eq!(
        redeem().await.expect("redeem").status(),
        400,
        "redeemed once"
    );

    // Revoked, then refused; and a token that never was.
    let prometheus = beta_op
        .tokens()
        .await
        .expect("tokens")
        .into_iter()
        .find(|c| c.label == "prometheus")
        .expect("the metrics token")
        .token_id;
    assert_eq!(
        beta_op
            .revoke_token(&prometheus)
            .await
            .expect("revoke")
            .revoked,
        1
    );
    assert_eq!(scrape().await.expect("scrape").status(), 401);
    assert_eq!(admin.revoke_agent("a1").await.expect("revoke").revoked, 1);
    assert!(agent.claim("a1", &ClaimRequest::default()).await.is_err());
    let fake = "sb_ag_never-minted-token-0c4f";
    secrets.push(fake.to_owned());
    let refused = Client::new(&url, fake).expect("client");
    assert_eq!(
        refused.overview().await.expect_err("401").status(),
        Some(401)
    );

    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    let logs = reader.join().expect("the log reader");
    assert!(
        logs.contains("\"level\":\"DEBUG\""),
        "debug lines were written: {}",
        &logs[..logs.len().min(2000)]
    );
    for secret in &secrets {
        assert!(!secret.is_empty());
        assert!(
            !logs.contains(secret.as_str()),
            "a credential reached the trace logs: {}…",
            &secret[..8.min(secret.len())]
        );
    }
}
