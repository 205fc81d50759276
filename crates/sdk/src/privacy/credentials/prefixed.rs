//! Vendor tokens with a fixed prefix or shape, one row per rule. The shapes follow
//! the public rule sets of gitleaks and detect-secrets (prefix, alphabet, length);
//! the patterns are written here, not copied.
//!
//! A row's span is its first capture group when it has one (the key inside a
//! connection string), else the whole match. Rows are in priority order: when two
//! rows match overlapping text, the earlier one names the finding (`sk-ant-…` is an
//! Anthropic key, not an OpenAI one).

use std::sync::LazyLock;

use regex::Regex;

use super::super::finding::Credential;
use super::regex;

/// (rule, pattern), in priority order.
pub(super) static PREFIXED: LazyLock<Vec<(Credential, Regex)>> = LazyLock::new(|| {
    use Credential::*;
    let rows: &[(Credential, &str)] = &[
        (AwsAccessKeyId, r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
        (
            GitHubToken,
            r"\b(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        ),
        (
            GitLabToken,
            r"\b(?:gl(?:pat|ptt|dt|rt|cbt|oas|imt|agent|soat|ffct|ft)-|GR1348941)[A-Za-z0-9_-]{20,}",
        ),
        (
            SlackToken,
            r"\b(?:xox[abposer]-[A-Za-z0-9-]{10,}|xoxe\.xox[bp]-\d-[A-Za-z0-9]{100,})",
        ),
        (
            StripeKey,
            r"\b(?:(?:sk|rk)_live_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{32,})",
        ),
        (
            AnthropicKey,
            r"\bsk-ant-(?:api|admin|sid)\d{2}-[A-Za-z0-9_-]{80,}",
        ),
        (
            OpenAiKey,
            r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}",
        ),
        (GoogleApiKey, r"\bAIza[0-9A-Za-z_-]{35}"),
        (
            GoogleOAuth,
            r"\b(?:GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[A-Za-z0-9_-]{20,})",
        ),
        (NpmToken, r"\bnpm_[A-Za-z0-9]{36}\b"),
        (PyPiToken, r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}"),
        (SendGridKey, r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
        (TwilioKey, r"\bSK[0-9a-fA-F]{32}\b"),
        (HuggingFaceToken, r"\b(?:hf_|api_org_)[A-Za-z]{34}\b"),
        (DigitalOceanToken, r"\bdo[por]_v1_[a-f0-9]{64}\b"),
        (ShopifyToken, r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
        (DockerHubToken, r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}"),
        (VaultToken, r"\bhv[sb]\.[A-Za-z0-9_-]{24,}"),
        (
            GrafanaToken,
            r"\b(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b|glc_[A-Za-z0-9+/]{32,}={0,2})",
        ),
        (
            AgeSecretKey,
            r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b",
        ),
        (DatabricksToken, r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
        (PostmanKey, r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
        (TelegramBotToken, r"\b\d{8,10}:A[A-Za-z0-9_-]{34}"),
        (MailgunKey, r"\b(?:key|pubkey)-[a-f0-9]{32}\b"),
        (MailchimpKey, r"\b[a-f0-9]{32}-us\d{1,2}\b"),
        (LinearKey, r"\blin_(?:api|oauth)_[A-Za-z0-9]{40}\b"),
        (
            NewRelicKey,
            r"\b(?:NRAK-[A-Za-z0-9]{27}|NRII-[A-Za-z0-9_-]{32})\b",
        ),
        (AtlassianToken, r"\bATATT3[A-Za-z0-9_=-]{150,}"),
        (
            SquareToken,
            r"\b(?:sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}|EAAA[A-Za-z0-9_-]{60,})",
        ),
        (PulumiToken, r"\bpul-[a-f0-9]{40}\b"),
        (HerokuKey, r"\bHRKU-AA[A-Za-z0-9_-]{58}"),
        (
            DopplerToken,
            r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b",
        ),
        (SentryToken, r"\bsntry[us]_[A-Za-z0-9+/=_-]{40,}"),
        (AzureStorageKey, r"(?i:AccountKey)=([A-Za-z0-9+/]{86}==)"),
        (
            AzureClientSecret,
            r"(?:^|[^A-Za-z0-9_~.-])([A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:$|[^A-Za-z0-9_~.-])",
        ),
        (SwitchboardToken, r"\bsb_(?:op|ag)_[A-Za-z0-9_-]{16,}"),
    ];
    rows.iter().map(|(rule, p)| (*rule, regex(p))).collect()
});
