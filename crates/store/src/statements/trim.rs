//! [`TrimStatements`](crate::engine::trim::TrimStatements): deleting a
//! table's old rows in batches. The table and column come from the engine's
//! constants, never from input; each statement is rendered for the dialect where
//! it runs (they differ by table, so they are not kept per call site as `sql!`
//! keeps the others).

macro_rules! trim_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::trim::TrimStatements for $store {
            async fn trim_bound(
                &self,
                trim: &$crate::engine::trim::Trim,
                before: $crate::clock::Millis,
                limit: u32,
            ) -> $crate::StoreResult<Option<i64>> {
                let sql = $crate::statements::trim_sql!(
                    trim,
                    "SELECT {c} FROM {t} WHERE {c} < $1 {x} ORDER BY {c} LIMIT 1 OFFSET $2"
                );
                Ok(sqlx::query_scalar(sql)
                    .bind(before)
                    .bind(i64::from(limit.max(1) - 1))
                    .fetch_optional(self.read_pool())
                    .await?)
            }

            async fn trim_through(
                &self,
                trim: &$crate::engine::trim::Trim,
                through: i64,
                before: $crate::clock::Millis,
            ) -> $crate::StoreResult<u64> {
                let sql = $crate::statements::trim_sql!(
                    trim,
                    "DELETE FROM {t} WHERE {c} <= $1 AND {c} < $2 {x}"
                );
                Ok(sqlx::query(sql)
                    .bind(through)
                    .bind(before)
                    .execute(self.write_pool())
                    .await?
                    .rows_affected())
            }
        }
    };
}
pub(crate) use trim_statements;

/// A trim statement's text for `trim`'s table in the dialect of the driver being
/// implemented: the template names the table `{t}`, its time column `{c}` and its
/// extra condition `{x}`.
macro_rules! trim_sql {
    ($trim:expr, $template:literal) => {
        sqlx::AssertSqlSafe(<Self as $crate::engine::Driver>::DIALECT.render(&format!(
            $template,
            c = $trim.column,
            t = $trim.table,
            x = $trim.extra,
        )))
    };
}
pub(crate) use trim_sql;
