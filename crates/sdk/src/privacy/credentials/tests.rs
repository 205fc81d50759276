//! True positives and near misses for each credential scanner. Fake tokens are
//! assembled at run time so the source holds no string a secret scanner would flag.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::*;

/// AWS's documented example key pair.
pub(in crate::privacy) const AWS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
pub(in crate::privacy) const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// A signed-looking JWT built from its parts.
pub(in crate::privacy) fn fake_jwt() -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(br#"{"sub":"agent-7","exp":1893456000}"#);
    let signature = URL_SAFE_NO_PAD.encode([0x5a_u8; 32]);
    format!("{header}.{claims}.{signature}")
}

/// A PEM block of junk between a real-looking header and footer.
pub(in crate::privacy) fn fake_pem() -> String {
    let body = "MIIEowIBAAKCAQEAnotARealKeyJustJunkForTests0123456789abcdefABCDEF";
    format!(
        "-----BEGIN RSA {k}-----\n{body}\n-----END RSA {k}-----",
        k = "PRIVATE KEY"
    )
}

fn rules(text: &str) -> Vec<Credential> {
    let mut found: Vec<Credential> = scan(text).into_iter().map(|(c, _)| c).collect();
    found.sort();
    found
}

#[test]
fn aws_access_key_ids() {
    let text = format!("key {AWS_KEY_ID} here");
    assert_eq!(scan(&text), vec![(Credential::AwsAccessKeyId, 4..24)]);
    let sts = format!("ASIA{}", "Q7XK2M4N6P8R3T5V");
    assert_eq!(rules(&sts), vec![Credential::AwsAccessKeyId]);
    for miss in [
        "AKIAIOSFODNN7EXAMPL",   // 15 after the prefix
        "AKIAIOSFODNN7EXAMPLEX", // 17 after the prefix
        "XAKIAIOSFODNN7EXAMPLE", // inside a longer word
        "akiaiosfodnn7example",  // lower case
        "AKIDIOSFODNN7EXAMPLE",  // another prefix
    ] {
        assert!(rules(miss).is_empty(), "{miss}");
    }
}

#[test]
fn aws_secret_needs_a_key_or_a_label_beside_it() {
    assert!(
        rules(AWS_SECRET).is_empty(),
        "alone it is left to the entropy scanner"
    );
    let pair = format!("{AWS_KEY_ID}:{AWS_SECRET}");
    assert_eq!(
        rules(&pair),
        vec![Credential::AwsAccessKeyId, Credential::AwsSecretAccessKey]
    );
    let labelled = format!("aws_secret_access_key = {AWS_SECRET}");
    assert_eq!(
        scan(&labelled),
        vec![(Credential::AwsSecretAccessKey, 24..64)]
    );
    let longer = format!("aws_secret_access_key = {AWS_SECRET}A");
    assert_eq!(
        rules(&longer),
        vec![Credential::SecretAssignment],
        "41 characters is not an AWS secret, but still a value given to a secret key"
    );
    let words = format!("aws secret: {}", "abcdefghij".repeat(4));
    assert!(
        rules(&words).is_empty(),
        "no digit or slash: a word, not a key"
    );
}

#[test]
fn pem_private_keys() {
    let pem = fake_pem();
    let text = format!("here:\n{pem}\nbye");
    assert_eq!(
        scan(&text),
        vec![(Credential::PrivateKey, 6..6 + pem.len())]
    );
    for kind in ["", "EC ", "OPENSSH ", "ENCRYPTED "] {
        let header = format!("-----BEGIN {kind}PRIVATE KEY-----");
        assert_eq!(
            scan(&format!("{header}\ntruncated")),
            vec![(Credential::PrivateKey, 0..header.len())],
            "a header alone is a leak: {header}"
        );
    }
    for miss in [
        "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----",
        "BEGIN PRIVATE KEY",
        "how to rotate a private key",
    ] {
        assert!(rules(miss).is_empty(), "{miss}");
    }
}

#[test]
fn jwts_need_a_json_header_with_alg() {
    let jwt = fake_jwt();
    let text = format!("Authorization: Bearer {jwt}");
    assert_eq!(scan(&text), vec![(Credential::Jwt, 22..22 + jwt.len())]);
    let behind_a_word = format!("see releases.{jwt}");
    assert_eq!(
        scan(&behind_a_word),
        vec![(Credential::Jwt, 13..13 + jwt.len())],
        "a dotted word before the token does not hide it"
    );
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#)
    );
    assert_eq!(
        rules(&unsigned),
        vec![Credential::Jwt],
        "alg none is still a token"
    );
    let no_alg = format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#),
        URL_SAFE_NO_PAD.encode([1_u8; 16])
    );
    for miss in [
        no_alg.as_str(),
        "docs.switchboard.example.com",
        "version 1.22.333",
        "aGVsbG8gd29y.bGQgdGhpcyBp.cyBub3Q",
    ] {
        assert!(rules(miss).is_empty(), "{miss}");
    }
}

#[test]
fn prefixed_tokens() {
    let body36 = "a1B2c3D4e5".repeat(4)[..36].to_owned();
    let cases = [
        (format!("ghp_{body36}"), Credential::GitHubToken),
        (format!("gho_{body36}"), Credential::GitHubToken),
        (format!("ghs_{body36}"), Credential::GitHubToken),
        (
            format!("github_pat_11ABCDEFG0_{body36}"),
            Credential::GitHubToken,
        ),
        (
            format!("xoxb-{}-{}", "1234567890", "abcdEFGH1234"),
            Credential::SlackToken,
        ),
        (
            format!("xoxp-{}", "1234567890-0987654321"),
            Credential::SlackToken,
        ),
        (
            format!("sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc"),
            Credential::StripeKey,
        ),
        (
            format!("rk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc"),
            Credential::StripeKey,
        ),
        (
            format!("sk-{}", "T3BlbkFJ".repeat(6)),
            Credential::OpenAiKey,
        ),
        (
            format!("sk-proj-{}", "Ab_9-".repeat(10)),
            Credential::OpenAiKey,
        ),
        (
            format!("AIza{}", "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
            Credential::GoogleApiKey,
        ),
        (
            format!("sb_ag_{}", "q8Zk3vN0pX7mWc2RtY5uHb9LdE4sFgJ1aKoIiQeTzVn"),
            Credential::SwitchboardToken,
        ),
        (
            format!("sb_op_{}", "not-a-real-token-5d1e"),
            Credential::SwitchboardToken,
        ),
    ];
    for (token, rule) in &cases {
        let text = format!("token={token} ok");
        assert_eq!(scan(&text), vec![(*rule, 6..6 + token.len())], "{token}");
    }
}

#[test]
fn bare_or_short_prefixes_pass() {
    let long = "A".repeat(40);
    for miss in [
        "sb_ag_".to_owned(),
        "sb_op_ and sb_ag_ prefixes".to_owned(),
        "sb_ag_short".to_owned(),
        "ghp_".to_owned(),
        "ghp_tooShort123".to_owned(),
        "xoxb-".to_owned(),
        "xoxc-1234567890-abcdef".to_owned(), // not a listed Slack type
        "sk_test_4eC39HqLyjWDarjtT1zdp7dc".to_owned(),
        "sk-short-key".to_owned(),
        format!("task-{long}"), // `sk-` inside a word
        "AIza-too-short".to_owned(),
    ] {
        assert!(rules(&miss).is_empty(), "{miss}");
    }
}

#[test]
fn the_issue_12_cases_are_refused() {
    let gitlab = format!("glpat-{}", "xY3kLm9QpR2sT5vW8zA1");
    assert_eq!(
        scan(&format!("use {gitlab} for the mirror")),
        vec![(Credential::GitLabToken, 4..4 + gitlab.len())]
    );
    let text = format!("password={}", "hunter2");
    assert_eq!(scan(&text), vec![(Credential::SecretAssignment, 9..16)]);
}

#[test]
fn assignments_take_the_value_and_skip_placeholders_and_code() {
    for (text, value) in [
        (r#"{"api_key": "k3yValue1234"}"#, "k3yValue1234"),
        ("DB_PASSWORD=s3cr3t!", "s3cr3t!"),
        ("X-Api-Key: abc123def456", "abc123def456"),
        ("mysql --password 'pa55 word'", "pa55 word"),
        ("Server=db;Password=Tr0ub4dor;User Id=app", "Tr0ub4dor"),
    ] {
        let at = text.find(value).unwrap();
        assert_eq!(
            scan(text),
            vec![(Credential::SecretAssignment, at..at + value.len())],
            "{text}"
        );
    }
    for miss in [
        "password=${DB_PASSWORD}",
        "password: <redacted>",
        "password=********",
        "token: null",
        "fn check(password: &str) -> bool",
        "pub password: String,",
        "api_key = os.environ[\"API_KEY\"]",
        "token = get_token(client_id)",
        "const secret = process.env.APP_SECRET;",
        "password_hash = sha256(x)",
        "max_tokens=4096",
        "token: expired, log in again",
        "docker login --password-stdin",
        "PWD=/home/dev",
        "api_key=YOUR_API_KEY_HERE",
    ] {
        assert!(rules(miss).is_empty(), "{miss}: {:?}", rules(miss));
    }
}

#[test]
fn one_secret_gives_one_finding_with_the_most_specific_rule() {
    let anthropic = format!("sk-ant-api03-{}AA", "a1B2c3D4e5".repeat(10));
    assert_eq!(rules(&anthropic), vec![Credential::AnthropicKey]);
    let gitlab = format!("token={}{}", "glpat-", "xY3kLm9QpR2sT5vW8zA1");
    assert_eq!(rules(&gitlab), vec![Credential::GitLabToken]);
    let bearer = format!("Authorization: Bearer {}", fake_jwt());
    assert_eq!(rules(&bearer), vec![Credential::Jwt]);
}

#[test]
fn urls_with_secrets() {
    let text = format!("postgres://app:{}@db.internal:5432/app", "Tr0ub4dor");
    assert_eq!(scan(&text), vec![(Credential::UrlPassword, 15..24)]);
    let hook = format!(
        "https://hooks.slack.com/services/T{}/B{}/{}",
        "0ABCDEF12", "0ABCDEF12", "a1B2c3D4e5F6g7H8i9J0k1L2"
    );
    assert_eq!(rules(&hook), vec![Credential::SecretUrl]);
    for miss in [
        "postgres://app@db.internal:5432/app",
        "postgres://app:${DB_PASSWORD}@db/app",
        "http://localhost:8080/path@v2",
        "https://hooks.slack.com/ is where webhooks post",
    ] {
        assert!(rules(miss).is_empty(), "{miss}");
    }
}
