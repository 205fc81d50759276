//! Leases on SQLite: the engine's (`store/engine/leases.rs`) in the portable shape,
//! the single writer serializing every acquisition. What is SQLite's own: a list
//! parameter is a JSON array (`json_each`).

use super::SqliteDriver;
use crate::StoreResult;
use crate::engine::leases::LeaseDriver;
use async_trait::async_trait;

#[async_trait]
impl LeaseDriver for SqliteDriver {
    async fn read_registered_names(&self, skeletons: &[String]) -> StoreResult<crate::Taken> {
        let json = serde_json::to_string(skeletons).unwrap_or_else(|_| "[]".to_owned());
        let rows: Vec<(String, String, String)> = sqlx::query_as(
            "SELECT skeleton, name, original FROM registered_names \
             WHERE skeleton IN (SELECT value FROM json_each(?))",
        )
        .bind(json)
        .fetch_all(self.read())
        .await?;
        Ok(rows.into_iter().map(|(s, n, o)| (s, (n, o))).collect())
    }
}
