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
    /// `AKIA…`/`ASIA…` followed by 16 upper-case letters or digits.
    AwsAccessKeyId,
    /// 40 base64 characters beside an AWS key id or an `aws…secret` label.
    AwsSecretAccessKey,
    /// A PEM block `-----BEGIN … PRIVATE KEY-----`.
    PrivateKey,
    /// Three base64url segments whose first decodes to a JSON header with `alg`.
    Jwt,
    /// `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` or `github_pat_` tokens.
    GitHubToken,
    /// `xoxa-`, `xoxb-`, `xoxp-` or `xoxr-` tokens.
    SlackToken,
    /// `sk_live_` or `rk_live_` keys.
    StripeKey,
    /// `sk-…` keys of 32 characters or more (OpenAI and lookalikes).
    OpenAiKey,
    /// `AIza…` Google API keys.
    GoogleApiKey,
    /// Switchboard's own `sb_op_` (operator) and `sb_ag_` (agent) tokens.
    SwitchboardToken,
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
}

impl PiiKind {
    /// The stable code, as printed in refusals (`pii.<name>`).
    pub fn code(self) -> &'static str {
        match self {
            Self::Ssn => "pii.ssn",
            Self::PaymentCard => "pii.payment_card",
            Self::Email => "pii.email",
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
