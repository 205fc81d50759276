//! The PostgreSQL form of moving a row's claim and ack steps into history rows
//! (`engine/timeline.rs`, `EventStatements::move_steps`), inside the one statement
//! that changes the events: a CTE locks the rows and reads their steps before the
//! change (`FOR UPDATE`, which at READ COMMITTED returns a row's newest version), the
//! change clears the columns ([`CLEAR_STEPS`]), and one insert writes the moved steps
//! and then each event's own step ([`moved_then`]).

/// The columns a locking CTE reads for [`moved_then`].
pub(super) const OLD_STEP_COLS: &str =
    "id, claimed_at, claimed_by, attempts, max_attempts, completed_at";

/// The assignments that clear a row's claim and ack steps.
pub(super) const CLEAR_STEPS: &str = "claimed_at = NULL, completed_at = NULL";

/// An `INSERT INTO event_history` of the steps `old` held in its rows (`old`: a CTE
/// with [`OLD_STEP_COLS`] of the changed events, read before the change), then of
/// `own` (a `SELECT event_id, at, action, actor, detail`: each event's step), in that
/// order: the identity column numbers the rows as the sorted select hands them over,
/// so an event's moved claim, its ack and its own step keep their order.
pub(super) fn moved_then(old: &str, own: &str) -> String {
    format!(
        "INSERT INTO event_history (event_id, at, action, actor, detail) \
         SELECT event_id, at, action, actor, detail FROM ( \
           SELECT id AS event_id, claimed_at AS at, 'claimed' AS action, claimed_by AS actor, \
             {CLAIM_DETAIL_SQL} AS detail, 1 AS k FROM {old} WHERE claimed_at IS NOT NULL \
           UNION ALL SELECT id, completed_at, 'acked', claimed_by, NULL, 2 FROM {old} \
             WHERE completed_at IS NOT NULL \
           UNION ALL SELECT event_id, at, action, actor, detail, 3 FROM ({own}) AS own \
         ) AS s ORDER BY k"
    )
}

/// `engine::timeline::claim_detail` in SQL.
const CLAIM_DETAIL_SQL: &str = "'attempt ' || attempts || ' of ' || max_attempts";
