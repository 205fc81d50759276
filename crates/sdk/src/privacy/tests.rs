//! The gate end to end: schema stripping and refusal, paths through nested objects
//! and arrays, the PII allowance, config, and that no refusal ever prints a secret.

use serde_json::json;

use super::credentials::tests::{AWS_KEY_ID, AWS_SECRET, fake_jwt, fake_pem};
use super::*;

mod ids;

fn task_schema() -> Schema {
    Schema::new("task")
        .field("title", FieldKind::Text)
        .field("priority", FieldKind::Integer)
        .field("weight", FieldKind::Number)
        .field("urgent", FieldKind::Boolean)
        .field("tags", FieldKind::list(FieldKind::Text))
        .field("reporter", FieldKind::Text)
        .allow_pii("reporter", PiiKind::Email)
        .object(
            "meta",
            Schema::nested()
                .field("notes", FieldKind::list(FieldKind::Text))
                .field(
                    "steps",
                    FieldKind::list(FieldKind::Object(
                        Schema::nested().field("say", FieldKind::Text),
                    )),
                )
                .object(
                    "billing",
                    Schema::nested().field("contact", FieldKind::Text),
                )
                .allow_pii("billing", PiiKind::Email),
        )
}

fn gate() -> Gate {
    Gate::new().schema(task_schema())
}

fn finding(blocked: &Blocked) -> (Rule, &str, std::ops::Range<usize>) {
    let f = blocked.findings().next().expect("a finding");
    (f.rule, f.path.as_str(), f.span.clone())
}

#[test]
fn a_clean_payload_passes_unchanged() {
    let payload = json!({
        "title": "index the repo", "priority": 2, "weight": 0.5, "urgent": false,
        "tags": ["ci", "0192f7c4-9a3b-7d21-8e5f-6c4b3a291807"],
        "meta": {"notes": ["commit da39a3ee5e6b4b0d3255bfef95601890afd80709"],
                 "steps": [{"say": "hello"}], "billing": {"contact": null}},
    });
    let cleared = gate().check("task", payload.clone()).expect("clean");
    assert_eq!(cleared.payload, payload);
    assert!(cleared.stripped.is_empty());
    assert!(cleared.allowed_pii.is_empty());
}

#[test]
fn unknown_members_are_stripped_by_path_at_every_depth() {
    let payload = json!({
        "title": "t", "debug": {"env": "prod"},
        "meta": {"notes": [], "trace": [1, 2], "steps": [{"say": "a"}, {"say": "b", "raw": "x"}]},
        "odd key": 1,
    });
    let cleared = gate()
        .check("task", payload)
        .expect("stripping is not refusing");
    assert_eq!(
        cleared.payload,
        json!({"title": "t", "meta": {"notes": [], "steps": [{"say": "a"}, {"say": "b"}]}})
    );
    let mut stripped = cleared.stripped.clone();
    stripped.sort();
    assert_eq!(
        stripped,
        [
            "$.debug",
            "$.meta.steps[1].raw",
            "$.meta.trace",
            "$[\"odd key\"]"
        ]
    );
}

#[test]
fn a_stripped_member_is_not_scanned_and_a_secret_key_is_redacted() {
    let payload = json!({"title": "t", "aws": AWS_KEY_ID, AWS_KEY_ID: "x"});
    let cleared = gate()
        .check("task", payload)
        .expect("stripped secrets never leave");
    assert_eq!(cleared.payload, json!({"title": "t"}));
    let mut stripped = cleared.stripped;
    stripped.sort();
    assert_eq!(
        stripped,
        ["$.aws", "$[<redacted>]"],
        "the key itself is secret"
    );
}

#[test]
fn unknown_message_types_and_non_objects_are_refused() {
    let blocked = gate().check("note", json!({"title": "t"})).unwrap_err();
    assert_eq!(blocked.refusals, [Refusal::UnknownMessageType]);
    assert!(blocked.to_string().contains("register one"), "{blocked}");
    assert!(
        Gate::new().check("task", json!({})).is_err(),
        "no schema, no entry"
    );

    let blocked = gate().check("task", json!(["title"])).unwrap_err();
    assert_eq!(blocked.refusals, [Refusal::NotAnObject { found: "array" }]);
}

#[test]
fn wrong_types_are_refused_with_path_and_types() {
    let payload = json!({
        "title": 7, "priority": "2", "weight": "heavy", "urgent": 1,
        "tags": ["ok", 3], "meta": {"steps": {"say": "x"}},
    });
    let blocked = gate().check("task", payload).unwrap_err();
    let wrong = |path: &str, expected: &'static str, found: &'static str| Refusal::WrongType {
        path: path.to_owned(),
        expected,
        found,
    };
    let mut refusals = blocked.refusals.clone();
    refusals.sort_by_key(|r| r.to_string());
    let mut expected = vec![
        wrong("$.title", "text", "integer"),
        wrong("$.priority", "integer", "text"),
        wrong("$.weight", "number", "text"),
        wrong("$.urgent", "boolean", "integer"),
        wrong("$.tags[1]", "text", "integer"),
        wrong("$.meta.steps", "array", "object"),
    ];
    expected.sort_by_key(|r| r.to_string());
    assert_eq!(refusals, expected, "every wrong type is reported");
    let float = gate().check("task", json!({"priority": 1.5})).unwrap_err();
    assert_eq!(float.refusals, [wrong("$.priority", "integer", "number")]);
}

#[test]
fn findings_carry_nested_paths_and_byte_ranges() {
    let jwt = fake_jwt();
    let payload = json!({"meta": {"steps": [{"say": "ok"}, {"say": format!("use {jwt}")}]}});
    let blocked = gate().check("task", payload).unwrap_err();
    assert_eq!(
        finding(&blocked),
        (
            Rule::Credential(Credential::Jwt),
            "$.meta.steps[1].say",
            4..4 + jwt.len()
        )
    );
    let payload = json!({"tags": ["a", "b", "ssn 123-45-6789"]});
    let blocked = gate().check("task", payload).unwrap_err();
    assert_eq!(
        finding(&blocked),
        (Rule::Pii(PiiKind::Ssn), "$.tags[2]", 4..15)
    );
}

#[test]
fn every_secret_kind_in_a_payload_blocks() {
    let pem = fake_pem();
    let entropy = "q8Zk3vN0pX7mWc2RtY5uHb9LdE4sFgJ1aKoIiQeTzVn";
    let payload = json!({
        "title": AWS_KEY_ID,
        "tags": [pem, fake_jwt(), entropy, "4111 1111 1111 1111", "078-05-1120"],
        "meta": {"notes": ["mail ops@example.com"]},
    });
    let blocked = gate().check("task", payload).unwrap_err();
    let mut rules: Vec<Rule> = blocked.findings().map(|f| f.rule).collect();
    rules.sort();
    assert_eq!(
        rules,
        [
            Rule::Credential(Credential::AwsAccessKeyId),
            Rule::Credential(Credential::PrivateKey),
            Rule::Credential(Credential::Jwt),
            Rule::Credential(Credential::HighEntropy),
            Rule::Pii(PiiKind::Ssn),
            Rule::Pii(PiiKind::PaymentCard),
            Rule::Pii(PiiKind::Email),
        ]
    );
}

#[test]
fn pii_is_allowed_only_where_the_schema_says() {
    let ok = json!({"reporter": "jane@example.com",
                    "meta": {"billing": {"contact": "billing@example.com"}}});
    let cleared = gate()
        .check("task", ok)
        .expect("e-mail allowed on these fields");
    let mut paths: Vec<&str> = cleared
        .allowed_pii
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    paths.sort();
    assert_eq!(paths, ["$.meta.billing.contact", "$.reporter"]);

    let elsewhere = gate().check("task", json!({"title": "jane@example.com"}));
    assert!(
        elsewhere.is_err(),
        "the allowance does not leak to siblings"
    );
    let other_kind = gate().check("task", json!({"reporter": "078-05-1120"}));
    assert!(
        other_kind.is_err(),
        "an e-mail allowance does not allow an SSN"
    );
}

#[test]
fn credentials_are_never_allowed() {
    let schema = Schema::new("note")
        .field("body", FieldKind::Text)
        .allow_pii("body", PiiKind::Email)
        .allow_pii("body", PiiKind::Ssn)
        .allow_pii("body", PiiKind::PaymentCard);
    let gate = Gate::new().schema(schema);
    assert!(gate.check("note", json!({"body": "078-05-1120"})).is_ok());
    let blocked = gate
        .check("note", json!({"body": format!("x {AWS_KEY_ID}")}))
        .unwrap_err();
    assert_eq!(
        finding(&blocked).0,
        Rule::Credential(Credential::AwsAccessKeyId)
    );
}

#[test]
fn config_turns_the_optional_scanners_off() {
    let entropy = "q8Zk3vN0pX7mWc2RtY5uHb9LdE4sFgJ1aKoIiQeTzVn";
    let payload = json!({"title": format!("{entropy} ops@example.com")});
    assert_eq!(
        gate()
            .check("task", payload.clone())
            .unwrap_err()
            .refusals
            .len(),
        2
    );
    let quiet = Config {
        entropy: None,
        scan_emails: false,
    };
    let gate = Gate::with_config(quiet.clone()).schema(task_schema());
    assert_eq!(gate.config(), &quiet);
    assert!(gate.check("task", payload).is_ok());
    let still = gate.check("task", json!({"title": AWS_KEY_ID}));
    assert!(still.is_err(), "prefix scanners cannot be turned off");
}

#[test]
fn refusals_never_print_the_secret() {
    let jwt = fake_jwt();
    let pem = fake_pem();
    let openai = format!("sk-{}", "T3BlbkFJ".repeat(6));
    let slack = format!("xoxb-{}", "1234567890-abcdEFGH1234");
    let pair = format!("{AWS_KEY_ID} {AWS_SECRET}");
    let secrets = [
        AWS_KEY_ID,
        AWS_SECRET,
        &jwt,
        &pem,
        &openai,
        &slack,
        "123-45-6789",
        "4111 1111 1111 1111",
        "jane@example.com",
    ];
    let payload = json!({
        "title": pair, "tags": [jwt, pem, openai, slack],
        "meta": {"notes": ["123-45-6789", "4111 1111 1111 1111", "jane@example.com"]},
    });
    let blocked = gate().check("task", payload).unwrap_err();
    assert!(blocked.findings().count() >= 9, "{blocked}");
    let printed = [
        blocked.to_string(),
        format!("{blocked:?}"),
        format!("{blocked:#?}"),
        format!("{:?}", blocked.refusals),
    ];
    for text in &printed {
        for secret in secrets {
            assert!(!text.contains(secret), "leaked a secret into {text}");
            // Nor a recognisable piece of it (the body after the prefix).
            let piece: String = secret.chars().skip(4).take(12).collect();
            assert!(!text.contains(&piece), "leaked {piece:?} into {text}");
        }
    }
    let as_error: Box<dyn std::error::Error> = Box::new(blocked);
    assert!(!as_error.to_string().contains(AWS_KEY_ID));
}

#[test]
fn the_gate_can_be_shared_across_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Gate>();
    shareable::<Blocked>();
}
