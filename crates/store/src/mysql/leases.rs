//! Leases on MariaDB / MySQL: the engine's (`store/engine/leases.rs`), with the
//! rows an acquisition decides on locked `FOR UPDATE` in its lock order. As on
//! PostgreSQL, a name's fence row is made before it is locked: at READ COMMITTED
//! InnoDB takes no gap locks, so a row that does not exist locks nothing. A list
//! parameter is one `?` per item.

use super::MySqlDriver;
use crate::StoreResult;
use crate::clock::Millis;
use crate::engine::leases::{LeaseDriver, LeaseStatements};
use async_trait::async_trait;

#[async_trait]
impl LeaseDriver for MySqlDriver {
    /// Not `make_name_fence` (a plain insert whose duplicate-key error is "there
    /// already"): InnoDB leaves a *shared* lock on the duplicate, so a hundred
    /// acquisitions of one name would each hold one and then all ask for the
    /// exclusive lock: a deadlock per round. An upsert takes the exclusive lock at
    /// once, and the acquisitions queue on it.
    async fn lock_name(
        &self,
        tx: &mut Self::Tx,
        skeleton: &str,
    ) -> StoreResult<Option<(i64, Millis)>> {
        sqlx::query(
            "INSERT INTO name_fences (skeleton, fence) VALUES (?, 0) \
             ON DUPLICATE KEY UPDATE fence = fence",
        )
        .bind(skeleton)
        .execute(&mut **tx)
        .await?;
        self.name_fence(tx, skeleton, true).await
    }

    async fn read_registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken> {
        let mut taken = crate::Taken::new();
        // A bounded number of `?` per statement (MySQL allows 65,535).
        for chunk in skeletons.chunks(1000) {
            let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(
                "SELECT skeleton, name, original FROM registered_names WHERE skeleton IN (",
            );
            let mut list = qb.separated(", ");
            for s in chunk {
                list.push_bind(s);
            }
            qb.push(")");
            let rows: Vec<(String, String, String)> =
                qb.build_query_as().fetch_all(self.pool()).await?;
            taken.extend(rows.into_iter().map(|(s, n, o)| (s, (n, o))));
        }
        Ok(taken)
    }
}
