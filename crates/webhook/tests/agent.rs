//! Agents' signed requests: the headers `sign` emits, sign→verify, and every
//! refusal with its error class (the RFC's own Ed25519 vectors are in
//! `rfc9421_ed25519_vectors.rs`, interop with a Python implementation in
//! `agent_interop.rs`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderValue};
use switchboard_webhook::agent::sign_signature_base_ed25519;
use switchboard_webhook::agent::{
    self, Error, Request, SigningKey, accept_signature, presented, sign, verify,
};
use switchboard_webhook::rfc9421::signature_base;
use switchboard_webhook::{CONTENT_DIGEST, SIGNATURE, SIGNATURE_INPUT, content_digest};

const NOW: i64 = 1_700_000_000;
const AUTHORITY: &str = "switchboard.example.com:8443";
const TOKEN: &str = "Bearer sb_at_test";
const BODY: &[u8] = br#"{"lease":"l_1","ack":true}"#;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[42; 32])
}

/// One agent call: what is sent, before and after signing.
#[derive(Clone)]
struct Call {
    method: &'static str,
    authority: &'static str,
    path_and_query: &'static str,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Call {
    /// A call with the agent's bearer token.
    fn new(method: &'static str, path_and_query: &'static str, body: &[u8]) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static(TOKEN));
        Self {
            method,
            authority: AUTHORITY,
            path_and_query,
            headers,
            body: body.to_vec(),
        }
    }

    fn request(&self) -> Request<'_> {
        Request {
            method: self.method,
            authority: self.authority,
            path_and_query: self.path_and_query,
            headers: &self.headers,
            body: &self.body,
        }
    }

    /// Signed by `key()` at `created`, with the nonce `n-1`.
    fn signed_at(mut self, created: i64) -> Self {
        let key = key();
        let keyid = key.public_key().thumbprint();
        for (name, value) in sign(&key, &keyid, &self.request(), created, "n-1") {
            self.headers
                .insert(name, HeaderValue::from_str(&value).unwrap());
        }
        self
    }

    fn signed(self) -> Self {
        self.signed_at(NOW)
    }

    fn header(&self, name: &str) -> &str {
        self.headers[name].to_str().unwrap()
    }

    fn set(&mut self, name: &'static str, value: &str) {
        self.headers
            .insert(name, HeaderValue::from_str(value).unwrap());
    }

    /// What the server does: read the signature, then verify it with the key.
    fn check_with(&self, key: &SigningKey, now: i64) -> Result<(), Error> {
        let presented = presented(&self.headers)?.expect("the call is signed");
        verify(&key.public_key(), &self.request(), &presented, now)
    }

    fn check(&self, now: i64) -> Result<(), Error> {
        self.check_with(&key(), now)
    }

    /// Replaces the signature with a correct one by `key()` over `components`
    /// and `params_tail` (everything after the inner list), as a signer that
    /// made other choices would.
    fn resign(mut self, components: &[&str], params_tail: &str) -> Self {
        let values: Vec<String> = components
            .iter()
            .map(|c| match *c {
                "@method" => self.method.to_owned(),
                "@authority" => self.authority.to_owned(),
                "@path" => self.path_and_query.split('?').next().unwrap().to_owned(),
                "@query" => format!("?{}", self.path_and_query.split_once('?').unwrap().1),
                header => self.header(header).to_owned(),
            })
            .collect();
        let lines: Vec<(&str, &str)> = components
            .iter()
            .copied()
            .zip(values.iter().map(String::as_str))
            .collect();
        let list: Vec<String> = components.iter().map(|c| format!("\"{c}\"")).collect();
        let params = format!("({}){params_tail}", list.join(" "));
        let signature = sign_signature_base_ed25519(&key(), &signature_base(&lines, &params));
        self.set(SIGNATURE_INPUT, &format!("sig1={params}"));
        self.set(SIGNATURE, &format!("sig1=:{signature}:"));
        self
    }
}

fn ack() -> Call {
    Call::new("POST", "/v1/agents/a/ack?wait=5", BODY)
}

const FULL: [&str; 6] = [
    "@method",
    "@authority",
    "@path",
    "@query",
    "content-digest",
    "authorization",
];

fn tail(created: i64, expires: i64) -> String {
    let keyid = key().public_key().thumbprint();
    format!(r#";created={created};expires={expires};nonce="n-1";keyid="{keyid}";alg="ed25519""#)
}

fn invalid_with(result: Result<(), Error>, needle: &str) {
    match result {
        Err(Error::Invalid(message)) => assert!(message.contains(needle), "{message}"),
        other => panic!("expected Invalid containing {needle:?}, got {other:?}"),
    }
}

#[test]
fn sign_emits_the_contracted_headers() {
    let call = ack().signed();
    let keyid = key().public_key().thumbprint();
    let names: Vec<&str> = sign(&key(), &keyid, &ack().request(), NOW, "n-1")
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(names, [CONTENT_DIGEST, SIGNATURE_INPUT, SIGNATURE]);
    assert_eq!(call.header(CONTENT_DIGEST), content_digest(BODY));
    let input = format!(
        r#"sig1=("@method" "@authority" "@path" "@query" "content-digest" "authorization");created=1700000000;expires=1700000300;nonce="n-1";keyid="{keyid}";alg="ed25519""#
    );
    assert_eq!(call.header(SIGNATURE_INPUT), input);
    let signature = call
        .header(SIGNATURE)
        .strip_prefix("sig1=:")
        .and_then(|s| s.strip_suffix(':'))
        .unwrap();
    assert_eq!(STANDARD.decode(signature).unwrap().len(), 64);
    // The base that was signed, written out by hand from the contract; Ed25519
    // is deterministic, so signing it again gives the same bytes.
    let base = format!(
        "\"@method\": POST\n\"@authority\": {AUTHORITY}\n\"@path\": /v1/agents/a/ack\n\
         \"@query\": ?wait=5\n\"content-digest\": {}\n\"authorization\": {TOKEN}\n\
         \"@signature-params\": {}",
        content_digest(BODY),
        input.strip_prefix("sig1=").unwrap()
    );
    assert_eq!(sign_signature_base_ed25519(&key(), &base), signature);

    // No query, body or token: the three request components, no content-digest.
    let mut bare = Call::new("GET", "/v1/agents/a/inbox", b"");
    bare.headers.clear();
    let bare = bare.signed();
    assert!(!bare.headers.contains_key(CONTENT_DIGEST));
    assert!(
        bare.header(SIGNATURE_INPUT)
            .starts_with(r#"sig1=("@method" "@authority" "@path");created="#)
    );
    assert_eq!(bare.check(NOW), Ok(()));

    // An existing Content-Digest (here sha-512) is covered as it is, not replaced.
    use sha2::Digest as _;
    let sha512 = format!("sha-512=:{}:", STANDARD.encode(sha2::Sha512::digest(BODY)));
    let mut with_digest = ack();
    with_digest.set(CONTENT_DIGEST, &sha512);
    let pairs = sign(&key(), &keyid, &with_digest.request(), NOW, "n-1");
    assert!(pairs.iter().all(|(name, _)| *name != CONTENT_DIGEST));
    let with_digest = with_digest.signed();
    assert_eq!(with_digest.header(CONTENT_DIGEST), sha512);
    assert_eq!(with_digest.check(NOW), Ok(()));
}

#[test]
fn round_trip_sign_then_verify() {
    let call = ack().signed();
    let presented = presented(&call.headers).unwrap().unwrap();
    assert_eq!(
        (
            presented.label.as_str(),
            presented.keyid.clone(),
            presented.nonce.as_str(),
            presented.created,
            presented.expires
        ),
        (
            "sig1",
            key().public_key().thumbprint(),
            "n-1",
            NOW,
            NOW + 300
        )
    );
    assert_eq!(call.check(NOW + 1), Ok(()));
    // Edges: created up to 30 s ahead, expires up to 30 s behind the server.
    assert_eq!(call.check(NOW - 30), Ok(()));
    assert_eq!(call.check(NOW + 330), Ok(()));
    // Host case does not matter (@authority is lowercased).
    let mut upper = call.clone();
    upper.authority = "SWITCHBOARD.example.com:8443";
    assert_eq!(upper.check(NOW), Ok(()));
    // An empty query ("?" alone) is a query, covered as "?".
    let bare_query = Call::new("POST", "/v1/agents/a/ack?", BODY).signed();
    assert!(bare_query.header(SIGNATURE_INPUT).contains("\"@query\""));
    assert_eq!(bare_query.check(NOW), Ok(()));
    // Another signer's choices: other parameter order, an extra component.
    let mut other = ack();
    other.set(CONTENT_DIGEST, &content_digest(BODY));
    other.set("content-type", "application/json");
    let mut components = FULL.to_vec();
    components.insert(2, "content-type");
    let keyid = key().public_key().thumbprint();
    let python_order = format!(
        r#";created={NOW};keyid="{keyid}";alg="ed25519";expires={};nonce="n-2""#,
        NOW + 300
    );
    assert_eq!(other.resign(&components, &python_order).check(NOW), Ok(()));
}

#[test]
fn a_changed_body_is_a_digest_mismatch() {
    let mut call = ack().signed();
    call.body = br#"{"lease":"l_2","ack":true}"#.to_vec();
    let error = call.check(NOW).unwrap_err();
    assert!(
        matches!(&error, Error::DigestMismatch(m) if m.contains("sha-256")),
        "{error}"
    );
    assert_eq!(error.code(), "digest_mismatch");
    // A Content-Digest rewritten to match breaks the signature instead.
    let body = call.body.clone();
    call.set(CONTENT_DIGEST, &content_digest(&body));
    invalid_with(call.check(NOW), "does not verify");
}

#[test]
fn another_path_authority_method_or_query_is_refused() {
    let release = Call::new("POST", "/v1/agents/a/release", BODY).signed();
    let mut as_ack = release.clone();
    as_ack.path_and_query = "/v1/agents/a/ack";
    let error = as_ack.check(NOW).unwrap_err();
    assert_eq!(error.code(), "signature_invalid");
    assert!(error.to_string().contains("does not verify"), "{error}");
    // Never the signature's bytes in a message.
    let signature = release.header(SIGNATURE);
    assert!(!error.to_string().contains(&signature[6..20]), "{error}");

    let mut elsewhere = release.clone();
    elsewhere.authority = "evil.example.com:8443";
    invalid_with(elsewhere.check(NOW), "does not verify");
    let mut put = release.clone();
    put.method = "PUT";
    invalid_with(put.check(NOW), "does not verify");
    let mut other_query = ack().signed();
    other_query.path_and_query = "/v1/agents/a/ack?wait=50";
    invalid_with(other_query.check(NOW), "does not verify");
    // A query added to a request signed without one: @query is now required.
    let mut added = release.clone();
    added.path_and_query = "/v1/agents/a/release?force=1";
    invalid_with(
        added.check(NOW),
        "the signature must cover \"@query\" when the request has a query",
    );
    let mut retoken = ack().signed();
    retoken.set("authorization", "Bearer sb_at_other");
    invalid_with(retoken.check(NOW), "does not verify");
}

#[test]
fn signatures_outside_their_time_window_are_refused() {
    let call = ack().signed();
    let future = call.check(NOW - 31).unwrap_err();
    assert!(matches!(&future, Error::Expired(m) if m.contains("created is in the future")));
    assert_eq!(future.code(), "signature_expired");
    let expired = call.check(NOW + 331).unwrap_err();
    assert!(matches!(&expired, Error::Expired(m) if m.contains("expired at 1700000300")));

    // expires - created must be 1..=300, whatever the clock says.
    invalid_with(
        ack()
            .signed()
            .resign(&FULL, &tail(NOW, NOW + 301))
            .check(NOW),
        "expires - created is 301 s",
    );
    invalid_with(
        ack().signed().resign(&FULL, &tail(NOW, NOW)).check(NOW),
        "expires - created is 0 s",
    );
    // And a rewritten expires breaks the signature.
    let mut extended = call.clone();
    let input = call
        .header(SIGNATURE_INPUT)
        .replace("expires=1700000300", "expires=1700000200");
    extended.set(SIGNATURE_INPUT, &input);
    invalid_with(extended.check(NOW), "does not verify");
}

#[test]
fn every_required_component_must_be_covered() {
    for (missing, reason) in [
        ("@query", "when the request has a query"),
        ("content-digest", "when the request has a body"),
        (
            "authorization",
            "when the request has an Authorization header",
        ),
        ("@authority", ""),
    ] {
        let components: Vec<&str> = FULL.iter().copied().filter(|c| *c != missing).collect();
        let result = ack()
            .signed()
            .resign(&components, &tail(NOW, NOW + 300))
            .check(NOW);
        invalid_with(
            result,
            &format!(
                "the signature must cover \"{missing}\"{}",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(" {reason}")
                }
            ),
        );
    }
    // Sanity: the same helper with the full list verifies.
    assert_eq!(
        ack()
            .signed()
            .resign(&FULL, &tail(NOW, NOW + 300))
            .check(NOW),
        Ok(())
    );
    // Duplicates and component parameters are refused.
    let mut twice = FULL.to_vec();
    twice.push("@method");
    invalid_with(
        ack()
            .signed()
            .resign(&twice, &tail(NOW, NOW + 300))
            .check(NOW),
        "listed twice",
    );
    let mut call = ack().signed();
    let input = call
        .header(SIGNATURE_INPUT)
        .replace("\"authorization\"", "\"authorization\";bs");
    call.set(SIGNATURE_INPUT, &input);
    invalid_with(call.check(NOW), "without component parameters");
}

#[test]
fn missing_or_wrong_parameters_are_refused() {
    let keyid = key().public_key().thumbprint();
    for (params, needle) in [
        (
            format!(
                r#";created={NOW};expires={};keyid="{keyid}";alg="ed25519""#,
                NOW + 300
            ),
            "no `nonce`",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="n";alg="ed25519""#,
                NOW + 300
            ),
            "no `keyid`",
        ),
        (
            format!(
                r#";expires={};nonce="n";keyid="{keyid}";alg="ed25519""#,
                NOW + 300
            ),
            "no `created`",
        ),
        (
            format!(r#";created={NOW};nonce="n";keyid="{keyid}";alg="ed25519""#),
            "no `expires`",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="n";keyid="{keyid}""#,
                NOW + 300
            ),
            "no `alg`",
        ),
        (
            format!(
                r#";created="{NOW}";expires={};nonce="n";keyid="{keyid}";alg="ed25519""#,
                NOW + 300
            ),
            "must be an integer",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="";keyid="{keyid}";alg="ed25519""#,
                NOW + 300
            ),
            "nonce of 0 characters",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="{}";keyid="{keyid}";alg="ed25519""#,
                NOW + 300,
                "n".repeat(129)
            ),
            "nonce of 129 characters",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="n";keyid="";alg="ed25519""#,
                NOW + 300
            ),
            "empty keyid",
        ),
        (
            format!(
                r#";created={NOW};expires={};nonce="n";keyid="{keyid}";alg="hmac-sha256""#,
                NOW + 300
            ),
            "alg \"hmac-sha256\"",
        ),
    ] {
        let call = ack().signed().resign(&FULL, &params);
        invalid_with(presented(&call.headers).map(|_| ()), needle);
    }
}

#[test]
fn presented_finds_the_agent_signature_or_says_why_not() {
    assert_eq!(presented(&HeaderMap::new()), Ok(None));
    let call = ack().signed();
    for (remove, needle) in [
        (SIGNATURE_INPUT, "no signature-input"),
        (SIGNATURE, "no signature:"),
    ] {
        let mut half = call.headers.clone();
        half.remove(remove);
        invalid_with(presented(&half).map(|_| ()), needle);
    }
    // Another label is found by its alg, next to someone else's signature.
    let mut relabelled = call.clone();
    let input = call.header(SIGNATURE_INPUT).replacen("sig1=", "agent=", 1);
    let signature = call.header(SIGNATURE).replacen("sig1=", "agent=", 1);
    relabelled.set(
        SIGNATURE_INPUT,
        &format!(r#"proxy=("@method");alg="hmac-sha256", {input}"#),
    );
    relabelled.set(SIGNATURE, &format!("proxy=:AAAA:, {signature}"));
    assert_eq!(
        presented(&relabelled.headers).unwrap().unwrap().label,
        "agent"
    );
    assert_eq!(relabelled.check(NOW), Ok(()));
    // Two Ed25519 signatures and no sig1: which one is the agent's?
    let mut two = call.clone();
    two.set(
        SIGNATURE_INPUT,
        &format!("{input}, {}", input.replacen("agent=", "other=", 1)),
    );
    two.set(
        SIGNATURE,
        &format!("{signature}, {}", signature.replacen("agent=", "other=", 1)),
    );
    invalid_with(presented(&two.headers).map(|_| ()), "several signatures");
    // Garbage is refused, not a panic.
    let mut garbled = call.clone();
    garbled.set(SIGNATURE_INPUT, "sig1=(\"@method\"");
    invalid_with(presented(&garbled.headers).map(|_| ()), "signature-input");

    // verify() insists on the presented signature being this request's.
    let other = Call::new("POST", "/v1/agents/a/release", BODY).signed_at(NOW + 1);
    let theirs = presented(&other.headers).unwrap().unwrap();
    invalid_with(
        verify(&key().public_key(), &call.request(), &theirs, NOW),
        "call presented()",
    );
}

#[test]
fn the_wrong_key_is_refused() {
    let call = ack().signed();
    let error = call
        .check_with(&SigningKey::from_bytes(&[43; 32]), NOW)
        .unwrap_err();
    assert!(
        matches!(&error, Error::Invalid(m) if m.contains("does not verify")),
        "{error}"
    );
    // A signature of the wrong length is refused the same way.
    let mut short = call.clone();
    short.set(SIGNATURE, "sig1=:AAAA:");
    invalid_with(short.check(NOW), "does not verify");
}

#[test]
fn accept_signature_asks_for_what_verify_requires() {
    let tail = r#";created;expires;nonce;keyid;alg="ed25519""#;
    for (query, body, list) in [
        (
            false,
            false,
            r#""@method" "@authority" "@path" "authorization""#,
        ),
        (
            true,
            false,
            r#""@method" "@authority" "@path" "@query" "authorization""#,
        ),
        (
            false,
            true,
            r#""@method" "@authority" "@path" "content-digest" "authorization""#,
        ),
        (
            true,
            true,
            r#""@method" "@authority" "@path" "@query" "content-digest" "authorization""#,
        ),
    ] {
        assert_eq!(
            accept_signature(query, body),
            format!("sig1=({list}){tail}")
        );
    }
    assert_eq!(Error::Invalid(String::new()).code(), "signature_invalid");
    assert_eq!(agent::new_nonce().len(), 22);
    assert_ne!(agent::new_nonce(), agent::new_nonce());
}

#[test]
fn a_signature_presented_by_another_request_is_refused() {
    // presented() keeps the fields it parsed for verify(); given another request's
    // (another nonce), verify() reads this request's own and refuses the mismatch.
    let first = ack().signed();
    let mut second = ack();
    let key = key();
    let keyid = key.public_key().thumbprint();
    for (name, value) in sign(&key, &keyid, &second.request(), NOW, "n-2") {
        second.set(name, &value);
    }
    let theirs = presented(&first.headers).unwrap().unwrap();
    let refused = verify(&key.public_key(), &second.request(), &theirs, NOW);
    assert!(
        matches!(&refused, Err(Error::Invalid(m)) if m.contains("not this request's")),
        "{refused:?}"
    );
    // Its own presented signature verifies.
    let own = presented(&second.headers).unwrap().unwrap();
    assert_eq!(
        verify(&key.public_key(), &second.request(), &own, NOW),
        Ok(())
    );
}
