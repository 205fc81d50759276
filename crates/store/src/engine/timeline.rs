//! An event's timeline: the happy path's steps are columns of its row, everything
//! else is an `event_history` row.
//!
//! A send, a claim and an ack are what nearly every event goes through; writing a
//! history row for each was two or three inserts per message on the hot path (and on
//! PostgreSQL the bulk of its index and WAL traffic per message). So the row keeps
//! them: `created` is `created_at` and the sender, the current claim `claimed_at`,
//! `claimed_by` and `attempts` of `max_attempts`, its ack `completed_at` (by the
//! claimer: only the inbox's agent claims and acks).
//!
//! The rule that keeps the timeline exact: every other step (a release, an expired
//! lease, a quarantine, expiry, an operator's replay, release or purge) first moves a
//! claim and an ack held in the columns into rows of their own ([`moved_steps`]),
//! then writes its row. The columns therefore only ever hold steps later than every
//! row, and the timeline is: `created`, the rows in id order, the claim, the ack.
//! A claim sets `claimed_at` only on a pending event, which holds no column step
//! (nothing reaches pending without a step that moved them), so it never
//! overwrites one; `claimed_by` stays after a move, naming the claimer of a later ack.

use crate::clock::{Millis, to_timestamp};
use crate::rows::{Cols, sender_from_row};
use crate::{Actor, StoreResult};
use switchboard_proto::{EventId, HistoryEntry, Sender};

/// The columns [`RowSteps::from_row`] reads.
pub(crate) const STEP_COLS: &str = "id, created_at, sender_agent_id, sender_name, claimed_at, \
     claimed_by, attempts, max_attempts, completed_at";

/// The detail of a `claimed` step. PostgreSQL's statements that move a claim into a
/// row write the same text in SQL (`CLAIM_DETAIL_SQL`); the driver suite compares them.
pub(crate) fn claim_detail(attempts: i64, max_attempts: i64) -> String {
    format!("attempt {attempts} of {max_attempts}")
}

/// One step, as a history row holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub at: Millis,
    pub action: &'static str,
    pub actor: String,
    pub detail: Option<String>,
}

impl Step {
    fn entry(self) -> HistoryEntry {
        HistoryEntry {
            action: self.action.to_owned(),
            actor: self.actor,
            detail: self.detail,
            at: to_timestamp(self.at),
        }
    }
}

/// The steps an event row holds.
#[derive(Debug, Clone)]
pub(crate) struct RowSteps {
    pub id: EventId,
    created: Step,
    claimed_at: Option<Millis>,
    claimed_by: Option<String>,
    attempts: i64,
    max_attempts: i64,
    completed_at: Option<Millis>,
}

impl RowSteps {
    /// From a row with [`STEP_COLS`].
    pub(crate) fn from_row(r: &impl Cols) -> StoreResult<Self> {
        // The actor the `created` row named: `Actor`'s text of the sender.
        let sender = match sender_from_row(r)? {
            Sender::Agent { agent_id, name } => Actor::Agent { id: agent_id, name },
            Sender::Operator => Actor::Operator,
        };
        Ok(Self {
            id: r.id("id")?,
            created: Step {
                at: r.int("created_at")?,
                action: "created",
                actor: sender.to_string(),
                detail: None,
            },
            claimed_at: r.opt_int("claimed_at")?,
            claimed_by: r.opt_text("claimed_by")?,
            attempts: r.int("attempts")?,
            max_attempts: r.int("max_attempts")?,
            completed_at: r.opt_int("completed_at")?,
        })
    }

    fn claimer(&self) -> String {
        self.claimed_by.clone().unwrap_or_default()
    }

    /// The claim and the ack held in the columns, oldest first: what a step off the
    /// happy path writes as rows before its own (and then clears).
    pub(crate) fn moved_steps(&self) -> Vec<Step> {
        let claim = self.claimed_at.map(|at| Step {
            at,
            action: "claimed",
            actor: self.claimer(),
            detail: Some(claim_detail(self.attempts, self.max_attempts)),
        });
        let ack = self.completed_at.map(|at| Step {
            at,
            action: "acked",
            actor: self.claimer(),
            detail: None,
        });
        claim.into_iter().chain(ack).collect()
    }

    /// Whether [`moved_steps`](Self::moved_steps) has anything to move.
    pub(crate) fn holds_steps(&self) -> bool {
        self.claimed_at.is_some() || self.completed_at.is_some()
    }

    /// The whole timeline: `created`, then `rows` (the event's history rows in id
    /// order), then the steps in the columns. A `created` row is skipped: nothing
    /// writes one any more, but on PostgreSQL and MariaDB / MySQL those of events
    /// sent before the upgrade go in a batched step after it (`store/migrate.rs`),
    /// and until it is done the row's own `created` says the same.
    pub(crate) fn timeline(&self, rows: Vec<HistoryEntry>) -> Vec<HistoryEntry> {
        let mut steps = Vec::with_capacity(rows.len() + 3);
        steps.push(self.created.clone().entry());
        steps.extend(rows.into_iter().filter(|r| r.action != "created"));
        steps.extend(self.moved_steps().into_iter().map(Step::entry));
        steps
    }
}

/// The timelines of several events from their row steps (in the order wanted) and
/// their history rows (`(event, row)` in id order), one event after another.
pub(crate) fn timelines(
    events: Vec<RowSteps>,
    rows: Vec<(EventId, HistoryEntry)>,
) -> Vec<(EventId, HistoryEntry)> {
    let mut by_event: std::collections::HashMap<EventId, Vec<HistoryEntry>> =
        std::collections::HashMap::new();
    for (event, row) in rows {
        by_event.entry(event).or_default().push(row);
    }
    events
        .into_iter()
        .flat_map(|e| {
            let rows = by_event.remove(&e.id).unwrap_or_default();
            let id = e.id;
            e.timeline(rows).into_iter().map(move |s| (id, s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(claimed: Option<Millis>, completed: Option<Millis>) -> RowSteps {
        RowSteps {
            id: EventId::new(),
            created: Step {
                at: 1,
                action: "created",
                actor: "operator".into(),
                detail: None,
            },
            claimed_at: claimed,
            claimed_by: Some("agent:a".into()),
            attempts: 2,
            max_attempts: 5,
            completed_at: completed,
        }
    }

    fn actions(t: &[HistoryEntry]) -> Vec<&str> {
        t.iter().map(|h| h.action.as_str()).collect()
    }

    #[test]
    fn the_columns_follow_the_rows() {
        let row = HistoryEntry {
            action: "released".into(),
            actor: "agent:a".into(),
            detail: None,
            at: to_timestamp(5),
        };
        let t = steps(Some(7), Some(9)).timeline(vec![row]);
        assert_eq!(actions(&t), ["created", "released", "claimed", "acked"]);
        assert_eq!(t[2].detail.as_deref(), Some("attempt 2 of 5"));
        assert_eq!((t[3].actor.as_str(), t[3].at), ("agent:a", to_timestamp(9)));
        assert_eq!(actions(&steps(None, None).timeline(vec![])), ["created"]);
    }

    /// A `created` row an unfinished upgrade step left is not a second `created`.
    #[test]
    fn a_created_row_left_by_the_upgrade_is_skipped() {
        let row = |action: &str, at| HistoryEntry {
            action: action.into(),
            actor: "operator".into(),
            detail: None,
            at: to_timestamp(at),
        };
        let t = steps(None, None).timeline(vec![row("created", 1), row("released", 5)]);
        assert_eq!(actions(&t), ["created", "released"]);
    }

    #[test]
    fn only_held_steps_move() {
        assert!(!steps(None, None).holds_steps());
        assert!(steps(None, None).moved_steps().is_empty());
        let moved = steps(Some(7), None).moved_steps();
        assert_eq!(moved.len(), 1);
        assert_eq!((moved[0].action, moved[0].at), ("claimed", 7));
    }

    #[test]
    fn timelines_keep_the_events_order() {
        let (a, b) = (steps(Some(2), None), steps(None, None));
        let row = |action: &str| HistoryEntry {
            action: action.into(),
            actor: "operator".into(),
            detail: None,
            at: to_timestamp(3),
        };
        let all = timelines(
            vec![a.clone(), b.clone()],
            vec![(b.id, row("purged")), (a.id, row("released"))],
        );
        let of = |id| {
            all.iter()
                .filter(|(e, _)| *e == id)
                .map(|(_, s)| s.action.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(of(a.id), ["created", "released", "claimed"]);
        assert_eq!(of(b.id), ["created", "purged"]);
        assert_eq!(all[0].0, a.id, "events in the order given");
    }
}
