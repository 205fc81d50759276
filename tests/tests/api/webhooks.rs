//! Webhook callbacks end to end, against a real HTTPS receiver with its own CA
//! (passed as the server's webhook CA file): registration with a challenge, the
//! SSRF guard, ordered signed deliveries checked by our verifier and by two
//! independent ones (PyPI `standardwebhooks` and `http-message-signatures`, when
//! `SWITCHBOARD_TEST_PYVERIFY` names where they are installed, as `cargo xtask
//! test` does), and, on a shared database, two instances delivering to one
//! callback in order.

use super::support::{Reply, call};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchboard_tests::receiver::{Answer, ChallengeAnswer, Received, Receiver};
use switchboard_tests::sdk::proto::{CallbackState, SendMessage};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::server::config::WebhookConfig;
use switchboard_tests::server::webhooks::target::Lookup;
use switchboard_tests::{Options, TestServer, key};

/// A server that trusts `receiver`'s CA and allows loopback targets.
pub(crate) fn hooked(receiver: &Receiver, manual_clock: bool) -> Options {
    Options {
        manual_clock,
        webhooks: Some(WebhookConfig {
            allow_loopback: true,
            ca_file: Some(receiver.ca_file.clone()),
            ..WebhookConfig::default()
        }),
        ..Options::default()
    }
}

/// `POST /agents/{agent}/callbacks` with the agent's token.
pub(crate) async fn register(
    server: &TestServer,
    token: &str,
    agent: &str,
    body: &Value,
    idem: &str,
) -> Reply {
    let client = switchboard_tests::sdk::Client::new(&server.url, token).expect("client");
    call(
        client
            .request(Method::POST, &format!("agents/{agent}/callbacks"))
            .header("idempotency-key", idem)
            .json(body),
    )
    .await
}

/// Registers `receiver` for a new agent `name`; returns the callback id and the
/// agent's token.
pub(crate) async fn registered(
    server: &TestServer,
    receiver: &Receiver,
    name: &str,
) -> (String, String) {
    let (agent, _) = server.agent(name).await;
    let body = json!({ "url": receiver.url, "secret": receiver.whsec() });
    let reply = register(server, agent.token.as_str(), name, &body, &key()).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let id = reply.json()["callback_id"].as_str().expect("id").to_owned();
    (id, agent.token.as_str().to_owned())
}

/// Verifies both signatures of `r` with our verifier at `now` (Unix seconds).
pub(crate) fn verified(receiver: &Receiver, keyid: &str, r: &Received, now: i64) -> String {
    switchboard_webhook::verify(
        &receiver.secret,
        keyid,
        &r.method,
        &r.authority,
        &r.path,
        &r.headers,
        &r.body,
        now,
    )
    .unwrap_or_else(|e| panic!("{} request does not verify: {e}", r.kind))
    .webhook_id
}

/// Runs the independent Python verifiers on `r`, when they are installed.
fn python_verifies(receiver: &Receiver, keyid: &str, r: &Received) -> bool {
    let Some(path) = std::env::var_os("SWITCHBOARD_TEST_PYVERIFY") else {
        return false;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/webhook/tests/verify.py"
    );
    let headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    let input = json!({
        "secret": receiver.whsec(),
        "headers": headers,
        "body": String::from_utf8(r.body.clone()).expect("UTF-8 body"),
        "method": r.method,
        "url": format!("https://{}{}", r.authority, r.path),
        "keyid": keyid,
    });
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .env("PYTHONPATH", path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write the request");
    let out = child.wait_with_output().expect("verify.py ends");
    assert!(
        out.status.success(),
        "the Python verifiers refused a {} request:\n{}{}",
        r.kind,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

/// `GET /ops/callbacks` as the operator sees it.
pub(crate) async fn listed(server: &TestServer) -> Value {
    server
        .operator()
        .request(Method::GET, "ops/callbacks")
        .send()
        .await
        .expect("list callbacks")
        .json()
        .await
        .expect("JSON")
}

fn unix_now() -> i64 {
    switchboard_tests::wall_ms() / 1000
}

#[tokio::test]
async fn a_verified_callback_gets_every_event_signed_and_in_order() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(hooked(&receiver, false)).await;
    let (agent, _) = server.agent("hooked").await;
    let body = json!({ "url": receiver.url, "secret": receiver.whsec() });
    let idem = key();
    let reply = register(&server, agent.token.as_str(), "hooked", &body, &idem).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    let cb = reply.json();
    assert_eq!(cb["state"], "active");
    assert_eq!(cb["agent"], "hooked");
    assert!(
        cb.get("secret").is_none(),
        "the secret is never shown again"
    );
    let id = cb["callback_id"].as_str().unwrap().to_owned();
    // The challenge came signed like a delivery.
    let challenges = receiver.of_kind("callback.challenge");
    assert_eq!(challenges.len(), 1);
    verified(&receiver, &id, &challenges[0], unix_now());
    // The secret is stored sealed: neither its text nor its bytes are in the database.
    let stored = server.stored_bytes().await;
    let whsec = receiver.whsec();
    let raw = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(whsec.trim_start_matches("whsec_"))
            .unwrap()
    };
    for needle in [whsec.as_bytes(), &raw[..]] {
        assert!(
            !stored.windows(needle.len()).any(|w| w == needle),
            "the webhook secret is stored in the clear (I11)"
        );
    }
    // The same request again is a replay: no second challenge, the same callback.
    let again = register(&server, agent.token.as_str(), "hooked", &body, &idem).await;
    assert_eq!(again.status, 201);
    assert!(again.replayed());
    assert_eq!(again.json()["callback_id"], cb["callback_id"]);
    assert_eq!(receiver.of_kind("callback.challenge").len(), 1);

    let op = server.operator();
    for n in 0..20 {
        let message = SendMessage {
            payload: json!({ "n": n }),
            ..Default::default()
        };
        op.send_message("hooked", &message, &key()).await.unwrap();
    }
    let got = receiver
        .wait_for("inbox.event", 20, Duration::from_secs(30))
        .await;
    let mut python = 0;
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/hooks/agent");
        let webhook_id = verified(&receiver, &id, r, unix_now());
        let event = &r.json["event"];
        assert_eq!(
            webhook_id,
            event["event_id"].as_str().unwrap(),
            "webhook-id is the event id"
        );
        assert_eq!(event["seq"], i as u64 + 1, "in sequence order");
        assert_eq!(event["payload"]["n"], i as u64);
        if i < 3 && python_verifies(&receiver, &id, r) {
            python += 1;
        }
    }
    if python == 0 {
        eprintln!("SWITCHBOARD_TEST_PYVERIFY is not set: the Python verifiers did not run");
    }
    // Every delivery was acked: nothing waits in the inbox.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let totals = op.overview().await.unwrap().totals;
        if totals.completed == 20 {
            assert_eq!(totals.pending + totals.claimed + totals.quarantined, 0);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{totals:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(receiver.of_kind("inbox.event").len(), 20, "each once");
    let listed = listed(&server).await;
    assert_eq!(listed["callbacks"][0]["last_status"], 204);
    assert_eq!(listed["callbacks"][0]["failure_streak"], 0);
}

#[tokio::test]
async fn registration_refuses_bad_targets_wrong_challenges_and_bad_secrets() {
    let receiver = Receiver::start().await;
    let server = TestServer::with(hooked(&receiver, false)).await;
    let (agent, _) = server.agent("picky").await;
    let token = agent.token.as_str();
    let good = receiver.whsec();
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .unwrap();
    for (url, says) in [
        (receiver.url.replace("https://", "http://"), "https"),
        ("https://10.0.0.7/hook".to_owned(), "private"),
        (
            "https://169.254.169.254/latest/meta-data".to_owned(),
            "169.254.169.254",
        ),
        ("https://[::ffff:10.0.0.1]/".to_owned(), "private"),
        ("https://nowhere.invalid/".to_owned(), "does not resolve"),
        (
            format!("https://user:pw@localhost:{port}/hooks/agent"),
            "credentials",
        ),
        ("https://metadata.google.internal/".to_owned(), "metadata"),
    ] {
        let reply = register(
            &server,
            token,
            "picky",
            &json!({ "url": url, "secret": good }),
            &key(),
        )
        .await;
        let doc = reply.problem(422, "webhook_target_forbidden");
        let detail = doc["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{url}: {detail}");
    }
    // A secret of the wrong form, before anything is sent.
    for secret in ["whsec_c2hvcnQ=", "not-a-secret", ""] {
        let reply = register(
            &server,
            token,
            "picky",
            &json!({ "url": receiver.url, "secret": secret }),
            &key(),
        )
        .await;
        reply.problem(400, "validation_failed");
    }
    assert!(
        receiver.received().is_empty(),
        "nothing reached the receiver"
    );
    // A wrong answer, then an error status: 422, and nothing is registered.
    receiver.challenge(ChallengeAnswer::Wrong);
    let body = json!({ "url": receiver.url, "secret": good });
    let idem = key();
    let reply = register(&server, token, "picky", &body, &idem).await;
    let doc = reply.problem(422, "webhook_verification_failed");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("challenge_response is wrong"),
        "{doc}"
    );
    receiver.challenge(ChallengeAnswer::Status(404));
    let reply = register(&server, token, "picky", &body, &key()).await;
    let doc = reply.problem(422, "webhook_verification_failed");
    assert!(
        doc["detail"].as_str().unwrap().contains("HTTP 404"),
        "{doc}"
    );
    let listed = listed(&server).await;
    assert_eq!(listed["callbacks"], json!([]), "nothing registered");
    // Fixed, the same request with the same key runs again (a failed challenge is
    // not stored for replay) and succeeds.
    receiver.challenge(ChallengeAnswer::Right);
    let reply = register(&server, token, "picky", &body, &idem).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    assert!(!reply.replayed());
    // Without an Idempotency-Key: 400; another agent's token: 404.
    let client = switchboard_tests::sdk::Client::new(&server.url, token).unwrap();
    let reply = call(
        client
            .request(Method::POST, "agents/picky/callbacks")
            .json(&body),
    )
    .await;
    reply.problem(400, "idempotency_key_required");
    let (other, _) = server.agent("other").await;
    let reply = register(&server, other.token.as_str(), "picky", &body, &key()).await;
    reply.problem(404, "not_found");
}

/// Answers a public address first, then loopback: a name that rebinds.
struct Rebinding(std::sync::atomic::AtomicUsize);

impl Lookup for Rebinding {
    fn lookup(
        &self,
        _host: &str,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<std::net::IpAddr>>> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ip = if n == 0 {
            [93, 184, 215, 14]
        } else {
            [127, 0, 0, 1]
        };
        Box::pin(async move { Ok(vec![std::net::IpAddr::from(ip)]) })
    }
}

#[tokio::test]
async fn a_name_that_rebinds_to_loopback_is_never_dialled() {
    let receiver = Receiver::start().await;
    let mut options = hooked(&receiver, false);
    // Production rules: no loopback. The name checks out as public at
    // registration, then resolves to the receiver on 127.0.0.1.
    options.webhooks.as_mut().unwrap().allow_loopback = false;
    let lookup = Arc::new(Rebinding(Default::default()));
    options.hooks.webhook_lookup = Some(lookup.clone());
    let server = TestServer::with(options).await;
    let (agent, _) = server.agent("rebound").await;
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .unwrap();
    let url = format!("https://rebind.example:{port}/hooks/agent");
    let body = json!({ "url": url, "secret": receiver.whsec() });
    let reply = register(&server, agent.token.as_str(), "rebound", &body, &key()).await;
    let doc = reply.problem(422, "webhook_verification_failed");
    assert!(
        doc["detail"].as_str().unwrap().contains("not allowed"),
        "{doc}"
    );
    assert!(
        lookup.0.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "looked up twice"
    );
    assert!(
        receiver.received().is_empty(),
        "no connection reached loopback"
    );
}

#[tokio::test]
async fn two_instances_deliver_one_callback_in_order() {
    let receiver = Receiver::start().await;
    let first = TestServer::with(hooked(&receiver, false)).await;
    if !first.backend().shared() {
        return; // one process owns a SQLite file
    }
    let second = first.another_instance(hooked(&receiver, false)).await;
    let (id, _) = registered(&first, &receiver, "shared").await;
    // Slow answers widen the window in which both instances find it due.
    receiver.always(Answer::Hang(Duration::from_millis(20)));
    let (a, b) = (first.operator(), second.operator());
    for n in 0..30u64 {
        let op = if n % 2 == 0 { &a } else { &b };
        let message = SendMessage {
            payload: json!({ "n": n }),
            ..Default::default()
        };
        op.send_message("shared", &message, &key()).await.unwrap();
    }
    let got = receiver
        .wait_for("inbox.event", 30, Duration::from_secs(60))
        .await;
    let seqs: Vec<u64> = got
        .iter()
        .map(|r| r.json["event"]["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=30).collect::<Vec<_>>(),
        "one at a time, in order, each once"
    );
    for r in &got {
        verified(&receiver, &id, r, unix_now());
    }
    let listed = listed(&first).await;
    assert_eq!(
        listed["callbacks"][0]["state"],
        serde_json::to_value(CallbackState::Active).unwrap()
    );
}
