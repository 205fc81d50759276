//! `switchboard agent broker` (the local token broker, issue 40) as a host runs
//! it: the real binary on a temp socket, a real server (in process, on
//! 127.0.0.1:0), and this test process as the sidecar (its executable is what the
//! policy lists). The host's login is a static agent token from the environment;
//! `device_login_host…` covers a device login (a JWT subject bound to a key).
//!
//! The uid check (another user) is in the Python suite (`test_broker.py`), which
//! runs a client as `nobody` with setpriv.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use switchboard_sdk::broker::{Broker, TokenRequest, codes};
use switchboard_sdk::proto::SendMessage;
use switchboard_sdk::{Client, Error};
use switchboard_tests::TestServer;

/// A running broker; killed when dropped.
struct Running {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Running {
    fn client(&self) -> Broker {
        Broker::new(Some(&self.socket))
    }
}

/// This test binary, as the broker sees a peer's executable.
fn me() -> String {
    std::fs::canonicalize(std::env::current_exe().unwrap())
        .unwrap()
        .display()
        .to_string()
}

fn broker_cmd(dir: &Path, server: &str, token: &str, policy: &str) -> Command {
    std::fs::write(dir.join("broker.toml"), policy).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.args(["agent", "broker", "--socket"])
        .arg(dir.join("run/broker.sock"))
        .arg("--policy")
        .arg(dir.join("broker.toml"))
        .env("SWITCHBOARD_SERVER", server)
        .env("SWITCHBOARD_TOKEN", token)
        .env("SWITCHBOARD_STATE", dir.join("host.db"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("SWITCHBOARD_LOG", "info");
    cmd
}

/// Starts the broker for the static `token` at `server` with `policy`; returns
/// once it listens.
fn start(server: &str, token: &str, policy: &str) -> Running {
    let dir = tempfile::tempdir().unwrap();
    // Its log (one line a decision) goes to a file: a pipe nobody reads would
    // fill up and stop it.
    let log = dir.path().join("broker.log");
    let mut child = broker_cmd(dir.path(), server, token, policy)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn switchboard agent broker");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Ok(ready) = serde_json::from_str::<Value>(&line) else {
        let _ = child.wait();
        panic!(
            "the broker did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    };
    assert_eq!(ready["ready"], true, "{ready}");
    Running {
        socket: PathBuf::from(ready["socket"].as_str().unwrap()),
        child,
        _dir: dir,
    }
}

fn policy(entries: &[(&str, &str, Option<&str>)]) -> String {
    entries
        .iter()
        .map(|(agent, exe, scopes)| {
            let scopes = scopes.map_or(String::new(), |s| format!("scopes = {s}\n"));
            format!("[[allow]]\nagent = {agent:?}\nexecutables = [{exe:?}]\n{scopes}\n")
        })
        .collect()
}

fn request(agent: &str, scope: Option<&str>) -> TokenRequest {
    TokenRequest {
        agent: agent.to_owned(),
        scope: scope.map(str::to_owned),
        signing_key: None,
    }
}

#[track_caller]
fn refused(result: Result<impl std::fmt::Debug, Error>, status: u16, code: &str) -> String {
    let error = result.expect_err("refused");
    let problem = error
        .problem()
        .unwrap_or_else(|| panic!("a problem: {error}"));
    assert_eq!(
        (error.status(), problem.code.as_deref()),
        (Some(status), Some(code)),
        "{error}"
    );
    problem.detail.clone().unwrap_or_default()
}

fn claims(jwt: &str) -> Value {
    use base64::Engine as _;
    let part = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_sidecar_gets_a_narrower_short_lived_token_bound_to_its_key() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let broker = start(
        &server.url,
        &alice.token,
        &policy(&[(
            "alice",
            &me(),
            Some(r#"["messages:send", "agent:{agent_id}:read"]"#),
        )]),
    );
    let client = broker.client();
    assert_eq!(client.health().await.unwrap().status, "ok");

    // Narrower: what was asked for, within the cap; short-lived.
    let granted = client
        .token(&request("alice", Some("messages:send")))
        .await
        .unwrap();
    assert_eq!(granted.scope, "messages:send");
    assert_eq!(granted.token_type, "Bearer");
    assert!(
        granted.expires_in > 0 && granted.expires_in <= 900,
        "{granted:?}"
    );
    assert_eq!(granted.server, server.url.trim_end_matches('/'));
    let jwt = claims(granted.access_token.expose());
    assert_eq!(jwt["scope"], "messages:send");
    assert!(jwt["exp"].as_i64().unwrap() - jwt["iat"].as_i64().unwrap() <= 900);
    // Without `scope`: the policy's cap, `{agent_id}` filled in; never the inbox
    // scope the host's token has.
    let capped = client.token(&request("alice", None)).await.unwrap();
    assert_eq!(
        capped.scope,
        format!("messages:send agent:{}:read", alice.agent_id)
    );
    let wider = format!("agent:{}:inbox", alice.agent_id);
    let detail = refused(
        client.token(&request("alice", Some(&wider))).await,
        403,
        codes::SCOPE_NOT_ALLOWED,
    );
    assert!(
        detail.contains("outside what the policy allows"),
        "{detail}"
    );
    refused(
        client
            .token(&request("alice", Some("agent:{agent_id}:inbox")))
            .await,
        403,
        codes::SCOPE_NOT_ALLOWED,
    );

    // A client from the broker: its tokens are bound to its in-memory key, and
    // its requests are signed with it.
    let sidecar = client
        .client(Client::builder(), "alice", Some("messages:send"))
        .await
        .unwrap();
    let key_id = sidecar.signing_key_id().expect("the sidecar holds a key");
    sidecar
        .send_message(
            "bob",
            &SendMessage {
                payload: serde_json::json!({"text": "from the sidecar"}),
                ..Default::default()
            },
            &switchboard_sdk::new_idempotency_key(),
        )
        .await
        .expect("a signed send with the broker's token");
    let page = bob.poll("bob", 0, None).await.unwrap();
    assert_eq!(page.events.len(), 1);
    // A token bound to a key is useless without it.
    let bound = client
        .token(&TokenRequest {
            signing_key: Some(
                serde_json::to_value(
                    switchboard_sdk::signing::SigningKey::generate()
                        .public_key()
                        .to_jwk(),
                )
                .unwrap(),
            ),
            ..request("alice", Some("messages:send"))
        })
        .await
        .unwrap();
    assert!(
        claims(bound.access_token.expose())["cnf"]["jkt"]
            .as_str()
            .is_some_and(|j| j != key_id)
    );
    let unsigned = Client::builder()
        .retry(switchboard_sdk::RetryPolicy::none())
        .build(&server.url, bound.access_token.expose())
        .unwrap();
    let error = unsigned
        .send_message(
            "bob",
            &SendMessage {
                payload: serde_json::json!({"text": "stolen"}),
                ..Default::default()
            },
            &switchboard_sdk::new_idempotency_key(),
        )
        .await
        .expect_err("an unsigned request with a bound token");
    assert_eq!(error.status(), Some(401), "{error}");
    // A private key is never taken.
    let mut private = serde_json::to_value(
        switchboard_sdk::signing::SigningKey::generate()
            .public_key()
            .to_jwk(),
    )
    .unwrap();
    private["d"] = serde_json::json!("AAAA");
    refused(
        client
            .token(&TokenRequest {
                signing_key: Some(private),
                ..request("alice", None)
            })
            .await,
        400,
        codes::INVALID_REQUEST,
    );
}

#[tokio::test]
async fn an_unlisted_executable_or_agent_and_a_bad_request_are_refused() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let other = std::fs::canonicalize("/bin/true").unwrap();
    let broker = start(
        &server.url,
        &alice.token,
        &policy(&[
            ("alice", &other.display().to_string(), None),
            ("carol", &me(), None),
        ]),
    );
    let client = broker.client();
    // This process is not /bin/true.
    let detail = refused(
        client.token(&request("alice", None)).await,
        403,
        codes::EXECUTABLE_NOT_ALLOWED,
    );
    assert!(detail.contains(&me()), "names the executable: {detail}");
    refused(
        client.token(&request("dave", None)).await,
        403,
        codes::AGENT_NOT_ALLOWED,
    );

    // Not the protocol: raw requests over the socket.
    for (raw, status, code) in [
        (
            "POST /v1/token HTTP/1.1\r\nhost: b\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{\"x\":1}",
            400,
            codes::INVALID_REQUEST,
        ),
        (
            "POST /v1/token HTTP/1.1\r\nhost: b\r\ncontent-length: 99999\r\n\r\n",
            413,
            codes::INVALID_REQUEST,
        ),
        (
            "GET /v1/token HTTP/1.1\r\nhost: b\r\n\r\n",
            405,
            codes::METHOD_NOT_ALLOWED,
        ),
        (
            "GET /nowhere HTTP/1.1\r\nhost: b\r\n\r\n",
            404,
            codes::NOT_FOUND,
        ),
    ] {
        let answer = raw_call(&broker.socket, raw).await;
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{raw:?}: {answer}"
        );
        assert!(
            answer.contains("application/problem+json") && answer.contains(code),
            "{raw:?}: {answer}"
        );
    }
}

/// One request written as is; the answer's head and body as text.
async fn raw_call(socket: &Path, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0; 8192];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

#[tokio::test]
async fn a_revoked_host_gets_no_more_tokens_and_its_sidecars_tokens_die_with_it() {
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    server.agent("bob").await;
    let broker = start(
        &server.url,
        &alice.token,
        &policy(&[("alice", &me(), None)]),
    );
    let client = broker.client();
    let sidecar = client
        .client(
            Client::builder().retry(switchboard_sdk::RetryPolicy::none()),
            "alice",
            None,
        )
        .await
        .unwrap();
    let message = SendMessage {
        payload: serde_json::json!({"text": "before"}),
        ..Default::default()
    };
    sidecar
        .send_message("bob", &message, &switchboard_sdk::new_idempotency_key())
        .await
        .unwrap();
    let existing = client.token(&request("alice", None)).await.unwrap();

    server.operator().revoke_agent("alice").await.unwrap();

    let detail = refused(
        client.token(&request("alice", None)).await,
        401,
        codes::HOST_LOGIN_ENDED,
    );
    assert!(detail.contains("log in again"), "{detail}");
    // The server refuses the token the sidecar already had (revoked with its
    // parent), and the sidecar's renewal says why.
    let plain = Client::builder()
        .retry(switchboard_sdk::RetryPolicy::none())
        .build(&server.url, existing.access_token.expose())
        .unwrap();
    let error = plain.poll("alice", 0, None).await.expect_err("revoked");
    assert_eq!(error.status(), Some(401), "{error}");
    let error = sidecar
        .send_message("bob", &message, &switchboard_sdk::new_idempotency_key())
        .await
        .expect_err("the host's login ended");
    assert_eq!(
        error.problem().and_then(|p| p.code.as_deref()),
        Some(codes::HOST_LOGIN_ENDED),
        "{error}"
    );
}

#[test]
fn the_broker_refuses_to_start_on_a_bad_policy_or_an_open_directory() {
    let dir = tempfile::tempdir().unwrap();
    // A policy naming no file; the server is never reached.
    let out = broker_cmd(
        dir.path(),
        "http://127.0.0.1:9",
        "sb_ag_x",
        "[[allow]]\nagent = \"a\"\nexecutables = [\"python3\"]\n",
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not an absolute path"), "{err}");

    let open = dir.path().join("run");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(
        &open,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    let out = broker_cmd(
        dir.path(),
        "http://127.0.0.1:9",
        "sb_ag_x",
        &policy(&[("a", &me(), None)]),
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 700"), "{err}");
}

/// Whether `keyctl` is there for the kernel-keyring test (in CI it must be).
fn keyctl_present() -> bool {
    if Command::new("keyctl").arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "keyctl (Debian package keyutils) is required in CI"
    );
    eprintln!("SKIPPED: keyctl is not installed (apt-get install keyutils)");
    false
}

/// The host is a device login (`switchboard agent login`, a real kernel keyring):
/// its refresh token stays in the keyring and its access tokens are JWTs bound to
/// its key, so the broker exchanges a JWT and signs the token request with the
/// host's key. The sidecar's token names the host in `act`; revoking the login
/// ends the broker's tokens and the ones sidecars hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_login_host_exchanges_its_bound_jwt_and_its_revocation_cascades() {
    if !keyctl_present() {
        return;
    }
    let server = TestServer::start().await;
    server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("run/broker.sock");
    std::fs::write(
        dir.path().join("broker.toml"),
        policy(&[("alice", &me(), Some(r#"["messages:send"]"#))]),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_switchboard");
    let script = format!(
        "set -e
         {bin} agent login --server {url} --agent alice 2> {home}/login.err
         exec {bin} agent broker --socket {socket} --policy {home}/broker.toml 2> {home}/broker.log",
        url = server.url,
        home = dir.path().display(),
        socket = socket.display(),
    );
    // The kernel's persistent keyring is shared by every test of this user: a
    // profile of its own.
    let profile = format!("t-{}", uuid::Uuid::now_v7().simple());
    let mut child = tokio::process::Command::new("keyctl")
        .args(["session", "-", "sh", "-c", &script])
        .env("SWITCHBOARD_KEYRING", "keyutils")
        .env("SWITCHBOARD_PROFILE", &profile)
        .env("SWITCHBOARD_STATE", dir.path().join("host.db"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("SWITCHBOARD_LOG", "info")
        .env_remove("SWITCHBOARD_SERVER")
        .env_remove("SWITCHBOARD_TOKEN")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();

    let op = server.operator();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let code = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no device request showed"
        );
        let list: Value = op
            .request(switchboard_sdk::reqwest::Method::GET, "ops/device-requests")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(r) = list
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent_name"] == "alice" && r["status"] == "pending")
        {
            break r["user_code"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let approved = op
        .request(
            switchboard_sdk::reqwest::Method::POST,
            &format!("ops/device-requests/{code}/approve"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status(), 200);
    let mut ready = String::new();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = child.stdout.as_mut().unwrap();
        tokio::time::timeout(
            Duration::from_secs(60),
            tokio::io::BufReader::new(stdout).read_line(&mut ready),
        )
        .await
        .expect("the broker starts")
        .unwrap();
    }
    let log = || std::fs::read_to_string(dir.path().join("broker.log")).unwrap_or_default();
    assert!(ready.contains("\"ready\":true"), "{ready}\n{}", log());

    let client = Broker::new(Some(&socket));
    let granted = client
        .token(&request("alice", None))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    assert_eq!(granted.scope, "messages:send");
    assert!(granted.expires_in <= 900);
    let jwt = claims(granted.access_token.expose());
    assert!(
        jwt["act"]["sub"]
            .as_str()
            .is_some_and(|s| s.starts_with("token:")),
        "the host is named in act: {jwt}"
    );
    let sidecar = client
        .client(
            Client::builder().retry(switchboard_sdk::RetryPolicy::none()),
            "alice",
            None,
        )
        .await
        .unwrap();
    let message = SendMessage {
        payload: serde_json::json!({"text": "via a device login"}),
        ..Default::default()
    };
    sidecar
        .send_message("bob", &message, &switchboard_sdk::new_idempotency_key())
        .await
        .unwrap();
    assert_eq!(bob.poll("bob", 0, None).await.unwrap().events.len(), 1);

    // An operator revokes the device login: the broker's next answer says so, and
    // the sidecar's token is refused with it.
    let login = op
        .tokens()
        .await
        .unwrap()
        .into_iter()
        .find(|c| c.label == "device login: alice")
        .expect("the login's credential");
    op.revoke_token(&login.token_id).await.unwrap();
    let plain = Client::builder()
        .retry(switchboard_sdk::RetryPolicy::none())
        .build(&server.url, granted.access_token.expose())
        .unwrap();
    let error = plain.poll("alice", 0, None).await.expect_err("revoked");
    assert_eq!(error.status(), Some(401), "{error}");
    refused(
        client.token(&request("alice", None)).await,
        401,
        codes::HOST_LOGIN_ENDED,
    );
    let error = sidecar
        .send_message("bob", &message, &switchboard_sdk::new_idempotency_key())
        .await
        .expect_err("the host's login ended");
    assert_eq!(
        error.problem().and_then(|p| p.code.as_deref()),
        Some(codes::HOST_LOGIN_ENDED),
        "{error}"
    );
    let log = log();
    assert!(
        log.contains("token granted") && log.contains("host_login_ended"),
        "{log}"
    );
    assert!(
        !log.contains("eyJ") && !log.contains("sb_rt_"),
        "no token in the log: {log}"
    );
    // Leave nothing in the shared keyring.
    let _ = Command::new("keyctl")
        .args(["session", "-", bin, "agent", "logout"])
        .env("SWITCHBOARD_KEYRING", "keyutils")
        .env("SWITCHBOARD_PROFILE", &profile)
        .env("SWITCHBOARD_STATE", dir.path().join("host.db"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env_remove("SWITCHBOARD_SERVER")
        .env_remove("SWITCHBOARD_TOKEN")
        .output();
}

/// The desktop app hosts the same broker (issue 40): the desktop binary named by
/// `SWITCHBOARD_DESKTOP_BIN` (`cargo xtask test` sets it to the installed package's
/// binary; without it this test says so and passes) runs in smoke mode under Xvfb
/// and a private D-Bus session, with its own HOME and XDG dirs, a policy at the
/// broker's default path and a static host token from the environment. While it
/// holds (`SWITCHBOARD_SMOKE_HOLD`), this test is the sidecar: it gets a narrower
/// token on the default socket and sends with it; once the app quits, the socket
/// is gone.
#[tokio::test]
async fn the_desktop_app_hosts_the_broker_and_removes_its_socket_when_it_quits() {
    let Some(desktop) = std::env::var_os("SWITCHBOARD_DESKTOP_BIN").map(PathBuf::from) else {
        eprintln!(
            "desktop broker test skipped: SWITCHBOARD_DESKTOP_BIN is not set (`cargo xtask \
             test` sets it to the packaged desktop binary)"
        );
        return;
    };
    let server = TestServer::start().await;
    let (alice, _) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let runtime = dir.path().join("runtime");
    for d in [&home, &runtime] {
        std::fs::create_dir(d).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let config = home.join(".config");
    std::fs::create_dir_all(config.join("switchboard")).unwrap();
    std::fs::write(
        config.join("switchboard/broker.toml"),
        policy(&[("alice", &me(), Some(r#"["messages:send"]"#))]),
    )
    .unwrap();
    let socket = runtime.join("switchboard/broker.sock");
    let hold = dir.path().join("hold");
    // However this test ends, the app is let go (else smoke mode's watchdog ends it).
    struct Release(PathBuf);
    impl Drop for Release {
        fn drop(&mut self) {
            let _ = std::fs::write(&self.0, b"");
        }
    }
    let release = Release(hold.clone());
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut app = Command::new("timeout")
        .args([
            "-k",
            "5",
            "150",
            "xvfb-run",
            "-a",
            "-s",
            "-screen 0 1280x800x24",
        ])
        .args(["dbus-run-session", "--"])
        .arg(&desktop)
        .arg("--smoke-test")
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_CONFIG_HOME", &config)
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("GDK_BACKEND", "x11")
        .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
        .env("NO_AT_BRIDGE", "1")
        .env("SWITCHBOARD_SERVER", &server.url)
        .env("SWITCHBOARD_TOKEN", alice.token.as_str())
        .env("SWITCHBOARD_SMOKE_HOLD", &hold)
        .env_remove("SWITCHBOARD_BROKER_POLICY")
        .env_remove("SWITCHBOARD_BROKER_SOCKET")
        .env_remove("SWITCHBOARD_UI_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn the desktop app under xvfb-run");
    let said = || {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&out).unwrap_or_default(),
            std::fs::read_to_string(&err).unwrap_or_default()
        )
    };

    // The broker starts in the background of the app's start-up.
    let client = Broker::new(Some(&socket));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if client.health().await.is_ok() {
            break;
        }
        if let Some(status) = app.try_wait().unwrap() {
            panic!(
                "the app exited ({status}) before its broker answered; {}",
                said()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no broker on {} within 60 s; {}",
            socket.display(),
            said()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Narrower than the host's login, and it works against the server.
    let granted = client.token(&request("alice", None)).await.unwrap();
    assert_eq!(granted.scope, "messages:send");
    assert!(granted.expires_in > 0 && granted.expires_in <= 900);
    // A static host token: no `act` (that needs a JWT subject, see the device
    // login test), but the token is the exchange's, not the host's.
    assert_ne!(granted.access_token.expose(), alice.token.as_str());
    refused(
        client
            .token(&request(
                "alice",
                Some(&format!("agent:{}:inbox", alice.agent_id)),
            ))
            .await,
        403,
        codes::SCOPE_NOT_ALLOWED,
    );
    let sidecar = client
        .client(Client::builder(), "alice", Some("messages:send"))
        .await
        .unwrap();
    sidecar
        .send_message(
            "bob",
            &SendMessage {
                payload: serde_json::json!({"text": "from the desktop's broker"}),
                ..Default::default()
            },
            &switchboard_sdk::new_idempotency_key(),
        )
        .await
        .expect("a send with the desktop broker's token");
    assert_eq!(bob.poll("bob", 0, None).await.unwrap().events.len(), 1);

    // Quit: the socket goes with the app.
    drop(release);
    let status = tokio::task::spawn_blocking(move || app.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "the app failed ({status}); {}", said());
    let stdout = std::fs::read_to_string(&out).unwrap();
    assert!(
        stdout.contains(&format!(
            "smoke: Token broker: listening on {}",
            socket.display()
        )),
        "{}",
        said()
    );
    assert!(!socket.exists(), "the socket outlived the app");
}
