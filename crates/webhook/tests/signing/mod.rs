//! What the RFC 9421 tests share: a fixed secret, time and body, a signed request,
//! and the verification the receiver runs.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use http::{HeaderMap, HeaderValue};
use switchboard_webhook::{Outgoing, Secret, Verified, VerifyError, sign, verify_rfc9421};

pub(crate) const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(crate) const TS: i64 = 1_700_000_000;
pub(crate) const BODY: &[u8] = br#"{"type":"message.created","data":{"id":"m_1"}}"#;

pub(crate) fn request(body: &[u8]) -> Outgoing<'_> {
    Outgoing {
        method: "POST",
        authority: "hooks.example.com:8443",
        path: "/switchboard/cb",
        webhook_id: "msg_01JD0000000000000000000000",
        timestamp: TS,
        keyid: "cb_42",
        body,
    }
}

pub(crate) fn to_headers(pairs: Vec<(&'static str, String)>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.insert(name, HeaderValue::from_str(&value).unwrap());
    }
    headers
}

pub(crate) fn signed() -> (Secret, HeaderMap) {
    let secret = Secret::parse(SECRET).unwrap();
    let headers = to_headers(sign(&secret, &request(BODY)));
    (secret, headers)
}

pub(crate) fn check(headers: &HeaderMap, now: i64) -> Result<Verified, VerifyError> {
    let secret = Secret::parse(SECRET).unwrap();
    verify_rfc9421(
        &secret,
        "cb_42",
        "POST",
        "hooks.example.com:8443",
        "/switchboard/cb",
        headers,
        BODY,
        now,
    )
}

/// A minimal HTTP/1.1 request parser for the RFC's printed messages (LF lines;
/// no blank line means no body).
pub(crate) fn parse_request(message: &str) -> (String, String, HeaderMap, Vec<u8>) {
    let (head, body) = message.split_once("\n\n").unwrap_or((message, ""));
    let mut lines = head.lines();
    let mut request_line = lines.next().unwrap().split(' ');
    let method = request_line.next().unwrap().to_owned();
    let target = request_line.next().unwrap().to_owned();
    let mut headers = HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        headers.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value.trim()).unwrap(),
        );
    }
    (method, target, headers, body.as_bytes().to_vec())
}
