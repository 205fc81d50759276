//! Problem decoding against `tests/vectors/rfc9457_problem_details.json` (RFC 9457
//! examples and the consumer rules of §3.1/§3.2), Switchboard's own problems, and
//! `Retry-After`.

use super::*;
use reqwest::header::HeaderValue;
use serde_json::json;
use time::macros::datetime;

const VECTORS: &str = include_str!("../../tests/vectors/rfc9457_problem_details.json");

fn vectors() -> Value {
    serde_json::from_str(VECTORS).expect("vector file is JSON")
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).expect("valid status")
}

fn decode_json(code: u16, body: &Value, base: Option<&str>) -> Problem {
    let base = base.map(|b| Url::parse(b).expect("base url"));
    let body = serde_json::to_vec(body).expect("json");
    decode_problem(status(code), Some(PROBLEM_CT), base.as_ref(), &body)
}

const PROBLEM_CT: &str = "application/problem+json";

#[test]
fn rfc_json_examples_keep_members_and_extensions() {
    let vectors = vectors();
    let examples = vectors["examples"].as_array().expect("examples");
    let mut checked = 0;
    for example in examples
        .iter()
        .filter(|e| e["body"].is_string() && e["parsed"].is_object())
    {
        let content_type = example["response_headers"]["Content-Type"]
            .as_str()
            .expect("ct");
        if content_type != PROBLEM_CT {
            continue;
        }
        let http_status =
            u16::try_from(example["response_status"].as_u64().expect("status")).expect("u16");
        let body = example["body"].as_str().expect("body").as_bytes();
        let problem = decode_problem(status(http_status), Some(content_type), None, body);
        let parsed = example["parsed"].as_object().expect("parsed");

        assert_eq!(problem.type_, parsed["type"].as_str().expect("type"));
        assert_eq!(problem.title, parsed["title"].as_str().expect("title"));
        assert_eq!(
            problem.detail.as_deref(),
            parsed.get("detail").and_then(Value::as_str)
        );
        assert_eq!(
            problem.instance.as_deref(),
            parsed.get("instance").and_then(Value::as_str)
        );
        assert_eq!(
            problem.status, http_status,
            "no status member: the HTTP status stands in"
        );
        assert_eq!(
            problem.code, None,
            "foreign problems have no Switchboard code"
        );
        let standard = ["type", "title", "status", "detail", "instance"];
        let extensions: Map<String, Value> = parsed
            .iter()
            .filter(|(k, _)| !standard.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(problem.extensions, extensions, "{}", example["id"]);
        checked += 1;
    }
    assert_eq!(checked, 2, "both JSON examples of RFC 9457 §3 were checked");
}

#[test]
fn rfc_xml_example_becomes_a_synthesized_problem() {
    let vectors = vectors();
    let xml = vectors["examples"]
        .as_array()
        .expect("examples")
        .iter()
        .find(|e| e["id"] == "B-xml")
        .expect("the XML example");
    let body = xml["body"].as_str().expect("body");
    let problem = decode_problem(
        status(403),
        Some("application/problem+xml"),
        None,
        body.as_bytes(),
    );
    assert_eq!(problem.type_, "about:blank");
    assert_eq!(problem.title, "Forbidden");
    assert_eq!(problem.status, 403);
    assert_eq!(problem.detail.as_deref(), Some(body.trim()));
    assert_eq!(problem.code, None);
}

#[test]
fn rfc_consumer_cases_ignore_wrongly_typed_members_and_resolve_relative_uris() {
    let vectors = vectors();
    let cases = vectors["consumer_cases_derived"]["cases"]
        .as_array()
        .expect("cases");
    assert_eq!(cases.len(), 10);
    for case in cases {
        // 400, not 404: a `"status": "404"` string must not leak into the result.
        let problem = decode_json(400, &case["input"], case["base_uri"].as_str());
        let why = case["why"].as_str().expect("why");
        let object = case.as_object().expect("case");
        for (key, want) in object.iter().filter(|(k, _)| k.starts_with("expect_")) {
            match key.as_str() {
                "expect_effective_type" | "expect_resolved_type" => {
                    assert_eq!(problem.type_, want.as_str().expect("type"), "{why}");
                }
                "expect_resolved_instance" => {
                    assert_eq!(problem.instance.as_deref(), want.as_str(), "{why}");
                }
                "expect_effective_status" => {
                    assert!(want.is_null(), "only the ignored-status case exists");
                    assert_eq!(problem.status, 400, "{why}: the HTTP status stands in");
                }
                "expect_effective_title" => {
                    assert!(want.is_null());
                    assert_eq!(
                        problem.title, "Bad Request",
                        "{why}: reason phrase stands in"
                    );
                }
                "expect_effective_detail" => assert_eq!(problem.detail, None, "{why}"),
                "expect_effective_instance" => assert_eq!(problem.instance, None, "{why}"),
                other => panic!("unhandled expectation {other}"),
            }
        }
        let standard = ["type", "title", "status", "detail", "instance", "code"];
        assert!(
            standard
                .iter()
                .all(|m| !problem.extensions.contains_key(*m)),
            "wrongly typed members are dropped, not kept as extensions ({why})"
        );
    }
}

#[test]
fn switchboard_problem_round_trips_with_code_and_extension() {
    let sent = Problem::new(
        ErrorCode::CursorGone,
        "cursor 17 is older than the retention window; oldest valid cursor is 240",
    )
    .with("oldest_cursor", 240);
    let problem = decode_json(410, &serde_json::to_value(&sent).expect("json"), None);
    assert_eq!(problem, sent);

    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_CT));
    let url = Url::parse("http://127.0.0.1:1/api/v1/agents/a/inbox").expect("url");
    let body = serde_json::to_vec(&sent).expect("json");
    let err = Error::from_response(status(410), &headers, &url, &body);
    assert_eq!(err.code(), Some(ErrorCode::CursorGone));
    assert_eq!(err.status(), Some(410));
    assert_eq!(err.oldest_cursor(), Some(240));
    assert_eq!(err.retry_after(), None);
    assert_eq!(
        err.to_string(),
        "HTTP 410 cursor_gone: cursor 17 is older than the retention window; oldest valid cursor is 240"
    );
}

#[test]
fn a_title_missing_from_a_switchboard_problem_comes_from_its_code() {
    let problem = decode_json(409, &json!({"code": "stale_claim"}), None);
    assert_eq!(problem.title, ErrorCode::StaleClaim.title());
    assert_eq!(problem.error_code(), Some(ErrorCode::StaleClaim));
    let unknown = decode_json(409, &json!({"code": "from_the_future"}), None);
    assert_eq!(
        unknown.code.as_deref(),
        Some("from_the_future"),
        "kept for logs"
    );
    assert_eq!(
        unknown.error_code(),
        None,
        "but not a code this SDK acts on"
    );
}

#[test]
fn non_problem_bodies_are_synthesized() {
    let html = b"<html><body><h1>502 Bad Gateway</h1></body></html>\n";
    let problem = decode_problem(status(502), Some("text/html"), None, html);
    assert_eq!(problem.title, "Bad Gateway");
    assert_eq!(problem.status, 502);
    assert_eq!(
        problem.detail.as_deref(),
        Some("<html><body><h1>502 Bad Gateway</h1></body></html>")
    );

    let not_an_object = decode_problem(status(500), Some(PROBLEM_CT), None, b"[1,2]");
    assert_eq!(not_an_object.detail.as_deref(), Some("[1,2]"));
    assert_eq!(not_an_object.title, "Internal Server Error");

    let empty = decode_problem(status(503), None, None, b"");
    assert_eq!((empty.detail, empty.code), (None, None));

    let long = "x".repeat(5000);
    let cut = decode_problem(status(500), Some("text/plain"), None, long.as_bytes());
    assert_eq!(
        cut.detail.expect("detail").chars().count(),
        MAX_DETAIL_CHARS + 1
    );
}

#[test]
fn json_media_types() {
    for json in [
        "application/json",
        "application/problem+json; charset=utf-8",
        "Application/JSON",
    ] {
        assert!(is_json_media_type(json), "{json}");
    }
    for other in ["text/html", "application/problem+xml", "json", ""] {
        assert!(!is_json_media_type(other), "{other}");
    }
}

#[test]
fn retry_after_takes_seconds_or_an_http_date() {
    let now = datetime!(1994-11-06 08:49:07 UTC);
    assert_eq!(
        parse_retry_after("120", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
        Some(Duration::from_secs(30))
    );
    assert_eq!(
        parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
        Some(Duration::ZERO),
        "a date in the past means now"
    );
    for bad in ["", "-5", "1.5", "soon"] {
        assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
    }
}
