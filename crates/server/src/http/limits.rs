//! Limits the API enforces, in one place, published at `/api/v1/capabilities`.

use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use switchboard_proto::{ErrorCode, Limits};

pub const MAX_PAGE: u32 = 1000;
pub const DEFAULT_PAGE: u32 = 100;
pub const MAX_CLAIM: u32 = 100;
pub const MIN_LEASE_S: u32 = 1;
pub const MAX_LEASE_S: u32 = 43_200;
pub const DEFAULT_LEASE_S: u32 = 60;
pub const MAX_DELAY_S: u32 = 43_200;
pub const MAX_ATTEMPTS: u32 = 100;
pub const DEFAULT_ATTEMPTS: u32 = 5;
pub const MAX_PRIORITY: i32 = 1000;
pub const MAX_ERROR_BYTES: usize = 4096;
pub const MAX_CORRELATION_BYTES: usize = 256;
pub const MAX_NAME_CHARS: usize = 64;

pub fn limits(config: &Config) -> Limits {
    Limits {
        max_body_bytes: config.max_body_bytes as u64,
        max_page_size: MAX_PAGE,
        default_page_size: DEFAULT_PAGE,
        max_claim_batch: MAX_CLAIM,
        min_lease_seconds: MIN_LEASE_S,
        max_lease_seconds: MAX_LEASE_S,
        default_lease_seconds: DEFAULT_LEASE_S,
        max_delay_seconds: MAX_DELAY_S,
        max_attempts_limit: MAX_ATTEMPTS,
        default_max_attempts: DEFAULT_ATTEMPTS,
        idempotency_ttl_seconds: config.idempotency_ttl.as_secs(),
        heartbeat_seconds: config.heartbeat.as_secs(),
        webhooks: switchboard_proto::WebhookLimits {
            challenge_timeout_seconds: crate::webhooks::CHALLENGE_TIMEOUT.as_secs(),
            delivery_timeout_seconds: crate::webhooks::DELIVERY_TIMEOUT.as_secs(),
            retry_schedule_seconds: config
                .webhooks
                .retry_schedule
                .iter()
                .map(|d| d.as_secs())
                .collect(),
            disable_after_seconds: config.webhooks.disable_after.as_secs(),
            max_answer_bytes: crate::webhooks::register::MAX_ANSWER_BYTES as u64,
        },
    }
}

/// The query of a newest-first list: `?limit=` (1..=1000, default 100).
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageLimit {
    /// 1..=1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

impl PageLimit {
    /// The limit, or a 422 naming `limit`.
    pub fn get(&self) -> ApiResult<u32> {
        bounded("limit", self.limit, DEFAULT_PAGE, 1, MAX_PAGE)
    }
}

/// `value` (or `default`) if it lies in `min..=max`, else a 422 naming the field.
pub fn bounded<T>(field: &str, value: Option<T>, default: T, min: T, max: T) -> ApiResult<T>
where
    T: PartialOrd + Copy + std::fmt::Display,
{
    let v = value.unwrap_or(default);
    if v < min || v > max {
        return Err(ApiError::unprocessable(format!(
            "{field} must be between {min} and {max}, got {v}"
        ))
        .with("field", field));
    }
    Ok(v)
}

/// Agent and room names: 1..=64 of `[A-Za-z0-9._-]`.
pub fn name(field: &str, value: &str) -> ApiResult<()> {
    let ok = !value.is_empty()
        && value.chars().count() <= MAX_NAME_CHARS
        && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        // A name that reads as a UUID would be ambiguous in URLs that take either.
        && uuid::Uuid::parse_str(value).is_err();
    if ok {
        Ok(())
    } else {
        // `name_invalid` (422), the code the SDK and the design document promise.
        let e = ApiError::new(
            ErrorCode::NameInvalid,
            format!(
                "{field} {value:?} is invalid: use 1 to {MAX_NAME_CHARS} characters of A-Z, a-z, 0-9, '.', '_' and '-' (not a UUID)"
            ),
        );
        Err(e.with("field", field))
    }
}
