//! Errors. [`StoreError`] is what the storage layer says (not-found is mapped once,
//! there); [`ApiError`] is the RFC 9457 problem document a client gets. Internal
//! details are logged with the request, never put in a response.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchboard_proto::{ErrorCode, PROBLEM_JSON, Problem};

pub use crate::store::StoreError;

/// A problem document plus the headers that go with it.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// Boxed: errors travel through every `Result` of the handlers.
    pub problem: Box<Problem>,
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The problem's title and detail, for a log line (a problem document never holds a
/// secret, I11).
impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem.detail {
            Some(detail) => write!(f, "{}: {detail}", self.problem.title),
            None => f.write_str(&self.problem.title),
        }
    }
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            problem: Box::new(Problem::new(code, detail)),
            retry_after: None,
        }
    }

    pub fn with(mut self, key: &str, value: impl serde::Serialize) -> Self {
        self.problem = Box::new((*self.problem).with(key, value));
        self
    }

    /// 400 `validation_failed`: a request that cannot be read (query, path, header).
    pub fn validation(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationFailed, detail)
    }

    /// 422 `validation_failed`: a well-formed body whose values are not acceptable.
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorCode::ValidationFailed, detail);
        e.problem.status = 422;
        e
    }

    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("{what} does not exist or is not visible to this token"),
        )
    }

    pub fn code(&self) -> Option<ErrorCode> {
        self.problem.error_code()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Self::not_found("the resource"),
            StoreError::CursorGone { cursor, oldest } => Self::new(
                ErrorCode::CursorGone,
                format!(
                    "cursor {cursor} is older than the retention window; the oldest valid \
                     cursor is {oldest}; fetch the snapshot to resync, then poll after {oldest}"
                ),
            )
            .with("oldest_cursor", oldest),
            StoreError::StaleClaim(why) => Self::new(
                ErrorCode::StaleClaim,
                format!(
                    "{why}; the event may be redelivered to another claimer; claim again to \
                     get a fresh token"
                ),
            ),
            StoreError::Conflict(why) => Self::new(ErrorCode::Conflict, why),
            StoreError::Forbidden(why) => Self::new(ErrorCode::Forbidden, why),
            StoreError::Invalid(why) => Self::validation(why),
            StoreError::LeaseHeld {
                why,
                retry_after_ms,
            } => {
                let mut e = Self::new(ErrorCode::LeaseHeld, why);
                // Exact when the lease in the way is the caller's tenant's; else the
                // longest a lease may last, which says nothing of it (I9).
                e.retry_after = Some(match retry_after_ms {
                    Some(ms) => (ms.max(0) as u64).div_ceil(1000).max(1),
                    None => crate::store::MAX_LEASE_TTL_MS as u64 / 1000,
                });
                e
            }
            StoreError::StaleFence(why) => Self::new(ErrorCode::StaleFence, why),
            StoreError::LeaseExpired(why) => Self::new(ErrorCode::LeaseExpired, why),
            StoreError::NotHolder(why) => Self::new(ErrorCode::Forbidden, why),
            StoreError::PreconditionFailed(why) => Self::new(ErrorCode::PreconditionFailed, why),
            StoreError::PreconditionRequired(why) => {
                Self::new(ErrorCode::PreconditionRequired, why)
            }
            StoreError::Confusable {
                canonical,
                skeleton,
            } => Self::new(
                ErrorCode::NameConfusable,
                switchboard_names::NameError::Confusable {
                    canonical,
                    skeleton,
                }
                .to_string(),
            ),
            StoreError::TooMany(n) => Self::unprocessable(format!(
                "{n} events match, more than one request changes at once; start a job \
                 instead (POST /api/v1/ops/jobs with the same filter), which works in \
                 batches, reports progress and can be cancelled"
            )),
            StoreError::KeyTakenOver => {
                let mut e = Self::new(
                    ErrorCode::RequestInProgress,
                    "this attempt ran past the Idempotency-Key's lock and another attempt took \
                     the request over; this one was rolled back and wrote nothing; retry the \
                     same request to get the result of the attempt that ran",
                );
                e.retry_after = Some(1);
                e
            }
            StoreError::Aborted(why) => {
                tracing::warn!(reason = %why, "transaction aborted");
                Self::new(
                    ErrorCode::Unavailable,
                    "the request was rolled back; nothing was written; retry it",
                )
            }
            StoreError::Unavailable(source) => {
                tracing::warn!(error = %source, "database unavailable");
                let mut e = Self::new(
                    ErrorCode::Unavailable,
                    "the database is unavailable; retry after a short delay",
                );
                e.retry_after = Some(1);
                e
            }
            StoreError::StorageFull(source) => {
                tracing::error!(error = %source, "the database's disk is full");
                let mut e = Self::new(
                    ErrorCode::StorageFull,
                    "the database's disk is full and nothing was written; free space on \
                     the database's volume (or grow it), then retry the same request",
                );
                e.retry_after = Some(30);
                e
            }
            StoreError::Database(source) => {
                tracing::error!(error = %source, "database error");
                Self::new(
                    ErrorCode::Internal,
                    "an internal database error occurred; it was logged with this request",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.problem).unwrap_or_default();
        let mut resp = (status, body).into_response();
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110 §15.5.2: a 401 must name the scheme it accepts (RFC 6750 §3).
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            // A 503 may leave the request's body unread (the token lookup before it
            // failed), and then the server cannot keep the connection; saying so
            // stops a client from sending its next request on a connection that is
            // closing (hyper `IncompleteMessage`, the restart test's open finding).
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}
