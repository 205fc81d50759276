//! Leases on PostgreSQL: the engine's (`store/engine/leases.rs`), with the rows an
//! acquisition decides on locked `FOR UPDATE` in its lock order. What is
//! PostgreSQL's own: a name's fence row is made before it is locked (a row lock
//! needs a row), and a list parameter is an array (`= ANY`).

use super::PgDriver;
use crate::StoreResult;
use crate::clock::Millis;
use crate::engine::leases::{LeaseDriver, LeaseStatements};
use async_trait::async_trait;

#[async_trait]
impl LeaseDriver for PgDriver {
    /// At READ COMMITTED, two acquisitions of a name that never had a lease would
    /// both find no row to lock and both pass. Made first (at fence 0, the same as
    /// none), the row is there to queue on: the second waits for the first one's
    /// commit, then reads what it committed.
    async fn lock_name(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
    ) -> StoreResult<Option<(i64, Millis)>> {
        self.make_name_fence(tx, skeleton).await?;
        self.name_fence(tx, skeleton, true).await
    }

    async fn read_registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken> {
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT skeleton, name, original FROM registered_names WHERE skeleton = ANY($1)",
        )
        .bind(skeletons)
        .fetch_all(self.pool())
        .await?;
        Ok(rows.into_iter().map(|(s, n, o)| (s, (n, o))).collect())
    }
}
