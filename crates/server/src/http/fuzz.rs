//! Fuzz targets of the HTTP layer's parsers (issue 17): the request headers
//! (`Idempotency-Key`, `Fencing-Token`, `If-Match`) and the memory-record key rule,
//! and the queries (the inbox's `after_cursor`, the ops event search's filter and
//! `after` cursor, the bulk filter body). See `switchboard-fuzz` for the engine
//! and budget.

use super::extract::{Query, parse_json};
use super::idempotency::read_key;
use super::records::{cursor_key, fencing_token, if_match, key_ok, record_cursor};
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::{HeaderMap, HeaderValue, Request};
use futures::executor::block_on;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sfv::{BareItem, Item, Parser};
use switchboard_fuzz::{Case, Corpus, fuzz};
use switchboard_proto::{
    BulkRequest, ErrorCode, EventFilter, EventId, EventListQuery, EventStatus, InboxQuery,
    MemoryRecord,
};

// ---------------------------------------------------------------------------
// Headers and the record key

fn header(name: &str, value: &[u8]) -> Option<HeaderMap> {
    let value = HeaderValue::from_bytes(value).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(
        axum::http::HeaderName::from_bytes(name.as_bytes()).ok()?,
        value,
    );
    Some(headers)
}

fn is_400(e: &ApiError) -> bool {
    e.problem.status == 400 && e.code() == Some(ErrorCode::ValidationFailed)
}

/// The value as an RFC 8941 sf-string with no parameters, if it is one.
fn sf_string(value: &[u8]) -> Option<String> {
    let item: Item = Parser::new(value).parse_item().ok()?;
    match item.bare_item {
        BareItem::String(s) if item.params.is_empty() => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn check_idempotency_key(value: &[u8]) {
    let Some(headers) = header("idempotency-key", value) else {
        return;
    };
    match read_key(&headers) {
        Ok(key) => {
            assert!(
                (1..=255).contains(&key.len())
                    && key.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'"'),
                "{value:?}: accepted {key:?}"
            );
            // The bare and the quoted spelling are the same key.
            let quoted = format!("\"{key}\"");
            let again = read_key(&header("idempotency-key", quoted.as_bytes()).expect("ASCII"));
            assert_eq!(again.ok().as_ref(), Some(&key), "{value:?}");
        }
        Err(e) => assert!(is_400(&e), "{value:?}: {:?}", e.problem),
    }
    // The draft's form (§2.1): a quoted sf-string. Ours is stricter, as its
    // published format says (1 to 255 visible ASCII characters): an sf-string
    // without escapes is accepted as its value iff it has that form, so one with a
    // space is refused. Escapes are not undone: the text between the quotes is the
    // key (`"a\\b"` is the key `a\\b`, `"a\"b"` is refused for its quote).
    if let Some(s) = sf_string(value) {
        let ours = (1..=255).contains(&s.len())
            && s.bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\');
        if ours {
            assert_eq!(
                read_key(&headers).ok().as_ref(),
                Some(&s),
                "{value:?}: an sf-string key refused or read wrong"
            );
        } else if !s.contains('\\') && !s.contains('"') {
            assert!(read_key(&headers).is_err(), "{value:?}: {s:?} accepted");
        }
    }
}

fn check_record_headers(value: &[u8], n: u64) {
    if let Some(headers) = header("fencing-token", value) {
        match fencing_token(&headers) {
            Ok(token) => {
                let text = std::str::from_utf8(value).expect("accepted is ASCII");
                assert_eq!(text.trim().parse::<u64>().ok(), Some(token), "{value:?}");
            }
            Err(e) => assert!(is_400(&e), "{value:?}"),
        }
    }
    if let Some(headers) = header("if-match", value) {
        match if_match(&headers) {
            Ok(Some(version)) => {
                // What was read is what the formatter writes for it.
                let etag = MemoryRecord::etag(version);
                let again = header("if-match", etag.as_bytes()).expect("ASCII");
                assert_eq!(if_match(&again).ok(), Some(Some(version)), "{value:?}");
            }
            Ok(None) => panic!("{value:?}: a present If-Match read as absent"),
            Err(e) => assert!(is_400(&e), "{value:?}"),
        }
    }
    // The formatter's output, weak or not, reads back.
    for etag in [
        MemoryRecord::etag(n),
        format!("W/{}", MemoryRecord::etag(n)),
    ] {
        let headers = header("if-match", etag.as_bytes()).expect("ASCII");
        assert_eq!(if_match(&headers).ok(), Some(Some(n)), "{etag}");
    }
    let headers = header("fencing-token", n.to_string().as_bytes()).expect("ASCII");
    assert_eq!(fencing_token(&headers).ok(), Some(n));
}

fn check_record_key(key: &str) {
    let rule = !key.is_empty() && key.len() <= 200 && !key.chars().any(char::is_control);
    match key_ok(key) {
        Ok(()) => assert!(rule, "{key:?}: accepted"),
        Err(e) => {
            assert!(!rule, "{key:?}: refused");
            assert!(is_400(&e), "{key:?}");
        }
    }
}

/// A record cursor: text the server did not give is 400; one it accepts is the
/// cursor of the key it holds (so no two cursors name one key), and every valid key's
/// cursor reads back as the key.
fn check_record_cursor(text: &str) {
    match cursor_key(text) {
        Ok(key) => {
            assert!(key_ok(&key).is_ok(), "{text:?}: holds {key:?}");
            assert_eq!(record_cursor(&key), text, "{text:?}");
        }
        Err(e) => assert!(is_400(&e), "{text:?}"),
    }
    if key_ok(text).is_ok() {
        let cursor = record_cursor(text);
        assert_eq!(cursor_key(&cursor).ok().as_deref(), Some(text), "{cursor}");
    }
}

fn headers_corpus() -> Corpus {
    Corpus::new()
        .seeds([
            "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
            "\"clkyoesmbgybucifusbbtdsbohtyuuwz\"",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            "\"a\\\"b\"",
            "\"a\\\\b\"",
            "\"k\";p=1",
            "\"v3\"",
            "W/\"v3\"",
            "v18446744073709551615",
            " 42 ",
            "18446744073709551616",
            "notes/2026-12-01.md",
            "r1.bm90ZXMvMjAyNi0xMi0wMS5tZA",
            "r1.YR",
            "a key with spaces",
            "ключ",
        ])
        .tokens([
            "\"",
            "\\",
            "W/",
            "v",
            " ",
            "\t",
            ";",
            "=",
            ",",
            "*",
            ":",
            "?",
            "-",
            "+",
            "0",
            "9",
            "18446744073709551615",
            "%",
            "%22",
            "\u{7f}",
            "\u{85}",
            "\u{2028}",
            "\u{FEFF}",
        ])
        .tokens([&b"\x00"[..], b"\n", b"\r", b"\xFF", b"\x80"])
}

#[test]
fn fuzz_headers() {
    let corpus = headers_corpus();
    fuzz!(
        "headers",
        "Idempotency-Key, Fencing-Token, If-Match and the record key rule: no panic, \
         refusals are 400 validation_failed; an accepted key is 1..=255 visible ASCII, \
         the same quoted or bare; an escape-free sf-string is accepted as its value \
         iff it is 1..=255 visible ASCII (the published format); If-Match and Fencing-Token round-trip through their \
         formatters; the record key rule is 1..=200 bytes without controls; a record \
         cursor is 400 or the one cursor of a valid key",
        |case: Case| {
            let bytes = corpus.bytes(case);
            check_idempotency_key(&bytes);
            let n = u64::from(case.knob(0)) << 48 | u64::from(case.knob(1)) << 16;
            check_record_headers(&bytes, n | u64::from(case.knob(2)));
            check_record_key(&String::from_utf8_lossy(&bytes));
            check_record_cursor(&String::from_utf8_lossy(&bytes));
        }
    );
}

// ---------------------------------------------------------------------------
// Queries and filters

fn query<T: DeserializeOwned>(q: &str) -> Option<Result<T, ApiError>> {
    let request = Request::builder().uri(format!("/x?{q}")).body(()).ok()?;
    let (mut parts, ()) = request.into_parts();
    Some(block_on(Query::<T>::from_request_parts(&mut parts, &())).map(|Query(t)| t))
}

/// Parses `q` as `T` through the server's extractor; an accepted value formats
/// back to a query that parses to the same value.
fn check_query<T>(q: &str)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    match query::<T>(q) {
        None => {}
        Some(Ok(value)) => round_trip_query(&value),
        Some(Err(e)) => assert!(is_400(&e), "{q:?}: {:?}", e.problem),
    }
}

fn round_trip_query<T>(value: &T)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let formatted = serde_urlencoded::to_string(value).expect("a query formats");
    match query::<T>(&formatted) {
        Some(Ok(again)) => assert_eq!(&again, value, "{formatted:?}"),
        other => panic!("{value:?} formats to {formatted:?}, read as {other:?}"),
    }
}

fn check_json<T>(body: &[u8])
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    match parse_json::<T>(body) {
        Ok(value) => {
            let again = serde_json::to_vec(&value).expect("JSON");
            assert_eq!(
                parse_json::<T>(&again).ok().as_ref(),
                Some(&value),
                "{body:?}"
            );
        }
        Err(e) => assert!(
            (e.problem.status == 400 && e.code() == Some(ErrorCode::MalformedJson))
                || (e.problem.status == 422 && e.code() == Some(ErrorCode::ValidationFailed)),
            "{body:?}: {:?}",
            e.problem
        ),
    }
}

/// A query built from the case's knobs and text: every field set, in range.
fn built_query(case: &Case, text: &str) -> EventListQuery {
    let opt = |i: usize| !case.knob(i).is_multiple_of(4);
    let status = EventStatus::ALL[usize::from(case.knob(1)) % EventStatus::ALL.len()];
    let id = u128::from(case.knob(2)) << 64 | u128::from(case.knob(3));
    EventListQuery {
        agent: opt(4).then(|| text.to_owned()),
        status: opt(5).then_some(status),
        correlation_id: opt(6).then(|| text.chars().rev().collect()),
        q: opt(7).then(|| format!("%{text}&=")),
        priority: opt(8).then(|| i32::from(case.knob(9) as i16)),
        after: opt(10).then(|| EventId(uuid::Uuid::from_u128(id))),
        limit: opt(11).then(|| u32::from(case.knob(12))),
    }
}

fn queries_corpus() -> Corpus {
    Corpus::new()
        .seeds([
            "after_cursor=0&limit=100",
            "after_cursor=18446744073709551615",
            "agent=build-bot&status=pending&limit=10",
            "status=quarantined&correlation_id=c-1&q=%22invoice%22&priority=-3",
            "after=0190f5c4-7d2a-7cc0-8f00-000000000001&limit=1000",
            "q=a+b%26c%3Dd",
            "{\"filter\": {}}",
            "{\"ids\": [\"0190f5c4-7d2a-7cc0-8f00-000000000001\"]}",
            "{\"filter\": {\"agent\": \"a\", \"status\": \"claimed\", \"q\": \"x\", \"priority\": 3}}",
            "{\"agent\": \"ops\", \"correlation_id\": null}",
        ])
        .tokens([
            "&", "=", "%", "%2", "%FF", "%00", "+", "after_cursor=", "limit=", "agent=",
            "status=", "correlation_id=", "q=", "priority=", "after=", "ids", "filter", "-1",
            "18446744073709551616", "2147483648", "0190f5c4-7d2a-7cc0-8f00-000000000001",
            "{0190f5c4-7d2a-7cc0-8f00-000000000001}", "urn:uuid:", "pending", "Pending", "\"",
            "{", "}", "[", "]", ":", ",", "null", "1e3", "\\u0000",
        ])
}

#[test]
fn fuzz_queries() {
    let corpus = queries_corpus();
    fuzz!(
        "queries",
        "inbox after_cursor, ops event search filter and after cursor (query strings) \
         and the bulk filter (JSON): no panic, refusals are 400 validation_failed (query) \
         or 400 malformed_json / 422 (body); an accepted value and one built from every \
         field round-trip through serde_urlencoded or serde_json",
        |case: Case| {
            let bytes = corpus.bytes(case);
            let text = String::from_utf8_lossy(&bytes);
            check_query::<InboxQuery>(&text);
            check_query::<EventListQuery>(&text);
            round_trip_query(&built_query(case, &text));
            check_json::<BulkRequest>(&bytes);
            check_json::<EventFilter>(&bytes);
        }
    );
}
