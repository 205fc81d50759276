//! Agents' request signatures against an independent implementation, PyPI
//! `http-message-signatures` (`tests/agent_interop.py`): it verifies what
//! `agent::sign` makes, and `agent::verify` accepts what it signs. Runs when
//! `SWITCHBOARD_TEST_PYVERIFY` names where the PyPI verifiers are installed (as
//! `cargo xtask test` does); otherwise says so and passes.
//!
//! The library reads the system clock, so these requests are signed now.

use std::ffi::OsString;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use switchboard_webhook::agent::{self, Error, Jwk, PublicKey, Request, SigningKey};

const AUTHORITY: &str = "switchboard.example.com:8443";
const PATH_AND_QUERY: &str = "/v1/agents/a/ack?wait=5&lease=l%201";
const BODY: &str = r#"{"lease":"l_1","note":"héllo"}"#;
const COMPONENTS: [&str; 6] = [
    "@method",
    "@authority",
    "@path",
    "@query",
    "content-digest",
    "authorization",
];

fn pyverify() -> Option<OsString> {
    let path = std::env::var_os("SWITCHBOARD_TEST_PYVERIFY");
    if path.is_none() {
        eprintln!("SWITCHBOARD_TEST_PYVERIFY is not set: the Python implementation did not run");
    }
    path
}

fn now() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    i64::try_from(secs).unwrap()
}

/// The agent's call before signing: its bearer token and a JSON body.
fn headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "authorization",
        HeaderValue::from_static("Bearer sb_at_test"),
    );
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers
}

fn request<'a>(headers: &'a HeaderMap, body: &'a str) -> Request<'a> {
    Request {
        method: "POST",
        authority: AUTHORITY,
        path_and_query: PATH_AND_QUERY,
        headers,
        body: body.as_bytes(),
    }
}

fn as_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect()
}

/// Runs `agent_interop.py <mode>` with `input` on stdin.
fn python(path: &OsString, mode: &str, input: &Value) -> Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agent_interop.py");
    let mut child = Command::new("python3")
        .args([script, mode])
        .env("PYTHONPATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write the request");
    let out = child.wait_with_output().expect("agent_interop.py ends");
    assert!(
        out.status.success(),
        "agent_interop.py {mode} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn python_verifies_what_agent_sign_makes() {
    let Some(path) = pyverify() else { return };
    let key = SigningKey::generate();
    let keyid = key.public_key().thumbprint();
    let mut headers = headers();
    let signed = agent::sign(
        &key,
        &keyid,
        &request(&headers, BODY),
        now(),
        &agent::new_nonce(),
    );
    for (name, value) in signed {
        headers.insert(name, HeaderValue::from_str(&value).unwrap());
    }
    let input = json!({
        "method": "POST",
        "url": format!("https://{AUTHORITY}{PATH_AND_QUERY}"),
        "headers": as_pairs(&headers),
        "body": BODY,
        "jwk": key.public_key().to_jwk(),
        "keyid": keyid,
        "require": COMPONENTS,
    });
    // The script checks that the library accepts the request and refuses it
    // with the body changed; a failure of either fails `python`.
    let out = python(&path, "verify", &input);
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn agent_verify_accepts_what_python_signs() {
    let Some(path) = pyverify() else { return };
    let created = now();
    let input = json!({
        "method": "POST",
        "url": format!("https://{AUTHORITY}{PATH_AND_QUERY}"),
        "headers": as_pairs(&headers()),
        "body": BODY,
        "created": created,
        "nonce": "py-nonce-1",
        "components": COMPONENTS,
    });
    let out: Value = serde_json::from_slice(&python(&path, "sign", &input).stdout).unwrap();
    let mut headers = HeaderMap::new();
    for pair in out["headers"].as_array().unwrap() {
        let (name, value) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        headers.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    eprintln!("signed by Python: {headers:?}");

    // Its JWK and RFC 7638 thumbprint, computed there, match ours.
    let jwk: Jwk = serde_json::from_value(out["jwk"].clone()).unwrap();
    let key = PublicKey::from_jwk(&jwk).unwrap();
    assert_eq!(key.thumbprint(), out["keyid"].as_str().unwrap());

    let presented = agent::presented(&headers).unwrap().expect("signed");
    assert_eq!(presented.keyid, key.thumbprint());
    assert_eq!(presented.nonce, "py-nonce-1");
    assert_eq!(
        (presented.created, presented.expires),
        (created, created + 300)
    );
    let now = created + 1;
    assert_eq!(
        agent::verify(&key, &request(&headers, BODY), &presented, now),
        Ok(())
    );

    // Controls: our verifier can refuse it.
    let tampered = BODY.replace("l_1", "l_2");
    assert!(matches!(
        agent::verify(&key, &request(&headers, &tampered), &presented, now),
        Err(Error::DigestMismatch(_))
    ));
    let other = SigningKey::generate().public_key();
    assert!(matches!(
        agent::verify(&other, &request(&headers, BODY), &presented, now),
        Err(Error::Invalid(_))
    ));
}
