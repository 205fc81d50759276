//! SQLite-only row helpers; the mapping itself is shared (`store::rows`).

use crate::clock::Millis;
use crate::store::{Actor, StoreResult};
use sqlx::SqliteConnection;

pub(crate) use crate::store::rows::*;

/// Appends one step to an event's history.
pub(crate) async fn history(
    conn: &mut SqliteConnection,
    event_id: &str,
    at: Millis,
    action: &str,
    actor: &Actor,
    detail: Option<String>,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO event_history (event_id, at, action, actor, detail) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(event_id)
    .bind(at)
    .bind(action)
    .bind(actor.to_string())
    .bind(detail)
    .execute(conn)
    .await?;
    Ok(())
}
