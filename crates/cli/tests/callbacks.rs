//! `switchboard agent callback …` against a real `switchboard serve` process and a
//! real HTTPS receiver (its own CA, passed with `--webhook-ca-file`): registration
//! with the challenge, list, a signed delivery checked with the SDK's receiver
//! helper, a refused target, the generated-secret flow, remove; and the SDK's
//! operator calls on the same callback.

mod common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use switchboard_sdk::proto::{
    Callback, CallbackList, CallbackState, CreateAgent, ErrorCode, SendMessage,
};
use switchboard_sdk::webhook::{self, Secret, http};
use switchboard_sdk::{Client, new_idempotency_key};
use switchboard_tests::receiver::{Received, Receiver};

const WAIT: Duration = Duration::from_secs(20);

/// `switchboard serve` allowed to call the receiver (loopback, its CA).
fn serve(dir: &Path, receiver: &Receiver) -> (common::Serve, String) {
    let mut command = common::serve_command(&common::sqlite_url(dir), dir);
    command
        .arg("--webhook-allow-loopback")
        .arg("--webhook-ca-file")
        .arg(&receiver.ca_file)
        .env("SWITCHBOARD_LOG", "warn")
        .stderr(Stdio::inherit());
    let serve = common::Serve::start(&mut command);
    let operator = std::fs::read_to_string(dir.join("operator-token"))
        .expect("operator token")
        .trim()
        .to_owned();
    (serve, operator)
}

/// Runs `switchboard agent ARGS` logged in by environment as `token`.
async fn agent(home: &Path, url: &str, token: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .arg("agent")
        .args(args)
        .env("SWITCHBOARD_STATE", home.join("agent.db"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("SWITCHBOARD_SERVER", url)
        .env("SWITCHBOARD_TOKEN", token)
        .env_remove("SWITCHBOARD_AGENT")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run switchboard agent")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The request as the receiver's HTTP stack saw it, as `http` parts.
fn parts(received: &Received) -> http::request::Parts {
    let uri = format!("https://{}{}", received.authority, received.path);
    let mut request = http::Request::builder()
        .method(received.method.as_str())
        .uri(uri)
        .body(())
        .expect("request");
    *request.headers_mut() = received.headers.clone();
    request.into_parts().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_callback_add_list_deliver_refuse_and_remove() {
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (serve, operator) = serve(dir.path(), &receiver);
    let url = serve.url.as_str();
    let ops = Client::new(url, operator.as_str()).unwrap();
    let token = ops
        .create_agent(&CreateAgent {
            name: "hooked".into(),
        })
        .await
        .expect("create agent")
        .token;
    let token = token.as_str();

    // `add` with the receiver's secret: challenged (signed), then registered.
    let whsec = receiver.whsec();
    let out = agent(
        home.path(),
        url,
        token,
        &[
            "callback",
            "add",
            "--name",
            "hooked",
            "--url",
            &receiver.url,
            "--secret",
            &whsec,
        ],
    )
    .await;
    let stdout = succeeded(&out);
    assert!(stdout.contains("registered callback"), "{stdout}");
    assert!(stdout.contains(&receiver.url), "{stdout}");
    assert!(!stdout.contains(&whsec) && !text(&out.stderr).contains(&whsec));
    let challenges = receiver.of_kind("callback.challenge");
    assert_eq!(challenges.len(), 1);
    let challenge = &challenges[0];
    let reply = webhook::answer_challenge(
        &receiver.secret,
        &parts(challenge),
        &challenge.body,
        webhook::now(),
    )
    .expect("the challenge is signed")
    .expect("it is a challenge");
    assert!(text(&reply).contains("challenge_response"));

    // `list`, as text and JSON.
    let out = agent(
        home.path(),
        url,
        token,
        &["callback", "list", "--name", "hooked"],
    )
    .await;
    let stdout = succeeded(&out);
    assert!(
        stdout.contains(&receiver.url) && stdout.contains("active"),
        "{stdout}"
    );
    let out = agent(
        home.path(),
        url,
        token,
        &["callback", "list", "--name", "hooked", "--json"],
    )
    .await;
    let list: CallbackList = serde_json::from_str(&succeeded(&out)).expect("list JSON");
    assert_eq!(list.callbacks.len(), 1);
    let callback: Callback = list.callbacks[0].clone();
    assert!(
        stdout.contains(&callback.callback_id.to_string()),
        "{stdout}"
    );
    assert_eq!(
        (callback.agent.as_str(), callback.state),
        ("hooked", CallbackState::Active)
    );

    // A message to the agent arrives as a signed `inbox.event` delivery.
    let message = SendMessage {
        payload: serde_json::json!({"task": "index", "n": 1}),
        ..Default::default()
    };
    let receipt = ops
        .send_message("hooked", &message, &new_idempotency_key())
        .await
        .expect("send");
    let deliveries = receiver.wait_for("inbox.event", 1, WAIT).await;
    let got = &deliveries[0];
    let delivery = webhook::verify_delivery(
        &receiver.secret,
        callback.callback_id,
        &parts(got),
        &got.body,
        webhook::now(),
    )
    .expect("the delivery verifies");
    assert_eq!(delivery.kind, webhook::INBOX_EVENT);
    assert_eq!(delivery.event.event_id, receipt.event_id);
    assert_eq!(delivery.event.payload, Some(message.payload.clone()));
    // The same request with another secret, callback id or body is refused.
    let wrong = webhook::verify_delivery(
        &Secret::generate(),
        callback.callback_id,
        &parts(got),
        &got.body,
        webhook::now(),
    );
    assert!(wrong.is_err());
    let mut tampered = got.body.clone();
    let at = tampered.len() / 2;
    tampered[at] ^= 1;
    let tampered = webhook::verify_delivery(
        &receiver.secret,
        callback.callback_id,
        &parts(got),
        &tampered,
        webhook::now(),
    );
    assert!(tampered.is_err());

    operator_calls(&ops, &receiver, &callback).await;

    // A plain-http URL is refused with the server's detail, and a non-zero status.
    let out = agent(
        home.path(),
        url,
        token,
        &[
            "callback",
            "add",
            "--name",
            "hooked",
            "--url",
            "http://localhost:9/hooks",
            "--secret",
            &whsec,
        ],
    )
    .await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("webhook_target_forbidden"), "{stderr}");
    assert!(
        stderr.contains("the callback URL must use https"),
        "{stderr}"
    );
    assert!(!stderr.contains(&whsec));

    // Without a secret one is generated and shown once; the receiver cannot know
    // it, so the challenge fails and the command says what to do.
    let out = agent(
        home.path(),
        url,
        token,
        &[
            "callback",
            "add",
            "--name",
            "hooked",
            "--url",
            &receiver.url,
        ],
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    let generated = stdout
        .lines()
        .find_map(|l| l.strip_prefix("secret: "))
        .unwrap_or_else(|| panic!("no generated secret in {stdout}"));
    Secret::parse(generated).expect("a whsec_ secret");
    assert_eq!(stdout.matches("whsec_").count(), 1, "{stdout}");
    assert!(!stderr.contains(generated), "{stderr}");
    assert!(stderr.contains("shown only this once"), "{stderr}");
    assert!(stderr.contains("webhook_verification_failed"), "{stderr}");

    // The earlier registration still stands; `remove` removes it.
    let id = callback.callback_id.to_string();
    let out = agent(
        home.path(),
        url,
        token,
        &["callback", "remove", "--name", "hooked", &id],
    )
    .await;
    assert!(succeeded(&out).contains(&id));
    let left = ops.agent_callbacks("hooked").await.expect("list");
    assert!(left.callbacks.is_empty(), "{left:?}");
    let out = agent(
        home.path(),
        url,
        token,
        &["callback", "remove", "--name", "hooked", &id],
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not_found"),
        "{}",
        text(&out.stderr)
    );

    // `add --secret-file`, `--json`; then the operator deletes it.
    let file = home.path().join("whsec");
    std::fs::write(&file, format!("{whsec}\n")).unwrap();
    let out = agent(
        home.path(),
        url,
        token,
        &[
            "callback",
            "add",
            "--name",
            "hooked",
            "--url",
            &receiver.url,
            "--secret-file",
            file.to_str().unwrap(),
            "--json",
        ],
    )
    .await;
    let again: Callback = serde_json::from_str(&succeeded(&out)).expect("callback JSON");
    assert_ne!(again.callback_id, callback.callback_id);
    ops.delete_callback(again.callback_id)
        .await
        .expect("delete");
    assert!(ops.callbacks().await.unwrap().callbacks.is_empty());
    drop(serve);
}

/// The SDK's operator calls on a registered callback.
async fn operator_calls(ops: &Client, receiver: &Receiver, callback: &Callback) {
    let id = callback.callback_id;
    let all = ops.callbacks().await.expect("ops callbacks");
    assert_eq!(all.callbacks.len(), 1);
    assert_eq!(all.callbacks[0].callback_id, id);

    let tested = ops.test_callback(id).await.expect("test");
    assert_eq!((tested.kind.as_str(), tested.status), ("test", Some(204)));
    let tests = receiver.wait_for("callback.test", 1, WAIT).await;
    let test = webhook::verify_delivery(
        &receiver.secret,
        id,
        &parts(&tests[0]),
        &tests[0].body,
        webhook::now(),
    )
    .expect("the test delivery verifies");
    assert_eq!(test.kind, webhook::CALLBACK_TEST);

    let verified = ops.verify_callback(id).await.expect("verify");
    assert_eq!(verified.kind, "challenge");
    assert_eq!(receiver.of_kind("callback.challenge").len(), 2);

    let disabled = ops.disable_callback(id).await.expect("disable");
    assert_eq!(disabled.state, CallbackState::Disabled);
    assert!(disabled.disabled_reason.is_some());
    let enabled = ops.enable_callback(id).await.expect("enable");
    assert_eq!(enabled.state, CallbackState::Active);

    let attempts = ops.callback_attempts(id).await.expect("attempts").attempts;
    let kinds: Vec<&str> = attempts.iter().map(|a| a.kind.as_str()).collect();
    for kind in ["challenge", "delivery", "test"] {
        assert!(kinds.contains(&kind), "{kinds:?}");
    }

    let missing = ops
        .disable_callback(switchboard_sdk::proto::CallbackId::new())
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some(ErrorCode::NotFound));
}

#[test]
fn callback_secret_prints_a_fresh_secret() {
    let run = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["agent", "callback", "secret"])
            .env_remove("SWITCHBOARD_SERVER")
            .env_remove("SWITCHBOARD_TOKEN")
            .output()
            .expect("run")
    };
    let (a, b) = (run(), run());
    let (a_out, b_out) = (succeeded(&a), succeeded(&b));
    let (a_out, b_out) = (a_out.trim(), b_out.trim());
    assert!(a_out.starts_with("whsec_"), "{a_out}");
    Secret::parse(a_out).expect("a valid secret");
    assert_ne!(a_out, b_out);
    assert!(text(&a.stderr).contains("configure it in the receiver"));
}
