//! What a scanner reports: a [`Rule`] and a place (JSON path and byte range), never
//! the matched text.
//!
//! Terms: a *rule* is one kind of thing the gate looks for (an AWS access key id, a
//! US SSN …) with a stable dotted code such as `credential.aws_access_key_id`; a
//! *finding* is one match of a rule inside one string of a payload.

use std::fmt;
use std::ops::Range;

/// A kind of credential the gate refuses unconditionally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Credential {
    /// `AKIA…`/`ASIA…`/`ABIA…`/`ACCA…` followed by 16 upper-case letters or digits.
    AwsAccessKeyId,
    /// 40 base64 characters beside an AWS key id or an `aws…secret` label.
    AwsSecretAccessKey,
    /// A PEM block `-----BEGIN … PRIVATE KEY-----`.
    PrivateKey,
    /// Three base64url segments whose first decodes to a JSON header with `alg`.
    Jwt,
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` or `github_pat_` tokens.
    GitHubToken,
    /// `xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxo-`, `xoxs-` or `xoxe-` tokens.
    SlackToken,
    /// `sk_live_` or `rk_live_` keys and `whsec_` webhook signing secrets.
    StripeKey,
    /// `sk-…` keys of 32 characters or more (OpenAI and lookalikes).
    OpenAiKey,
    /// `AIza…` Google API keys.
    GoogleApiKey,
    /// Switchboard's own `sb_op_` (operator) and `sb_ag_` (agent) tokens.
    SwitchboardToken,
    /// `glpat-`, `glptt-`, `gldt-`, `glrt-` … and runner `GR1348941…` GitLab tokens.
    GitLabToken,
    /// `sk-ant-api03-…` and other Anthropic keys.
    AnthropicKey,
    /// Google OAuth client secrets (`GOCSPX-…`) and access tokens (`ya29.…`).
    GoogleOAuth,
    /// `npm_…` access tokens.
    NpmToken,
    /// `pypi-AgEIcHlwaS5vcmc…` upload tokens.
    PyPiToken,
    /// `SG.<22>.<43>` SendGrid keys.
    SendGridKey,
    /// `SK` and 32 hex digits: Twilio API keys.
    TwilioKey,
    /// `hf_…` and `api_org_…` Hugging Face tokens.
    HuggingFaceToken,
    /// `dop_v1_`, `doo_v1_`, `dor_v1_` and 64 hex digits.
    DigitalOceanToken,
    /// `shpat_`, `shpca_`, `shppa_`, `shpss_` and 32 hex digits.
    ShopifyToken,
    /// `dckr_pat_…` and `dckr_oat_…` Docker Hub tokens.
    DockerHubToken,
    /// `hvs.…` and `hvb.…` HashiCorp Vault tokens.
    VaultToken,
    /// `glsa_…` service-account and `glc_…` cloud tokens.
    GrafanaToken,
    /// `AGE-SECRET-KEY-1…` age identities.
    AgeSecretKey,
    /// `dapi` and 32 hex digits.
    DatabricksToken,
    /// `PMAK-…` Postman API keys.
    PostmanKey,
    /// `<bot id>:A…` Telegram bot tokens.
    TelegramBotToken,
    /// `key-` and 32 hex digits (Mailgun).
    MailgunKey,
    /// 32 hex digits and `-us<n>` (Mailchimp).
    MailchimpKey,
    /// `lin_api_…` Linear keys.
    LinearKey,
    /// `NRAK-…` and `NRII-…` New Relic keys.
    NewRelicKey,
    /// `ATATT3…` Atlassian API tokens.
    AtlassianToken,
    /// `sq0atp-…`, `sq0csp-…` and `EAAA…` Square tokens.
    SquareToken,
    /// `pul-` and 40 hex digits.
    PulumiToken,
    /// `HRKU-AA…` Heroku keys.
    HerokuKey,
    /// `dp.pt.…` and other Doppler tokens.
    DopplerToken,
    /// `sntrys_…` and `sntryu_…` Sentry tokens.
    SentryToken,
    /// An `AccountKey=` of 88 base64 characters in an Azure connection string.
    AzureStorageKey,
    /// An Entra ID (Azure AD) client secret: `xxx9Q~…`.
    AzureClientSecret,
    /// A URL that is itself the secret: Slack, Discord or Teams webhooks, or a signed URL's `sig=`.
    SecretUrl,
    /// The password in a URL's userinfo: `scheme://user:password@host`.
    UrlPassword,
    /// A value given to a secret-named key: `password=…`, `"api_key": "…"`, `--token …`.
    SecretAssignment,
    /// An `Authorization: Bearer …` token or a `Basic …` user:password pair.
    HttpAuthorization,
    /// A long run of base64-ish characters with a high Shannon entropy.
    HighEntropy,
}

impl Credential {
    /// The stable code, as printed in refusals (`credential.<name>`).
    pub fn code(self) -> &'static str {
        match self {
            Self::AwsAccessKeyId => "credential.aws_access_key_id",
            Self::AwsSecretAccessKey => "credential.aws_secret_access_key",
            Self::PrivateKey => "credential.private_key",
            Self::Jwt => "credential.jwt",
            Self::GitHubToken => "credential.github_token",
            Self::SlackToken => "credential.slack_token",
            Self::StripeKey => "credential.stripe_key",
            Self::OpenAiKey => "credential.openai_key",
            Self::GoogleApiKey => "credential.google_api_key",
            Self::SwitchboardToken => "credential.switchboard_token",
            Self::GitLabToken => "credential.gitlab_token",
            Self::AnthropicKey => "credential.anthropic_key",
            Self::GoogleOAuth => "credential.google_oauth",
            Self::NpmToken => "credential.npm_token",
            Self::PyPiToken => "credential.pypi_token",
            Self::SendGridKey => "credential.sendgrid_key",
            Self::TwilioKey => "credential.twilio_key",
            Self::HuggingFaceToken => "credential.hugging_face_token",
            Self::DigitalOceanToken => "credential.digitalocean_token",
            Self::ShopifyToken => "credential.shopify_token",
            Self::DockerHubToken => "credential.docker_hub_token",
            Self::VaultToken => "credential.vault_token",
            Self::GrafanaToken => "credential.grafana_token",
            Self::AgeSecretKey => "credential.age_secret_key",
            Self::DatabricksToken => "credential.databricks_token",
            Self::PostmanKey => "credential.postman_key",
            Self::TelegramBotToken => "credential.telegram_bot_token",
            Self::MailgunKey => "credential.mailgun_key",
            Self::MailchimpKey => "credential.mailchimp_key",
            Self::LinearKey => "credential.linear_key",
            Self::NewRelicKey => "credential.new_relic_key",
            Self::AtlassianToken => "credential.atlassian_token",
            Self::SquareToken => "credential.square_token",
            Self::PulumiToken => "credential.pulumi_token",
            Self::HerokuKey => "credential.heroku_key",
            Self::DopplerToken => "credential.doppler_token",
            Self::SentryToken => "credential.sentry_token",
            Self::AzureStorageKey => "credential.azure_storage_key",
            Self::AzureClientSecret => "credential.azure_client_secret",
            Self::SecretUrl => "credential.secret_url",
            Self::UrlPassword => "credential.url_password",
            Self::SecretAssignment => "credential.secret_assignment",
            Self::HttpAuthorization => "credential.http_authorization",
            Self::HighEntropy => "credential.high_entropy",
        }
    }
}

/// A kind of personal data. Refused by default; a schema may allow one kind on one
/// field with [`Schema::allow_pii`](super::Schema::allow_pii).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PiiKind {
    /// A US social security number `AAA-GG-SSSS` in a valid range.
    Ssn,
    /// A payment card number (13–19 digits, Luhn-valid).
    PaymentCard,
    /// An e-mail address.
    Email,
    /// An IBAN whose ISO 13616 mod-97 check holds, at its country's length and in
    /// its country's BBAN format; upper or lower case.
    Iban,
    /// A phone number: international (`+` and 8–15 digits) or North American
    /// (`(212) 555-0147`, `212-555-0147`).
    Phone,
    /// A national id other than the SSN, checked where its format has a check: a US
    /// ITIN, a UK National Insurance or NHS number, a Spanish DNI/NIE, an Italian
    /// codice fiscale, a Finnish HETU, a Polish PESEL, a Swedish personnummer, a
    /// Turkish T.C. kimlik no, a South African ID number, an Indian Aadhaar or PAN,
    /// a Singapore NRIC/FIN, a Korean RRN, a Thai id, an Australian Medicare number
    /// or tax file number, or a Canadian SIN (the table in the SDK's
    /// `privacy/pii/ids.rs` gives each shape and check).
    NationalId,
}

impl PiiKind {
    /// The stable code, as printed in refusals (`pii.<name>`).
    pub fn code(self) -> &'static str {
        match self {
            Self::Ssn => "pii.ssn",
            Self::PaymentCard => "pii.payment_card",
            Self::Email => "pii.email",
            Self::Iban => "pii.iban",
            Self::Phone => "pii.phone",
            Self::NationalId => "pii.national_id",
        }
    }
}

/// The rule a finding matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// Always refused.
    Credential(Credential),
    /// Refused unless the schema allows this kind on the field.
    Pii(PiiKind),
}

impl Rule {
    /// The stable code (`credential.jwt`, `pii.ssn` …).
    pub fn code(self) -> &'static str {
        match self {
            Self::Credential(c) => c.code(),
            Self::Pii(p) => p.code(),
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One match: the rule, the JSON path of the string and the byte range inside it.
/// It never holds the matched text, so it is safe to log and print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was found.
    pub rule: Rule,
    /// Where: a JSON path such as `$.meta.notes[2]`.
    pub path: String,
    /// The byte range of the match inside the string at `path`.
    pub span: Range<usize>,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} (bytes {}..{})",
            self.rule, self.path, self.span.start, self.span.end
        )
    }
}
