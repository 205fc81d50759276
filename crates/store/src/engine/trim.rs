//! Trimming by age, once for every backend: a table's rows older than a bound go in
//! batches of [`TRIM_BATCH`], one short autocommit statement each, so a table that
//! grew for months is cut down without one statement that holds the writer
//! (SQLite), a huge lock set (MariaDB) or more than the statement limit (PostgreSQL's
//! `statement_timeout`, MariaDB's `max_statement_time`).
//!
//! A batch is two statements that every backend speaks alike (no `DELETE … LIMIT`,
//! which only MySQL has): the age of the `TRIM_BATCH`-th oldest row, then the delete
//! of the rows at most that old. Rows of the same age are deleted together, so a
//! batch may be a little larger; the loop ends with a batch smaller than the limit.

use super::Driver;
use crate::StoreResult;
use crate::clock::Millis;
use async_trait::async_trait;

/// Rows one trimming statement deletes, about.
pub(crate) const TRIM_BATCH: u32 = 1_000;

/// What a trim removes: the rows of `table` whose `column` (a time in ms) is below
/// the bound, and for which `extra` (SQL without parameters, or "") holds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trim {
    pub(crate) table: &'static str,
    pub(crate) column: &'static str,
    pub(crate) extra: &'static str,
}

/// Idempotency records past their expiry (I8 keeps them at least 24 h).
pub(crate) const IDEMPOTENCY_KEYS: Trim = Trim {
    table: "idempotency_keys",
    column: "expires_at",
    extra: "",
};
/// Webhook delivery attempts, kept as long as terminal events.
pub(crate) const CALLBACK_ATTEMPTS: Trim = Trim {
    table: "callback_attempts",
    column: "at",
    extra: "",
};
pub(crate) const ACCESS_TOKENS: Trim = Trim {
    table: "access_tokens",
    column: "expires_at",
    extra: "",
};
/// The replay cache of signature nonces, once their signatures have expired.
pub(crate) const SIGNATURE_NONCES: Trim = Trim {
    table: "signature_nonces",
    column: "expires_at",
    extra: "",
};
pub(crate) const DEVICE_REQUESTS: Trim = Trim {
    table: "device_requests",
    column: "expires_at",
    extra: "",
};
pub(crate) const AUTHORIZATION_CODES: Trim = Trim {
    table: "authorization_codes",
    column: "expires_at",
    extra: "",
};
/// The operators' audit log; a running job's row stays, whatever its age.
pub(crate) const AUDIT_LOG: Trim = Trim {
    table: "audit_log",
    column: "at",
    extra: "AND (job_state IS NULL OR job_state NOT IN ('running', 'cancelling'))",
};
pub(crate) const LEASE_AUDIT: Trim = Trim {
    table: "lease_audit",
    column: "at",
    extra: "",
};
pub(crate) const FENCING_REJECTIONS: Trim = Trim {
    table: "fencing_rejections",
    column: "at",
    extra: "",
};
/// Revoked credentials, by the time of their revocation.
pub(crate) const REVOKED_TOKENS: Trim = Trim {
    table: "tokens",
    column: "revoked_at",
    extra: "",
};
/// Refresh tokens, by their issue: one older than a login's absolute lifetime can
/// never be used again.
pub(crate) const REFRESH_TOKENS: Trim = Trim {
    table: "refresh_tokens",
    column: "created_at",
    extra: "",
};
/// The record of a fencing token no live lease carries (the data plane reads the
/// current one's).
pub(crate) const ISSUED_TOKENS: Trim = Trim {
    table: "issued_tokens",
    column: "issued_at",
    extra: "AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.memory_id = issued_tokens.memory_id \
            AND l.fence = issued_tokens.fence)",
};

#[async_trait]
pub(crate) trait TrimStatements: Driver {
    /// The `column` value of the `limit`-th oldest row of `trim` below `before`, if
    /// there are that many (read pool).
    async fn trim_bound(&self, trim: &Trim, before: Millis, limit: u32)
    -> StoreResult<Option<i64>>;
    /// Deletes the rows of `trim` with `column <= through` and `< before` (write
    /// pool, one statement); how many.
    async fn trim_through(&self, trim: &Trim, through: i64, before: Millis) -> StoreResult<u64>;
}

/// Deletes every row of `trim` older than `before`, in batches; how many.
pub(crate) async fn trim<D: TrimStatements>(
    d: &D,
    trim: &Trim,
    before: Millis,
) -> StoreResult<u64> {
    let mut removed = 0;
    loop {
        let bound = d.trim_bound(trim, before, TRIM_BATCH).await?;
        let through = bound.unwrap_or(before - 1);
        let n = d.retrying(|| d.trim_through(trim, through, before)).await?;
        removed += n;
        if bound.is_none() || n == 0 {
            return Ok(removed);
        }
    }
}
