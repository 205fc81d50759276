//! Helpers shared by the API tests: raw requests whose status, headers and exact body
//! bytes are kept ([`Reply`]), and the RFC 9457 shape check every error must pass.
//!
//! Terms: a *raw* request goes through `Client::request` (bearer token set, nothing
//! else), so a test controls every header and byte; the typed SDK methods are used
//! where the test is about behaviour rather than the wire.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::proto::{InboxEvent, SendMessage, SendReceipt};
use switchboard_tests::sdk::reqwest::{Method, RequestBuilder, Response, header::HeaderMap};
use switchboard_tests::sdk::{Client, SseStream};

/// A response read to the end.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) async fn read(response: Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.bytes().await.expect("response body").to_vec();
        Self {
            status,
            headers,
            body,
        }
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// Whether the server said this is a replay of a stored response.
    pub(crate) fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// Asserts an RFC 9457 problem with our members, the given status and code, and
    /// returns the document.
    #[track_caller]
    pub(crate) fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status,
            status,
            "expected HTTP {status} {code}, got {}: {}",
            self.status,
            self.text()
        );
        let doc = assert_problem_shape(self);
        assert_eq!(doc["code"], code, "problem code: {doc}");
        doc
    }
}

/// Checks what every Switchboard error promises: `application/problem+json`, and
/// `type`, `title`, `status` (equal to the HTTP status), `detail` and `code` members of
/// the right JSON types (RFC 9457 §3.1 says consumers ignore members of the wrong type,
/// so a wrong type is as bad as a missing member).
#[track_caller]
pub(crate) fn assert_problem_shape(reply: &Reply) -> Value {
    let content_type = reply.header("content-type").unwrap_or("");
    assert!(
        content_type.starts_with("application/problem+json"),
        "HTTP {} must be application/problem+json, got {content_type:?}: {}",
        reply.status,
        reply.text()
    );
    let doc = reply.json();
    for member in ["type", "title", "detail", "code"] {
        assert!(
            doc[member].as_str().is_some_and(|s| !s.is_empty()),
            "problem member {member:?} must be a non-empty string: {doc}"
        );
    }
    assert_eq!(
        doc["status"].as_u64(),
        Some(u64::from(reply.status)),
        "problem `status` must equal the HTTP status: {doc}"
    );
    doc
}

/// Sends a raw request and reads the whole reply.
pub(crate) async fn call(request: RequestBuilder) -> Reply {
    Reply::read(request.send().await.expect("request is sent")).await
}

/// A raw direct send with an explicit `Idempotency-Key` header value (sent verbatim,
/// so tests can quote it or not).
pub(crate) async fn send_raw(client: &Client, to: &str, body: &Value, key_header: &str) -> Reply {
    call(
        client
            .request(Method::POST, &format!("agents/{to}/messages"))
            .header("idempotency-key", key_header)
            .json(body),
    )
    .await
}

/// A raw room send with an explicit `Idempotency-Key` header value.
pub(crate) async fn send_room_raw(
    client: &Client,
    room: &str,
    body: &Value,
    key_header: &str,
) -> Reply {
    call(
        client
            .request(Method::POST, &format!("rooms/{room}/messages"))
            .header("idempotency-key", key_header)
            .json(body),
    )
    .await
}

/// Sends `payload` to `to` through the SDK with a fresh key.
pub(crate) async fn send(client: &Client, to: &str, payload: Value) -> SendReceipt {
    let message = SendMessage {
        payload,
        ..Default::default()
    };
    client
        .send_message(to, &message, &switchboard_tests::key())
        .await
        .expect("send succeeds")
}

/// Every event of `agent`'s inbox (all statuses), in sequence order.
pub(crate) async fn inbox(client: &Client, agent: &str) -> Vec<InboxEvent> {
    client
        .poll(agent, 0, Some(1000))
        .await
        .expect("poll succeeds")
        .events
}

/// The next SSE event of `name`, skipping others, within 5 s.
pub(crate) async fn next_event(stream: &mut SseStream, name: &str) -> Value {
    use futures::StreamExt;
    let wait = async {
        loop {
            let event = stream
                .next()
                .await
                .expect("stream stays open")
                .expect("stream event");
            if event.event == name {
                return serde_json::from_str::<Value>(&event.data).expect("event data is JSON");
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .unwrap_or_else(|_| panic!("no {name:?} event within 5 s"))
}

/// A small message body.
pub(crate) fn message(payload: Value) -> Value {
    json!({ "payload": payload })
}

/// Holds the first request that records an idempotency key (the server's
/// `after_key_recorded` hook) until the test releases it.
#[derive(Default)]
pub(crate) struct Gate {
    armed: std::sync::atomic::AtomicBool,
    pub(crate) entered: tokio::sync::Notify,
    pub(crate) release: tokio::sync::Notify,
}

impl Gate {
    /// An armed gate and the hooks that use it.
    pub(crate) fn armed() -> (std::sync::Arc<Self>, switchboard_tests::server::Hooks) {
        use std::sync::atomic::Ordering;
        let gate = std::sync::Arc::new(Self::default());
        gate.armed.store(true, Ordering::SeqCst);
        let hook_gate = gate.clone();
        let hooks = switchboard_tests::server::Hooks {
            after_key_recorded: Some(std::sync::Arc::new(move || {
                let gate = hook_gate.clone();
                Box::pin(async move {
                    if gate.armed.swap(false, Ordering::SeqCst) {
                        gate.entered.notify_one();
                        gate.release.notified().await;
                    }
                })
            })),
            ..Default::default()
        };
        (gate, hooks)
    }
}

/// Runs `python3 script args…` with the PyPI verifiers `cargo xtask test`
/// installs (`SWITCHBOARD_TEST_PYVERIFY`, on `PYTHONPATH`), `input` as JSON on its
/// stdin, without blocking the runtime (the script may call this process's
/// server): its JSON output, or what it printed when it failed; `None`, said on
/// stderr, when the verifiers are not installed.
pub(crate) async fn python_json(
    script: &str,
    args: &[&str],
    input: &Value,
) -> Option<Result<Value, String>> {
    let Some(path) = std::env::var_os("SWITCHBOARD_TEST_PYVERIFY") else {
        eprintln!("SWITCHBOARD_TEST_PYVERIFY is not set: {script} did not run");
        return None;
    };
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .args(args)
        .env("PYTHONPATH", path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.to_string().as_bytes())
        .await
        .expect("write the input");
    drop(stdin);
    let out = child.wait_with_output().await.expect("the script ends");
    Some(if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("JSON from the script"))
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    })
}
