//! The queue table's health: what makes PostgreSQL queues slow down over time is
//! dead tuples that vacuum cannot remove, usually because some transaction stays
//! open. Both are gauges in `/metrics`, and tiles on the console's overview.

use super::PgDriver;
use crate::StoreResult;
use sqlx::Row;
use switchboard_proto::QueueTableHealth;

/// The oldest open transaction's age is measured from the clock, not from this
/// statement's `now()`: a transaction that began after this statement did would
/// otherwise be a negative age (seen once in CI: -0.0014 s).
pub(super) async fn table_health(store: &PgDriver) -> StoreResult<QueueTableHealth> {
    let row = sqlx::query(
        "SELECT COALESCE(s.n_dead_tup, 0) AS dead, COALESCE(s.n_live_tup, 0) AS live, \
           EXTRACT(EPOCH FROM now() - GREATEST(s.last_autovacuum, s.last_vacuum))::float8 AS vacuumed, \
           (SELECT GREATEST(COALESCE(EXTRACT(EPOCH FROM \
                max(clock_timestamp() - xact_start)), 0), 0)::float8 \
              FROM pg_stat_activity WHERE datname = current_database() \
              AND xact_start IS NOT NULL AND pid <> pg_backend_pid()) AS oldest \
         FROM (SELECT 1) one \
         LEFT JOIN pg_stat_user_tables s ON s.relid = to_regclass('events')",
    )
    .fetch_one(store.pool())
    .await?;
    Ok(QueueTableHealth {
        dead_tuples: row.try_get::<i64, _>("dead")?.max(0) as u64,
        live_tuples: row.try_get::<i64, _>("live")?.max(0) as u64,
        oldest_transaction_age_seconds: row.try_get("oldest")?,
        vacuum_age_seconds: row.try_get("vacuumed")?,
    })
}
