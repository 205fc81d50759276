//! The directory's PostgreSQL shapes: a login ticket taken in one statement.

use super::PgDriver;
use crate::clock::Millis;
use crate::dialect::{Dialect, sql};
use crate::rows::{GRANT_COLS, GRANT_JOINS, GRANT_LIVE, grant_from_row};
use crate::{Grant, GrantKind, StoreResult};
use async_trait::async_trait;
use sqlx::Row;

#[async_trait]
impl crate::engine::directory::DirectoryDriver for PgDriver {
    /// The delete and the read in one statement (one round trip, no transaction):
    /// `g` is the row just deleted, so of two racing requests the second one's
    /// `DELETE` waits for the first one's row lock, then finds nothing.
    async fn take_live_grant(
        &self,
        hash: &[u8],
        kind: GrantKind,
        now: Millis,
    ) -> StoreResult<Option<Grant>> {
        let row = sqlx::query(sql!(
            Dialect::Postgres,
            "WITH g AS (DELETE FROM console_grants WHERE hash = $1 AND kind = $2 RETURNING *) \
             SELECT {GRANT_COLS} FROM g {GRANT_JOINS} {GRANT_LIVE}"
        ))
        .bind(hash)
        .bind(kind.as_str())
        .bind(now)
        .fetch_optional(self.pool())
        .await?;
        row.map(|row| grant_from_row(&row, row.try_get("token_hash")?))
            .transpose()
    }
}
