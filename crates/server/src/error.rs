//! Errors. [`StoreError`] is what the storage layer says (not-found is mapped once,
//! there); [`ApiError`] is the RFC 9457 problem document a client gets. Internal
//! details are logged with the request, never put in a response.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchboard_proto::{ErrorCode, PROBLEM_JSON, Problem};

/// Errors of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// The cursor is below the retention low-water mark.
    #[error("cursor {cursor} is below the low-water mark {oldest}")]
    CursorGone { cursor: u64, oldest: u64 },
    /// The claim token is not the event's current one, or its lease is over.
    #[error("stale claim: {0}")]
    StaleClaim(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("invalid: {0}")]
    Invalid(String),
    /// The name or the memory has another live lease (or is in its lock delay).
    #[error("lease held: {0}")]
    LeaseHeld(String),
    /// A fencing token lower than the current one.
    #[error("stale fence: {0}")]
    StaleFence(String),
    /// A data-plane call with a fencing token that was not issued to the caller.
    #[error("not the lease holder: {0}")]
    NotHolder(String),
    /// If-Match / If-None-Match did not hold.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// An update without If-Match.
    #[error("precondition required: {0}")]
    PreconditionRequired(String),
    /// The lease ran out (and nobody took over yet).
    #[error("lease expired: {0}")]
    LeaseExpired(String),
    /// The name's skeleton is leased under a different canonical name.
    #[error("confusable name")]
    Confusable { canonical: String, skeleton: String },
    /// More events match than an immediate action may change (make it a job).
    #[error("{0} events match")]
    TooMany(u64),
    /// The request's idempotency key is no longer this attempt's: its lock ran out
    /// and another instance took the request over. The business change is rolled
    /// back, so only the attempt that holds the key commits (I8).
    #[error("idempotency key taken over")]
    KeyTakenOver,
    /// A test hook or a commit failure rolled the transaction back.
    #[error("aborted: {0}")]
    Aborted(String),
    #[error("database is unavailable")]
    Unavailable(#[source] sqlx::Error),
    #[error("an internal database error occurred")]
    Database(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => Self::Unavailable(e),
            sqlx::Error::Database(ref db) if db.code().as_deref().is_some_and(transient) => {
                Self::Unavailable(e)
            }
            sqlx::Error::Database(ref db) if mysql_transient(db.as_ref()) => Self::Unavailable(e),
            other => Self::Database(other),
        }
    }
}

/// Database error codes that mean "not now" rather than "wrong": the request gets a
/// 503 with Retry-After.
fn transient(code: &str) -> bool {
    matches!(
        code,
        // SQLITE_BUSY past busy_timeout.
        "5"
        // PostgreSQL: serialization failure and deadlock (after our retries),
        // statement or lock timeout, shutdown and restart, too many connections.
        | "40001" | "40P01" | "57014" | "55P03" | "57P01" | "57P02" | "57P03" | "53300"
        // The database does not accept connections (ALTER DATABASE … ALLOW_CONNECTIONS
        // false, during maintenance). Our statements raise 55000 for nothing else.
        | "55000"
    ) || code.starts_with("08")
}

/// MariaDB / MySQL errors that mean "not now" (their SQLSTATE is often the generic
/// HY000, so by number): lock wait timeout and deadlock (after our retries), a
/// statement over its time limit (MariaDB 1969, MySQL 3024), a query or connection
/// killed, shutdown, too many connections, and a server that went read-only (a
/// failover in progress).
fn mysql_transient(db: &dyn sqlx::error::DatabaseError) -> bool {
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|e| {
            matches!(
                e.number(),
                1205 | 1213 | 1969 | 3024 | 1317 | 1927 | 1053 | 1040 | 1203 | 1290 | 1836
            )
        })
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Database(sqlx::Error::Migrate(Box::new(e)))
    }
}

/// A problem document plus the headers that go with it.
#[derive(Debug)]
pub struct ApiError {
    /// Boxed: errors travel through every `Result` of the handlers.
    pub problem: Box<Problem>,
    pub retry_after: Option<u64>,
}

pub type ApiResult<T> = Result<T, ApiError>;

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
            StoreError::LeaseHeld(why) => Self::new(ErrorCode::LeaseHeld, why),
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
        resp
    }
}
