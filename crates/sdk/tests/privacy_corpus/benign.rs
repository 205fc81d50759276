//! Families of ordinary text that sits close to a rule: hex, digests, ids, versions,
//! dates, paths, shell commands, code, and near misses of each secret family (a
//! bare prefix, a wrong checksum, a placeholder after `password=`). None of them
//! may be refused.

use super::synth::*;

pub(crate) struct Benign {
    pub(crate) name: &'static str,
    pub(crate) make: fn(&mut Rng) -> String,
}

const fn benign(name: &'static str, make: fn(&mut Rng) -> String) -> Benign {
    Benign { name, make }
}

/// A fixed list, walked in turn.
fn from(r: &mut Rng, items: &[&str]) -> String {
    (*r.pick(items)).to_owned()
}

pub(crate) static BENIGN: &[Benign] = &[
    benign("hex_colours", |r| match r.range(0, 3) {
        0 => format!("#{}", r.s(HEX, 6)),
        1 => format!(
            "color: #{}; background: #{}",
            r.s(HEX, 3),
            r.s(HEX, 6).to_uppercase()
        ),
        2 => format!("rgba palette #{}{}", r.s(HEX, 6), r.s(HEX, 2)),
        _ => format!("theme = {{ accent = \"#{}\" }}", r.s(HEX, 6)),
    }),
    benign("git_shas", |r| match r.range(0, 3) {
        0 => r.s(HEX, 40),
        1 => format!("commit {} (HEAD -> main)", r.s(HEX, 40)),
        2 => format!("fixed in {}", r.sn(HEX, 7, 12)),
        _ => format!("git cherry-pick {}..{}", r.s(HEX, 12), r.s(HEX, 12)),
    }),
    benign("digests", |r| match r.range(0, 2) {
        0 => format!("sha256:{}", r.s(HEX, 64)),
        1 => format!("md5 {}  release.tar.gz", r.s(HEX, 32)),
        _ => format!("ghcr.io/acme/app@sha256:{}", r.s(HEX, 64)),
    }),
    benign("uuids", |r| match r.range(0, 2) {
        0 => r.uuid(),
        1 => format!("request_id={} trace={}", r.uuid(), r.uuid()),
        _ => format!("/api/v1/agents/{}/messages", r.uuid()),
    }),
    benign("version_strings", |r| match r.range(0, 4) {
        0 => format!("v{}.{}.{}", r.range(0, 30), r.range(0, 99), r.range(0, 999)),
        1 => format!(
            "{}.{}.{}-rc.{}+build.{}",
            r.range(0, 9),
            r.range(0, 99),
            r.range(0, 99),
            r.range(1, 9),
            r.range(1, 9999)
        ),
        2 => format!(
            "rustc 1.{}.0 ({} 2026-11-{:02})",
            r.range(70, 99),
            r.s(HEX, 9),
            r.range(1, 28)
        ),
        3 => format!(
            "node v{}.{}.{}, npm {}.{}.{}",
            r.range(16, 24),
            r.range(0, 20),
            r.range(0, 9),
            r.range(8, 11),
            r.range(0, 9),
            r.range(0, 9)
        ),
        _ => format!("tokio = \"1.{}\"", r.range(0, 50)),
    }),
    benign("shell_commands", |r| {
        from(
            r,
            &[
                "cargo test -p switchboard-sdk --lib privacy -- --nocapture",
                "git push origin privacy-gate --force-with-lease",
                "git clone git@github.com:acme/switchboard.git",
                "docker run --rm -e PASSWORD_FILE=/run/secrets/db -p 8080:8080 acme/app:1.4.2",
                "echo \"$DB_PASSWORD\" | docker login --username ci --password-stdin ghcr.io",
                "curl -sS -H 'Accept: application/json' 'https://api.example.com/v1/items?page=2&per_page=50'",
                "ssh -i ~/.ssh/id_ed25519 deploy@10.0.0.5 'systemctl restart switchboard'",
                "kubectl -n prod rollout restart deploy/web-7f9c8d6b5",
                "export PATH=\"$HOME/.cargo/bin:$PATH\"",
                "find . -name '*.rs' -newer Cargo.lock | xargs wc -l",
                "psql \"postgres://app@localhost:5432/app\" -c 'select 1'",
                "openssl rand -hex 32 > /run/secrets/token",
                "aws s3 cp s3://acme-logs-2026/agent-7/ . --recursive",
                "gh pr create --title 'privacy gate' --body-file notes.md",
                "npm install @scope/pkg@1.2.3 --save-exact",
                "ls -la /var/lib/switchboard/agents/agent-42/outbox",
                "vault kv get -field=password secret/db",
                "read -s -p 'Password: ' PASSWORD",
            ],
        )
    }),
    benign("timestamps_and_dates", |r| match r.range(0, 3) {
        0 => format!(
            "2026-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            r.range(1, 12),
            r.range(1, 28),
            r.range(0, 23),
            r.range(0, 59),
            r.range(0, 59)
        ),
        1 => format!("at 17{}", r.s(DIGITS, 8)),
        2 => format!("ts=17{}", r.s(DIGITS, 11)),
        _ => format!(
            "{}/{}/2026 {:02}:{:02}",
            r.range(1, 12),
            r.range(1, 28),
            r.range(0, 23),
            r.range(0, 59)
        ),
    }),
    benign("paths_and_urls", |r| match r.range(0, 4) {
        0 => format!(
            "https://github.com/acme/switchboard/commit/{}",
            r.s(HEX, 40)
        ),
        1 => format!(
            "/home/dev/projects/switchboard{}/crates/sdk/src/privacy",
            r.range(1, 9)
        ),
        2 => format!(
            "https://example.com/search?q={}&page={}",
            r.s(LOWER, 6),
            r.range(1, 9)
        ),
        3 => format!(
            "refs/heads/feature/PROJ-{}-add-privacy-gate",
            r.range(100, 9999)
        ),
        _ => format!(
            "https://docs.example.com/{}/{}#section-{}",
            r.s(LOWER, 5),
            r.s(LOWER, 7),
            r.range(1, 9)
        ),
    }),
    benign("identifiers_and_code", |r| {
        from(
            r,
            &[
                "fn check(password: &str) -> bool",
                "let token = std::env::var(\"SWITCHBOARD_TOKEN\")?;",
                "pub struct Login { pub password: String, pub otp: Option<String> }",
                "api_key = os.environ[\"API_KEY\"]",
                "password = getpass.getpass()",
                "token = get_token(client_id)",
                "const secret = process.env.APP_SECRET;",
                "self.password = password",
                "switchboard_sdk::privacy::Gate::check",
                "ThisIsAVeryLongCamelCaseIdentifierName",
                "some_long_function_name_here_for_testing_v2",
                "if password_hash == expected_hash { return Ok(()) }",
                "max_tokens: 4096, temperature: 0.2",
                "secret_name: db-credentials",
                "token_count = 128",
            ],
        )
    }),
    benign("keyword_placeholders", |r| {
        from(
            r,
            &[
                "password=${DB_PASSWORD}",
                "password: <redacted>",
                "password=********",
                "api_key: \"<your-api-key>\"",
                "token: null",
                "client_secret = \"\"",
                "secret: {{ .Values.secret }}",
                "PASSWORD=$(cat /run/secrets/db)",
                "password: REDACTED",
                "api_key=YOUR_API_KEY_HERE",
                "token = %(token)s",
                "auth_token: xxxxxxxxxxxxxxxx",
                "password: true",
                "PWD=/home/dev/switchboard",
            ],
        )
    }),
    benign("password_prose", |r| {
        from(
            r,
            &[
                "reset your password with the link we sent",
                "the password must be at least 12 characters",
                "rotate the API key every 90 days",
                "store the token in the OS keyring, never in a file",
                "Secret rotation finished for 12 services",
                "the client secret expired yesterday; ask ops for a new one",
                "token: expired, please log in again",
                "password reset requested for the staging account",
                "keep secrets out of messages",
                "Bearer tokens go in the Authorization header",
            ],
        )
    }),
    benign("card_like_numbers_failing_luhn", |r| {
        let partial = format!("4{}", r.s(DIGITS, 14));
        let valid = luhn_complete(&partial);
        let last = valid.chars().last().unwrap().to_digit(10).unwrap();
        let wrong = format!("{partial}{}", (last + 1 + r.range(0, 7) as u32) % 10);
        match r.range(0, 1) {
            0 => wrong,
            _ => wrong
                .as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }),
    benign("iban_like_failing_mod97", |r| {
        let good = iban("DE", &r.s(DIGITS, 18));
        let check: u32 = good[2..4].parse().unwrap();
        let bad = (check + 1 + r.range(0, 40) as u32) % 97;
        let bad = if bad < 2 { bad + 2 } else { bad };
        format!("DE{bad:02}{}", &good[4..])
    }),
    benign("numbers_amounts_and_addresses", |r| match r.range(0, 5) {
        0 => format!(
            "10.{}.{}.{}:{}",
            r.range(0, 255),
            r.range(0, 255),
            r.range(0, 255),
            r.range(1024, 65535)
        ),
        1 => format!(
            "${},{:03},{:03}.{:02}",
            r.range(1, 999),
            r.range(0, 999),
            r.range(0, 999),
            r.range(0, 99)
        ),
        2 => format!("order #2026{:04}-{:04}", r.range(0, 1231), r.range(0, 9999)),
        3 => "ISBN 978-3-16-148410-0".to_owned(),
        4 => format!(
            "p99 latency {} ms over {} requests",
            r.range(1, 999),
            r.range(1000, 9_999_999)
        ),
        _ => format!("build {} of 2147483647", r.range(1, 99999)),
    }),
    benign("phone_and_id_near_misses", |r| {
        from(
            r,
            &[
                "2026-11-29",
                "pages 120-135",
                "000-12-3456",
                "987-65-4320",
                "+1 vote from the reviewers",
                "room 4.12.3",
                "call ext. 4521",
                "123-456-789",
                "AWS account 123456789012",
                "error code 0x80070005",
                "range 1-800 inclusive",
                "ticket AB-123456",
                "build 20261129.3",
            ],
        )
    }),
    benign("email_near_misses", |r| {
        from(
            r,
            &[
                "@channel the build is green",
                "user@localhost",
                "git@github.com:acme/switchboard.git",
                "icon@2x.png and logo@3x.webp",
                "npm i @types/node@20.11.0",
                "@acme/ui@1.4.0 published",
                "mention @jane in the thread",
            ],
        )
    }),
    benign("vendor_prefix_near_misses", |r| {
        let long = "A".repeat(40);
        match r.range(0, 10) {
            0 => "ghp_ and github_pat_ are GitHub prefixes".to_owned(),
            1 => "glpat- is the GitLab prefix".to_owned(),
            2 => "sk-short-key".to_owned(),
            3 => format!("task-{long}"),
            4 => "AKIA is the access key prefix".to_owned(),
            5 => "xoxb- tokens belong to bots".to_owned(),
            6 => format!("hf_{}", r.s(LOWER, 6)),
            7 => "npm_config_registry=https://registry.npmjs.org/".to_owned(),
            8 => "key-value store".to_owned(),
            9 => format!(
                "https://hooks.slack.com/ is where webhooks post, see {}",
                r.s(LOWER, 5)
            ),
            _ => "https://discord.com/api/webhooks docs".to_owned(),
        }
    }),
    benign("urls_without_secrets", |r| match r.range(0, 3) {
        0 => format!("postgres://app@db.internal:{}/app", r.range(5000, 5999)),
        1 => "https://user@example.com/repo.git".to_owned(),
        2 => "http://localhost:8080/path@v2".to_owned(),
        _ => format!(
            "https://example.com/login?next=/home&lang={}",
            r.s(LOWER, 2)
        ),
    }),
    benign("ordinary_messages", |r| {
        from(
            r,
            &[
                "build is green",
                "deploying v2.3.1 to staging at 14:00 UTC",
                "indexed 1,204 files in 3.2 s",
                "PR #482 needs a second review",
                "the lease on job 77 expired; retrying",
                "Quarterly report: revenue up 12%, churn down 0.4 points",
                "moved the meeting to Thursday 10:30",
                "internationalization and localization of the console",
                "agent-7 claimed 25 messages from room builds",
                "rollback complete; error rate back to 0.02%",
            ],
        )
    }),
    benign("logs_sql_and_config", |r| {
        from(
            r,
            &[
                "SELECT id, token_hash FROM agents WHERE name = 'alice' LIMIT 10",
                "UPDATE users SET password_hash = $1 WHERE id = $2",
                "CREATE TABLE tokens (id INTEGER PRIMARY KEY, token_hash BLOB NOT NULL)",
                "2026-11-29T16:08:26Z INFO status=200 latency_ms=12 route=/agents/{}/messages",
                "level=warn msg=\"lease expired\" job=77 attempt=3",
                "| metric | value |\n|---|---|\n| p50 | 12 ms |",
                "auth: token refreshed for agent-7 (expires in 3600 s)",
                "GET /api/v1/rooms?cursor=17&limit=50 200 OK",
                "Content-Type: application/json; charset=utf-8",
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web",
                "password policy: min length 12, rotate every 90 days",
                "Token: 4096 max",
                "[profile.release]\nlto = \"thin\"\ncodegen-units = 1",
                "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db",
            ],
        )
    }),
    // Numbers shaped like the bare and grouped national ids (Aadhaar, NHS, PESEL …)
    // where they are something else: cloud account ids, order numbers, timestamps,
    // UUIDs, paths, unlabelled nine-digit groups, and near misses with a wrong check.
    benign("national_id_look_alikes", |r| {
        let twelve = format!("{}{}", r.range(2, 9), r.s(DIGITS, 11));
        match r.range(0, 10) {
            0 => format!("arn:aws:iam::{twelve}:role/deploy"),
            1 => format!("{twelve}.dkr.ecr.eu-west-1.amazonaws.com/app:1.4.2"),
            2 => format!("AWS account {twelve}"),
            3 => format!("order {twelve} shipped"),
            4 => format!(
                "{}-{}-4{}-8{}-{twelve}",
                r.s(HEX, 8),
                r.s(HEX, 4),
                r.s(HEX, 3),
                r.s(HEX, 3)
            ),
            5 => format!(
                "snapshot 2026{:02}{:02}{:02}{:02}",
                r.range(1, 12),
                r.range(1, 28),
                r.range(0, 23),
                r.range(0, 59)
            ),
            6 => format!("/api/v1/items/{twelve}/history"),
            7 => format!("ticket #{twelve}"),
            8 => format!("{} {} {}", r.s(DIGITS, 3), r.s(DIGITS, 3), r.s(DIGITS, 3)),
            9 => format!("v{}.{}.{twelve}", r.range(0, 9), r.range(0, 99)),
            _ => {
                // An NHS-shaped number whose check digit is wrong.
                let partial = r.s(DIGITS, 9);
                let sum: u32 = partial
                    .chars()
                    .zip((2..=10).rev())
                    .map(|(c, w)| c.to_digit(10).unwrap() * w)
                    .sum();
                let valid = (11 - sum % 11) % 11;
                let wrong = (valid + 1 + r.range(0, 7) as u32) % 10;
                let wrong = if wrong == valid {
                    (wrong + 1) % 10
                } else {
                    wrong
                };
                format!(
                    "{} {} {}{wrong}",
                    &partial[..3],
                    &partial[3..6],
                    &partial[6..]
                )
            }
        }
    }),
    benign("ids_and_names", |r| match r.range(0, 3) {
        0 => format!("web-{}-{}", r.s(HEX, 9), r.s(LOWER_DIGITS, 5)),
        1 => format!("01{}", r.s("0123456789ABCDEFGHJKMNPQRSTVWXYZ", 24)),
        2 => format!("job_{}", r.s(LOWER_DIGITS, 12)),
        _ => format!("i-{}", r.s(HEX, 17)),
    }),
];
