//! A request signed by an independent RFC 9421 implementation (PyPI's
//! `http-message-signatures`, with its own Ed25519 key) is accepted by the server,
//! and its body changed afterwards is refused.

use serde_json::{Value, json};
use switchboard_tests::TestServer;
use switchboard_tests::sdk::reqwest;
use switchboard_webhook::agent;

use super::now_s;
use crate::support::call;

/// Runs `crates/webhook/tests/agent_interop.py sign` (PyPI `http-message-signatures`
/// with its own Ed25519 key) on `request`, when the verifiers are installed (as
/// `cargo xtask test` does): the public key and the headers it made.
async fn python_signs(request: &Value) -> Option<Value> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crates/webhook/tests/agent_interop.py"
    );
    let signed = crate::support::python_json(script, &["sign"], request).await?;
    Some(signed.unwrap_or_else(|e| panic!("agent_interop.py sign failed: {e}")))
}

#[tokio::test]
async fn the_server_accepts_a_request_signed_by_an_independent_implementation() {
    let server = TestServer::start().await;
    let (created, unsigned) = server.agent("pyagent").await;
    let url = format!("{}/api/v1/agents/pyagent/messages", server.url);
    let body = json!({"payload": {"from": "python"}}).to_string();
    let authorization = format!("Bearer {}", created.token.as_str());
    let idempotency_key = switchboard_tests::key();
    let request = json!({
        "method": "POST",
        "url": url,
        "headers": [
            ["Authorization", authorization],
            ["Content-Type", "application/json"],
            ["Idempotency-Key", idempotency_key],
        ],
        "body": body,
        "created": now_s(),
        "nonce": agent::new_nonce(),
        "components": ["@method", "@authority", "@path", "content-digest", "authorization"],
    });
    let Some(signed) = python_signs(&request).await else {
        return;
    };
    // Its key, bound to the agent's token (the first key needs no signature).
    let jwk: agent::Jwk = serde_json::from_value(signed["jwk"].clone()).unwrap();
    let public = agent::PublicKey::from_jwk(&jwk).unwrap();
    let view = unsigned
        .register_key(&public)
        .await
        .expect("key registered");
    assert_eq!(view.jkt, signed["keyid"], "the same RFC 7638 thumbprint");
    let mut headers = reqwest::header::HeaderMap::new();
    for pair in signed["headers"].as_array().unwrap() {
        headers.append(
            reqwest::header::HeaderName::from_bytes(pair[0].as_str().unwrap().as_bytes()).unwrap(),
            pair[1].as_str().unwrap().parse().unwrap(),
        );
    }
    let reply = call(
        reqwest::Client::new()
            .post(&url)
            .headers(headers.clone())
            .body(body.clone()),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    // The same headers with another body: refused, and nothing more was stored.
    call(
        reqwest::Client::new()
            .post(&url)
            .headers(headers)
            .body(body.replace("python", "pythoN")),
    )
    .await
    .problem(400, "digest_mismatch");
    assert_eq!(
        crate::support::inbox(&server.operator(), "pyagent")
            .await
            .len(),
        1
    );
}
