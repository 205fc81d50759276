//! Families of format-valid synthetic secrets and personal data: right prefix,
//! length, alphabet and checksum (Luhn, mod 97, Verhoeff, mod 23), random bodies.
//! Shapes follow the public rule sets of gitleaks and detect-secrets and the
//! predefined recognizers of Presidio; every value is made up.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

use super::synth::*;

/// One sample: the text put into a message and the secret inside it (what must be
/// found, and never printed).
pub(crate) struct Sample {
    pub(crate) text: String,
    pub(crate) secret: String,
}

fn token(secret: String) -> Sample {
    Sample {
        text: secret.clone(),
        secret,
    }
}

fn labelled(text: String, secret: String) -> Sample {
    debug_assert!(text.contains(&secret));
    Sample { text, secret }
}

/// What a refusal of this family must be: `credential.*` or `pii.*`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Class {
    Credential,
    Pii,
}

pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) class: Class,
    pub(crate) make: fn(&mut Rng) -> Sample,
}

const fn cred(name: &'static str, make: fn(&mut Rng) -> Sample) -> Family {
    Family {
        name,
        class: Class::Credential,
        make,
    }
}

const fn pii(name: &'static str, make: fn(&mut Rng) -> Sample) -> Family {
    Family {
        name,
        class: Class::Pii,
        make,
    }
}

/// A password-like value: plain words, letters and digits, or with symbols.
fn password(r: &mut Rng) -> String {
    match r.range(0, 2) {
        0 => format!(
            "{}{}",
            r.pick(&["hunter", "correcthorse", "sunshine", "dragon", "letmein"]),
            r.sn(LOWER, 0, 4)
        ),
        1 => r.sn(ALNUM, 8, 16),
        _ => format!("{}{}{}", r.s(ALNUM, 4), r.s("!#%^*_-+", 2), r.s(ALNUM, 6)),
    }
}

pub(crate) static FAMILIES: &[Family] = &[
    cred("aws_access_key_id", |r| {
        token(format!(
            "{}{}",
            r.pick(&["AKIA", "ASIA"]),
            r.s(UPPER_DIGITS, 16)
        ))
    }),
    cred("aws_secret_access_key", |r| {
        let secret = format!("{}/{}", r.s(ALNUM, 20), r.s(B64, 19));
        let label = r.pick(&[
            "aws_secret_access_key = ",
            "AWS_SECRET_ACCESS_KEY=",
            "SecretAccessKey: ",
        ]);
        labelled(format!("{label}{secret}"), secret)
    }),
    cred("github_classic_token", |r| {
        let prefix = r.pick(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]);
        token(format!("{prefix}{}", r.s(ALNUM, 36)))
    }),
    cred("github_fine_grained_pat", |r| {
        token(format!("github_pat_{}_{}", r.s(ALNUM, 22), r.s(ALNUM, 59)))
    }),
    cred("gitlab_pat", |r| {
        token(format!("glpat-{}", r.body(B64URL, 20)))
    }),
    cred("gitlab_other_tokens", |r| {
        let prefix = r.pick(&["glptt-", "gldt-", "glrt-", "glcbt-", "gloas-", "GR1348941"]);
        token(format!("{prefix}{}", r.body(B64URL, 20)))
    }),
    cred("slack_token", |r| {
        let kind = r.pick(&["xoxb", "xoxp", "xoxa", "xoxs"]);
        token(format!(
            "{kind}-{}-{}-{}",
            r.s(DIGITS, 12),
            r.s(DIGITS, 13),
            r.s(ALNUM, 24)
        ))
    }),
    cred("slack_webhook_url", |r| {
        token(format!(
            "https://hooks.slack.com/services/T{}/B{}/{}",
            r.s(UPPER_DIGITS, 8),
            r.s(UPPER_DIGITS, 10),
            r.s(ALNUM, 24)
        ))
    }),
    cred("discord_webhook_url", |r| {
        let host = r.pick(&["discord.com", "discordapp.com", "ptb.discord.com"]);
        token(format!(
            "https://{host}/api/webhooks/{}/{}",
            r.s(DIGITS, 18),
            r.body(B64URL, 68)
        ))
    }),
    cred("teams_webhook_url", |r| {
        let (a, b, c) = (r.uuid(), r.uuid(), r.uuid());
        token(format!(
            "https://contoso.webhook.office.com/webhookb2/{a}@{b}/IncomingWebhook/{}/{c}",
            r.s(HEX, 32)
        ))
    }),
    cred("stripe_secret_key", |r| {
        let prefix = r.pick(&["sk_live_", "rk_live_"]);
        token(format!("{prefix}{}", r.sn(ALNUM, 24, 99)))
    }),
    cred("stripe_webhook_secret", |r| {
        token(format!("whsec_{}", r.s(ALNUM, 32)))
    }),
    cred("openai_key", |r| {
        let prefix = r.pick(&["sk-", "sk-proj-", "sk-svcacct-"]);
        token(format!("{prefix}{}", r.bodyn(B64URL, 48, 120)))
    }),
    cred("anthropic_key", |r| {
        let kind = r.pick(&["api03", "admin01"]);
        token(format!("sk-ant-{kind}-{}AA", r.body(B64URL, 93)))
    }),
    cred("google_api_key", |r| {
        token(format!("AIza{}", r.body(B64URL, 35)))
    }),
    cred("google_oauth", |r| {
        if r.range(0, 1) == 0 {
            token(format!("GOCSPX-{}", r.body(B64URL, 28)))
        } else {
            token(format!("ya29.{}", r.bodyn(B64URL, 60, 160)))
        }
    }),
    cred("npm_token", |r| token(format!("npm_{}", r.s(ALNUM, 36)))),
    cred("pypi_token", |r| {
        token(format!("pypi-AgEIcHlwaS5vcmc{}", r.bodyn(B64URL, 60, 180)))
    }),
    cred("sendgrid_key", |r| {
        token(format!("SG.{}.{}", r.body(B64URL, 22), r.body(B64URL, 43)))
    }),
    cred("twilio_api_key", |r| token(format!("SK{}", r.s(HEX, 32)))),
    cred("hugging_face_token", |r| {
        token(format!("hf_{}", r.s(LETTERS, 34)))
    }),
    cred("digitalocean_token", |r| {
        let prefix = r.pick(&["dop_v1_", "doo_v1_", "dor_v1_"]);
        token(format!("{prefix}{}", r.s(HEX, 64)))
    }),
    cred("shopify_token", |r| {
        let prefix = r.pick(&["shpat_", "shpca_", "shppa_", "shpss_"]);
        token(format!("{prefix}{}", r.s(HEX, 32)))
    }),
    cred("docker_hub_pat", |r| {
        token(format!("dckr_pat_{}", r.body(B64URL, 27)))
    }),
    cred("vault_token", |r| {
        token(format!("hvs.{}", r.bodyn(B64URL, 90, 120)))
    }),
    cred("grafana_token", |r| {
        if r.range(0, 1) == 0 {
            token(format!("glsa_{}_{}", r.s(ALNUM, 32), r.s(HEX, 8)))
        } else {
            let claims =
                URL_SAFE_NO_PAD.encode(format!(r#"{{"o":"{}","n":"stack"}}"#, r.s(DIGITS, 6)));
            token(format!("glc_{claims}{}", r.s(ALNUM, 40)))
        }
    }),
    cred("age_secret_key", |r| {
        token(format!(
            "AGE-SECRET-KEY-1{}",
            r.s("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)
        ))
    }),
    cred("databricks_token", |r| {
        token(format!("dapi{}", r.s(HEX, 32)))
    }),
    cred("postman_key", |r| {
        token(format!("PMAK-{}-{}", r.s(HEX, 24), r.s(HEX, 34)))
    }),
    cred("telegram_bot_token", |r| {
        token(format!("{}:AA{}", r.sn(DIGITS, 9, 10), r.body(B64URL, 33)))
    }),
    cred("mailgun_key", |r| token(format!("key-{}", r.s(HEX, 32)))),
    cred("mailchimp_key", |r| {
        token(format!("{}-us{}", r.s(HEX, 32), r.range(1, 21)))
    }),
    cred("linear_key", |r| {
        token(format!("lin_api_{}", r.s(ALNUM, 40)))
    }),
    cred("new_relic_key", |r| {
        token(format!("NRAK-{}", r.s(UPPER_DIGITS, 27)))
    }),
    cred("atlassian_token", |r| {
        token(format!(
            "ATATT3{}={}",
            r.body(B64URL, 183),
            r.s(HEX, 8).to_uppercase()
        ))
    }),
    cred("square_token", |r| {
        if r.range(0, 1) == 0 {
            token(format!("sq0atp-{}", r.body(B64URL, 22)))
        } else {
            token(format!("sq0csp-{}", r.body(B64URL, 43)))
        }
    }),
    cred("pulumi_token", |r| token(format!("pul-{}", r.s(HEX, 40)))),
    cred("heroku_key", |r| {
        token(format!("HRKU-AA{}", r.body(B64URL, 58)))
    }),
    cred("doppler_token", |r| {
        let kind = r.pick(&["pt", "st", "sa", "ct"]);
        token(format!("dp.{kind}.{}", r.s(LOWER_DIGITS, 43)))
    }),
    cred("sentry_token", |r| {
        token(format!("sntryu_{}", r.s(HEX, 64)))
    }),
    cred("azure_storage_key", |r| {
        let key = format!("{}==", r.s(B64, 86));
        labelled(
            format!(
                "DefaultEndpointsProtocol=https;AccountName=store{};AccountKey={key};EndpointSuffix=core.windows.net",
                r.s(DIGITS, 3)
            ),
            key,
        )
    }),
    cred("azure_ad_client_secret", |r| {
        token(format!(
            "{}{}Q~{}",
            r.s(ALNUM, 3),
            r.s(DIGITS, 1),
            r.body(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_~.-",
                34
            )
        ))
    }),
    cred("azure_sas_signature", |r| {
        let sig = format!("{}%3D", r.s(ALNUM, 43));
        labelled(
            format!(
                "https://store.blob.core.windows.net/c/file.txt?sv=2022-11-02&se=2026-12-01&sp=r&sig={sig}"
            ),
            sig,
        )
    }),
    cred("switchboard_token", |r| {
        let prefix = r.pick(&["sb_ag_", "sb_op_"]);
        token(format!("{prefix}{}", r.body(B64URL, 43)))
    }),
    cred("jwt", |r| {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{}"}}"#, r.s(LOWER, 8)));
        token(format!("{header}.{claims}.{}", r.body(B64URL, 43)))
    }),
    cred("pem_private_key", |r| {
        let kind = r.pick(&["RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED "]);
        let body = (0..3).map(|_| r.s(B64, 64)).collect::<Vec<_>>().join("\n");
        token(format!(
            "-----BEGIN {kind}{k}-----\n{body}\n-----END {kind}{k}-----",
            k = "PRIVATE KEY"
        ))
    }),
    cred("url_with_password", |r| {
        // A URL percent-encodes what would end its userinfo.
        let secret = password(r).replace('#', "%23").replace('^', "%5E");
        let scheme = r.pick(&["postgres", "mysql", "redis", "amqp", "https", "mongodb+srv"]);
        labelled(
            format!("{scheme}://app_user:{secret}@db.internal.example:5432/app"),
            secret,
        )
    }),
    cred("password_assignment", |r| {
        let secret = password(r);
        let text = match r.range(0, 6) {
            0 => format!("password={secret}"),
            1 => format!("DB_PASSWORD={secret}"),
            2 => format!(r#"{{"password": "{secret}"}}"#),
            3 => format!("passwd: {secret}"),
            4 => format!("mysql --user=app --password {secret}"),
            5 => format!("Password={secret};User Id=app"),
            _ => format!("smtp_pass = '{secret}'"),
        };
        labelled(text, secret)
    }),
    cred("secret_or_api_key_assignment", |r| {
        let secret = r.sn(ALNUM, 16, 40);
        let key = r.pick(&[
            "api_key",
            "API_KEY",
            "apikey",
            "client_secret",
            "SECRET_KEY",
            "auth_token",
            "access_token",
            "X_API_KEY",
            "secret",
            "private_key",
            "app_secret",
        ]);
        let text = match r.range(0, 3) {
            0 => format!("{key}={secret}"),
            1 => format!(r#""{key}": "{secret}""#),
            2 => format!("{key}: {secret}"),
            _ => format!("https://api.example.com/v1/items?{key}={secret}&page=2"),
        };
        labelled(text, secret)
    }),
    cred("authorization_header", |r| {
        if r.range(0, 1) == 0 {
            let secret = r.bodyn(B64URL, 24, 64);
            labelled(format!("Authorization: Bearer {secret}"), secret)
        } else {
            let secret = STANDARD.encode(format!("{}:{}", r.s(LOWER, 6), password(r)));
            labelled(format!("Authorization: Basic {secret}"), secret)
        }
    }),
    cred("high_entropy_string", |r| token(r.sn(ALNUM, 40, 64))),
    pii("payment_card", |r| {
        let (prefix, len) = *r.pick(&[
            ("4", 16),
            ("51", 16),
            ("55", 16),
            ("2221", 16),
            ("34", 15),
            ("37", 15),
            ("6011", 16),
            ("35", 16),
        ]);
        let partial = format!("{prefix}{}", r.s(DIGITS, len - prefix.len() - 1));
        let number = luhn_complete(&partial);
        let sep = r.pick(&["", " ", "-"]);
        let grouped = if len == 15 {
            format!(
                "{}{sep}{}{sep}{}",
                &number[..4],
                &number[4..10],
                &number[10..]
            )
        } else {
            number
                .as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect::<Vec<_>>()
                .join(sep)
        };
        token(grouped)
    }),
    pii("us_ssn", |r| {
        let area = r.range(1, 899);
        let area = if area == 666 { 667 } else { area };
        token(format!(
            "{area:03}-{:02}-{:04}",
            r.range(1, 99),
            r.range(1, 9999)
        ))
    }),
    pii("email", |r| {
        token(format!(
            "{}.{}{}@{}.{}",
            r.sn(LOWER, 3, 8),
            r.sn(LOWER, 3, 8),
            r.pick(&["", "+ops", "42"]),
            r.pick(&["example", "mail-host", "corp.example"]),
            r.pick(&["com", "org", "co.uk", "io", "de"])
        ))
    }),
    pii("iban", |r| {
        let (country, bban) = match r.range(0, 7) {
            0 => ("DE", r.s(DIGITS, 18)),
            1 => ("GB", format!("{}{}", r.s(UPPER, 4), r.s(DIGITS, 14))),
            2 => (
                "FR",
                format!(
                    "{}{}{}",
                    r.s(DIGITS, 10),
                    r.s(UPPER_DIGITS, 11),
                    r.s(DIGITS, 2)
                ),
            ),
            3 => ("NL", format!("{}{}", r.s(UPPER, 4), r.s(DIGITS, 10))),
            4 => ("ES", r.s(DIGITS, 20)),
            5 => (
                "IT",
                format!(
                    "{}{}{}",
                    r.s(UPPER, 1),
                    r.s(DIGITS, 10),
                    r.s(UPPER_DIGITS, 12)
                ),
            ),
            6 => ("BE", r.s(DIGITS, 12)),
            _ => ("CH", format!("{}{}", r.s(DIGITS, 5), r.s(UPPER_DIGITS, 12))),
        };
        let iban = iban(country, &bban);
        if r.range(0, 1) == 0 {
            token(iban)
        } else {
            let groups: Vec<String> = iban
                .as_bytes()
                .chunks(4)
                .map(|c| String::from_utf8(c.to_vec()).unwrap())
                .collect();
            token(groups.join(" "))
        }
    }),
    pii("phone_international", |r| {
        let number = match r.range(0, 4) {
            0 => format!("+44 20 {} {}", r.s(DIGITS, 4), r.s(DIGITS, 4)),
            1 => format!("+49 30 {}{}", r.range(1, 9), r.s(DIGITS, 7)),
            2 => format!(
                "+33 6 {} {} {} {}",
                r.s(DIGITS, 2),
                r.s(DIGITS, 2),
                r.s(DIGITS, 2),
                r.s(DIGITS, 2)
            ),
            3 => format!(
                "+1-{}{}-{}{}-{}",
                r.range(2, 9),
                r.s(DIGITS, 2),
                r.range(2, 9),
                r.s(DIGITS, 2),
                r.s(DIGITS, 4)
            ),
            _ => format!("+81{}{}", r.range(1, 9), r.s(DIGITS, 8)),
        };
        token(number)
    }),
    pii("phone_north_american", |r| {
        let (a, e, n) = (
            format!("{}{}", r.range(2, 9), r.s(DIGITS, 2)),
            format!("{}{}", r.range(2, 9), r.s(DIGITS, 2)),
            r.s(DIGITS, 4),
        );
        token(match r.range(0, 2) {
            0 => format!("({a}) {e}-{n}"),
            1 => format!("{a}-{e}-{n}"),
            _ => format!("{a}.{e}.{n}"),
        })
    }),
    pii("uk_national_insurance_number", |r| {
        let first = r.s("ABCEGHJKLMNOPRSTWXYZ", 1);
        let second = r.s("ABCEGHJKLMNPRSTWXYZ", 1);
        let prefix = format!("{first}{second}");
        let prefix = if ["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&prefix.as_str()) {
            "AB".to_owned()
        } else {
            prefix
        };
        let (d1, d2, d3) = (r.s(DIGITS, 2), r.s(DIGITS, 2), r.s(DIGITS, 2));
        let suffix = r.s("ABCD", 1);
        token(if r.range(0, 1) == 0 {
            format!("{prefix}{d1}{d2}{d3}{suffix}")
        } else {
            format!("{prefix} {d1} {d2} {d3} {suffix}")
        })
    }),
    pii("spanish_dni_nie", |r| {
        const LETTERS: &[u8] = b"TRWAGMYFPDXBNJZSQVHLCKE";
        if r.range(0, 1) == 0 {
            let n: u64 = r.s(DIGITS, 8).parse().unwrap();
            token(format!("{n:08}{}", LETTERS[(n % 23) as usize] as char))
        } else {
            let lead = r.range(0, 2);
            let rest = r.s(DIGITS, 7);
            let n: u64 = format!("{lead}{rest}").parse().unwrap();
            let lead = ["X", "Y", "Z"][lead];
            token(format!(
                "{lead}{rest}{}",
                LETTERS[(n % 23) as usize] as char
            ))
        }
    }),
    pii("indian_aadhaar", |r| {
        let number = verhoeff_complete(&format!("{}{}", r.range(2, 9), r.s(DIGITS, 10)));
        token(format!(
            "{} {} {}",
            &number[..4],
            &number[4..8],
            &number[8..]
        ))
    }),
    pii("iban_lower_case", |r| {
        let (country, bban) = match r.range(0, 2) {
            0 => ("DE", r.s(DIGITS, 18)),
            1 => ("GB", format!("{}{}", r.s(UPPER, 4), r.s(DIGITS, 14))),
            _ => ("NL", format!("{}{}", r.s(UPPER, 4), r.s(DIGITS, 10))),
        };
        let iban = iban(country, &bban).to_lowercase();
        token(if r.range(0, 1) == 0 {
            iban
        } else {
            let groups: Vec<&str> = iban
                .as_bytes()
                .chunks(4)
                .map(|c| std::str::from_utf8(c).unwrap())
                .collect();
            groups.join(" ")
        })
    }),
    pii("uk_nhs_number", |r| {
        let number = loop {
            let partial = r.s(DIGITS, 9);
            if let Some(check) = nhs_check(&partial) {
                break format!("{partial}{check}");
            }
        };
        let (a, b, c) = (&number[..3], &number[3..6], &number[6..]);
        labelled(format!("NHS no. {a} {b} {c}"), format!("{a} {b} {c}"))
    }),
    pii("indian_aadhaar_bare", |r| {
        // First digit 3–9: a bare 20YYMMDDhhmm is read as a timestamp.
        token(verhoeff_complete(&format!(
            "{}{}",
            r.range(3, 9),
            r.s(DIGITS, 10)
        )))
    }),
    pii("italian_codice_fiscale", |r| {
        let partial = format!(
            "{}{}{}{:02}{}{}",
            r.s(UPPER, 6),
            r.s(DIGITS, 2),
            r.s("ABCDEHLMPRST", 1),
            r.range(1, 28) + *r.pick(&[0, 40]),
            r.s(UPPER, 1),
            r.s(DIGITS, 3)
        );
        let check = codice_fiscale_check(&partial);
        token(format!("{partial}{check}"))
    }),
    pii("finnish_hetu", |r| {
        // `-` for the 1900s, `A` for the 2000s; days up to 28 exist in every month.
        let sign = *r.pick(&["-", "A"]);
        let year = r.range(0, 99);
        let date = format!("{:02}{:02}{year:02}", r.range(1, 28), r.range(1, 12));
        let individual = format!("{:03}", r.range(2, 899));
        let n: u64 = format!("{date}{individual}").parse().unwrap();
        let check = b"0123456789ABCDEFHJKLMNPRSTUVWXY"[(n % 31) as usize] as char;
        token(format!("{date}{sign}{individual}{check}"))
    }),
    pii("polish_pesel", |r| {
        let month = r.range(1, 12) + *r.pick(&[0, 20]);
        let partial = format!(
            "{}{month:02}{:02}{}",
            r.s(DIGITS, 2),
            r.range(1, 28),
            r.s(DIGITS, 4)
        );
        let weights = [1, 3, 7, 9, 1, 3, 7, 9, 1, 3];
        let sum: u32 = partial
            .chars()
            .zip(weights)
            .map(|(c, w)| c.to_digit(10).unwrap() * w)
            .sum();
        token(format!("{partial}{}", (10 - sum % 10) % 10))
    }),
    pii("singapore_nric_fin", |r| {
        let prefix = *r.pick(&["S", "T", "F", "G"]);
        let digits = r.s(DIGITS, 7);
        let sum: u32 = digits
            .chars()
            .zip([2, 7, 6, 5, 4, 3, 2])
            .map(|(c, w)| c.to_digit(10).unwrap() * w)
            .sum::<u32>()
            + if prefix == "T" || prefix == "G" { 4 } else { 0 };
        let letters = if prefix == "S" || prefix == "T" {
            b"JZIHGFEDCBA"
        } else {
            b"XWUTRQPNMLK"
        };
        token(format!(
            "{prefix}{digits}{}",
            letters[(sum % 11) as usize] as char
        ))
    }),
    pii("us_itin", |r| {
        let group = *r.pick(&[70, 75, 78, 80, 84, 88, 90, 92, 94, 99]);
        token(format!("9{}-{group}-{}", r.s(DIGITS, 2), r.s(DIGITS, 4)))
    }),
];

/// The NHS check digit of nine digits, or `None` where it would be 10 (never issued).
fn nhs_check(partial: &str) -> Option<u32> {
    let sum: u32 = partial
        .chars()
        .zip((2..=10).rev())
        .map(|(c, w)| c.to_digit(10).unwrap() * w)
        .sum();
    match 11 - sum % 11 {
        11 => Some(0),
        10 => None,
        check => Some(check),
    }
}

/// The check letter of the first fifteen characters of a codice fiscale.
fn codice_fiscale_check(partial: &str) -> char {
    const ODD: [u32; 26] = [
        1, 0, 5, 7, 9, 13, 15, 17, 19, 21, 2, 4, 18, 20, 11, 3, 6, 8, 12, 14, 16, 10, 22, 25, 24,
        23,
    ];
    let sum: u32 = partial
        .bytes()
        .enumerate()
        .map(|(i, c)| {
            let (digit, letter) = match c {
                b'0'..=b'9' => (u32::from(c - b'0'), usize::from(c - b'0')),
                _ => (u32::from(c - b'A'), usize::from(c - b'A')),
            };
            if i % 2 == 0 { ODD[letter] } else { digit }
        })
        .sum();
    (b'A' + (sum % 26) as u8) as char
}
