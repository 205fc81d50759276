//! RFC 9457 problem details with a stable machine-readable `code`.
//!
//! Clients act on `code`, never on `title` or `detail`. Codes are only added, never
//! renamed: see [`ErrorCode`].

use serde::{Deserialize, Serialize};

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Stable error codes. The string form is the wire form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ValidationFailed,
    MalformedJson,
    PayloadTooLarge,
    UnsupportedMediaType,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    CursorGone,
    StaleClaim,
    StaleFence,
    PreconditionFailed,
    PreconditionRequired,
    LeaseHeld,
    LeaseExpired,
    IdempotencyKeyRequired,
    IdempotencyKeyReused,
    RequestInProgress,
    RateLimited,
    NameInvalid,
    NameConfusable,
    WebhookTargetForbidden,
    WebhookVerificationFailed,
    /// 401: the signature does not verify, covers too little, or names a key this
    /// credential does not have. Nothing was done.
    SignatureInvalid,
    /// 401: the tenant requires signed agent calls, or the credential is bound to
    /// a key (`cnf.jkt`), and the request carries no signature; `Accept-Signature`
    /// says what to sign. Nothing was done.
    SignatureRequired,
    /// 401: the signature's `created`/`expires` window is not around the server's
    /// clock (30 s of skew allowed). Sign again with the current time.
    SignatureExpired,
    /// 401: this `(keyid, nonce)` was used before, on this instance or another.
    /// Sign again with a new nonce (a retry then gets its stored answer).
    SignatureReplayed,
    /// 400: the body does not match its signed `Content-Digest`. Nothing was done.
    DigestMismatch,
    Unavailable,
    /// 507: the database's disk is full; nothing was written. Retry once space is
    /// freed.
    StorageFull,
    /// 421: the request's `X-Region-Constraint` names no region this server is in;
    /// nothing was done. Send it to a server of that region.
    RegionMismatch,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ValidationFailed => "validation_failed",
            Self::MalformedJson => "malformed_json",
            Self::PayloadTooLarge => "payload_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::CursorGone => "cursor_gone",
            Self::StaleClaim => "stale_claim",
            Self::StaleFence => "stale_fence",
            Self::PreconditionFailed => "precondition_failed",
            Self::PreconditionRequired => "precondition_required",
            Self::LeaseHeld => "lease_held",
            Self::LeaseExpired => "lease_expired",
            Self::IdempotencyKeyRequired => "idempotency_key_required",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::RequestInProgress => "request_in_progress",
            Self::RateLimited => "rate_limited",
            Self::NameInvalid => "name_invalid",
            Self::NameConfusable => "name_confusable",
            Self::WebhookTargetForbidden => "webhook_target_forbidden",
            Self::WebhookVerificationFailed => "webhook_verification_failed",
            Self::SignatureInvalid => "signature_invalid",
            Self::SignatureRequired => "signature_required",
            Self::SignatureExpired => "signature_expired",
            Self::SignatureReplayed => "signature_replayed",
            Self::DigestMismatch => "digest_mismatch",
            Self::Unavailable => "unavailable",
            Self::StorageFull => "storage_full",
            Self::RegionMismatch => "region_mismatch",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn status(self) -> u16 {
        match self {
            Self::ValidationFailed | Self::MalformedJson | Self::DigestMismatch => 400,
            Self::PayloadTooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::Unauthorized
            | Self::SignatureInvalid
            | Self::SignatureRequired
            | Self::SignatureExpired
            | Self::SignatureReplayed => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::Conflict | Self::StaleClaim | Self::StaleFence | Self::RequestInProgress => 409,
            Self::CursorGone | Self::LeaseExpired => 410,
            Self::LeaseHeld => 423,
            Self::PreconditionFailed => 412,
            Self::PreconditionRequired => 428,
            Self::IdempotencyKeyRequired => 400,
            Self::IdempotencyKeyReused
            | Self::NameInvalid
            | Self::NameConfusable
            | Self::WebhookTargetForbidden
            | Self::WebhookVerificationFailed => 422,
            Self::RateLimited => 429,
            Self::Unavailable => 503,
            Self::StorageFull => 507,
            Self::RegionMismatch => 421,
            Self::Internal => 500,
        }
    }

    /// A short, human title (RFC 9457 `title`), the same for every occurrence.
    pub fn title(self) -> &'static str {
        match self {
            Self::ValidationFailed => "Request is invalid",
            Self::MalformedJson => "Request body is not valid JSON",
            Self::PayloadTooLarge => "Request body is too large",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::Unauthorized => "Authentication required",
            Self::Forbidden => "Not allowed",
            Self::NotFound => "Not found",
            Self::MethodNotAllowed => "Method not allowed",
            Self::Conflict => "Conflict",
            Self::CursorGone => "Cursor is older than the retention window",
            Self::StaleClaim => "Claim token is stale",
            Self::StaleFence => "Fencing token is stale",
            Self::PreconditionFailed => "The record changed since it was read",
            Self::PreconditionRequired => "A precondition (If-Match) is required",
            Self::LeaseHeld => "Lease is held by another owner",
            Self::LeaseExpired => "Lease has expired",
            Self::IdempotencyKeyRequired => "Idempotency-Key header is required",
            Self::IdempotencyKeyReused => "Idempotency-Key was used with a different request",
            Self::RequestInProgress => "A request with this Idempotency-Key is in progress",
            Self::RateLimited => "Too many requests",
            Self::NameInvalid => "Name is invalid",
            Self::NameConfusable => "Name is confusable with an existing name",
            Self::WebhookTargetForbidden => "Webhook target is not allowed",
            Self::WebhookVerificationFailed => "Webhook endpoint failed the challenge",
            Self::SignatureInvalid => "Signature is invalid",
            Self::SignatureRequired => "A signed request is required",
            Self::SignatureExpired => "Signature is outside its time window",
            Self::SignatureReplayed => "Signature nonce was used before",
            Self::DigestMismatch => "Body does not match its Content-Digest",
            Self::Unavailable => "Service unavailable",
            Self::StorageFull => "Insufficient storage",
            Self::RegionMismatch => "The server is not in the region the request requires",
            Self::Internal => "Internal error",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An RFC 9457 problem document. Extension members (for example `oldest_cursor`
/// on `cursor_gone`) are flattened into `extensions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Problem {
    /// A URI reference naming the problem type: `urn:switchboard:problem:{code}`.
    #[serde(rename = "type", default = "about_blank")]
    pub type_: String,
    pub title: String,
    pub status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// The stable machine-readable code. Absent only on foreign problem documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(flatten)]
    pub extensions: serde_json::Map<String, serde_json::Value>,
}

fn about_blank() -> String {
    "about:blank".to_owned()
}

impl Problem {
    /// A problem of `code` with a message that says how to fix it.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            type_: format!("urn:switchboard:problem:{}", code.as_str()),
            title: code.title().to_owned(),
            status: code.status(),
            detail: Some(detail.into()),
            instance: None,
            code: Some(code.as_str().to_owned()),
            extensions: serde_json::Map::new(),
        }
    }

    /// Adds an extension member.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        if let Ok(v) = serde_json::to_value(value) {
            self.extensions.insert(key.to_owned(), v);
        }
        self
    }

    /// The typed code, when it is one of ours.
    pub fn error_code(&self) -> Option<ErrorCode> {
        let code = self.code.as_deref()?;
        serde_json::from_value(serde_json::Value::String(code.to_owned())).ok()
    }
}

/// `Retry-After` is either delay-seconds or an HTTP-date (RFC 9110 §10.2.3). A date
/// in the past means "now". `now` is an input so the date form is testable. The
/// SDK reads it on a 429 or 503 from the server, the server on one from a webhook
/// endpoint.
pub fn parse_retry_after(value: &str, now: time::OffsetDateTime) -> Option<std::time::Duration> {
    use time::format_description::well_known::Rfc2822;
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().ok().map(std::time::Duration::from_secs);
    }
    let at = time::OffsetDateTime::parse(value, &Rfc2822).ok()?;
    Some(std::time::Duration::try_from(at - now).unwrap_or(std::time::Duration::ZERO))
}
