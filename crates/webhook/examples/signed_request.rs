//! Prints one signed webhook request as JSON, `{secret, keyid, method, url,
//! headers, body}`, for the independent Python verifiers in `tests/verify.py`:
//!
//! ```text
//! cargo run -p switchboard-webhook --example signed_request -- [URL] \
//!     | PYTHONPATH=/tmp/pyverify python3 crates/webhook/tests/verify.py
//! ```
//!
//! The URL defaults to `https://hooks.example.com:8443/switchboard/cb?retry=1`.
//! The request is signed now, since the Python libraries read the clock. The
//! secret is a fixed, published test secret (the Standard Webhooks test suite's),
//! never a real one.

use std::time::{SystemTime, UNIX_EPOCH};

use switchboard_webhook::{Outgoing, Secret, try_sign};

const TEST_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// `(authority, path)` of an absolute http(s) URL, the way the `url` crate
/// normalizes them (lowercase host, no default port, path without the query).
fn authority_and_path(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    let mut authority = authority.to_ascii_lowercase();
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => return None,
    };
    if let Some(host) = authority.strip_suffix(default_port) {
        authority = host.to_owned();
    }
    let path = if path.is_empty() { "/" } else { path };
    Some((authority, path.to_owned()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "https://hooks.example.com:8443/switchboard/cb?retry=1".to_owned());
    let (authority, path) = authority_and_path(&url).ok_or("expected an absolute http(s) URL")?;
    let secret = Secret::parse(TEST_SECRET)?;
    let body = r#"{"type":"message.created","data":{"id":"m_1","text":"héllo, wörld"}}"#;
    let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs())?;
    let keyid = "cb_01JD5Z8R2X";
    let headers = try_sign(
        &secret,
        &Outgoing {
            method: "POST",
            authority: &authority,
            path: &path,
            webhook_id: "msg_01JD5Z8R2XK3M4N5P6Q7R8S9T0",
            timestamp: now,
            keyid,
            body: body.as_bytes(),
        },
    )?;
    let headers: serde_json::Map<String, serde_json::Value> = headers
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.into()))
        .chain([("content-type".to_owned(), "application/json".into())])
        .collect();
    let request = serde_json::json!({
        "secret": TEST_SECRET,
        "keyid": keyid,
        "method": "POST",
        "url": url,
        "headers": headers,
        "body": body,
    });
    println!("{}", serde_json::to_string_pretty(&request)?);
    Ok(())
}
