//! Inbox events as every write path makes them: the next number of the recipient's
//! sequence (I2) and the event row (which is its `created` step, `timeline.rs`), in
//! the caller's transaction (I1); and the history steps off the happy path.
//!
//! I2 on every backend: `next_seq` increments the agent row's `head_seq` in an
//! `UPDATE`, which takes that row's write lock until the transaction ends. A second
//! sender to the same agent (on any instance) waits for the first one's commit and
//! numbers after it, so sequence numbers are allocated in commit order. SQLite's
//! single writer serializes the transactions anyway.

use super::Driver;
use super::timeline::RowSteps;
use crate::clock::Millis;
use crate::{Actor, NewMessage, StoreResult};
use async_trait::async_trait;
use switchboard_proto::{AgentId, Delivery, EventId, RoomId, TenantId};

/// An event row to insert, with everything its statement binds.
pub(crate) struct NewEvent<'a> {
    pub(crate) id: EventId,
    pub(crate) tenant: TenantId,
    pub(crate) agent: AgentId,
    pub(crate) seq: i64,
    pub(crate) sender_agent_id: Option<AgentId>,
    pub(crate) sender_name: Option<String>,
    pub(crate) room_id: Option<RoomId>,
    pub(crate) room_seq: Option<i64>,
    pub(crate) msg: &'a NewMessage,
    pub(crate) now: Millis,
}

/// The statements every backend writes alike (`store/statements/events.rs`).
#[async_trait]
pub(crate) trait EventStatements: Driver {
    /// Increments `agent`'s `head_seq`, locking its row; false when the agent is not
    /// in `tenant`.
    async fn take_seq(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<bool>;
    /// `agent`'s `head_seq` as this transaction sees it.
    async fn head_seq(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<u64>;
    /// [`take_seq`](Self::take_seq) and [`head_seq`](Self::head_seq) in one statement
    /// (`UPDATE … RETURNING`: SQLite and PostgreSQL, not MySQL); `RowNotFound` when
    /// the agent is not in `tenant`.
    async fn take_seq_returning(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<u64>;
    async fn insert_event(&self, tx: &mut Self::Tx, e: &NewEvent<'_>) -> StoreResult<()>;
    /// Appends one row to an event's history. Off the happy path only, after
    /// [`move_steps`](Self::move_steps).
    async fn history(
        &self,
        tx: &mut Self::Tx,
        event_id: &str,
        at: Millis,
        action: &str,
        actor: &str,
        detail: Option<String>,
    ) -> StoreResult<()>;
    /// The steps the event's row holds (`timeline.rs`), its row locked until the
    /// transaction ends (no lock on SQLite, whose writer is alone); `None` when there
    /// is no such event.
    async fn row_steps(&self, tx: &mut Self::Tx, event_id: &str) -> StoreResult<Option<RowSteps>>;
    /// Clears the claim and ack steps the event's row holds (once they are rows).
    async fn clear_steps(&self, tx: &mut Self::Tx, event_id: &str) -> StoreResult<()>;

    /// Moves the claim and ack that the event's row holds into history rows of
    /// their own: what every step off the happy path does before it changes the event
    /// and writes its row (`timeline.rs`), so the row's steps stay the newest. Before
    /// the change, as a replay resets the attempts the claim's step names. PostgreSQL
    /// does the same inside each of its one-statement CTEs instead.
    async fn move_steps(&self, tx: &mut Self::Tx, event_id: &str) -> StoreResult<()> {
        let Some(steps) = self.row_steps(tx, event_id).await? else {
            return Ok(());
        };
        if !steps.holds_steps() {
            return Ok(());
        }
        for step in steps.moved_steps() {
            self.history(tx, event_id, step.at, step.action, &step.actor, step.detail)
                .await?;
        }
        self.clear_steps(tx, event_id).await
    }

    /// Takes the next number of `agent`'s sequence, locking its row until the
    /// transaction ends (I2); `NotFound` when the agent is not in `tenant`. One
    /// statement where the dialect has `UPDATE … RETURNING` ([`take_seq_returning`]),
    /// else an update and a read of the row it locked.
    ///
    /// [`take_seq_returning`]: EventStatements::take_seq_returning
    async fn next_seq(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<u64> {
        if Self::DIALECT.update_returning() {
            return self.take_seq_returning(tx, tenant, agent).await;
        }
        if !self.take_seq(tx, tenant, agent).await? {
            return Err(crate::StoreError::NotFound);
        }
        self.head_seq(tx, agent).await
    }
}

/// What a write path puts into each recipient's inbox: one message from one
/// sender, maybe through a room, at one time. A fan-out (a room's members, a
/// memory's subscribers) makes it once and delivers it to each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Envelope<'a> {
    pub(crate) tenant: TenantId,
    pub(crate) from: &'a Actor,
    /// The room and its `room_seq`, for a room's message.
    pub(crate) room: Option<(RoomId, u64)>,
    pub(crate) msg: &'a NewMessage,
    pub(crate) now: Millis,
}

/// [`deliver`] to one member of a fan-out (a room's members, a memory's
/// subscribers): `None` when the agent was deleted after the members were read
/// (its sequence no longer advances), so a deletion never fails the send.
pub(crate) async fn deliver_member<D: EventStatements>(
    d: &D,
    tx: &mut D::Tx,
    to: AgentId,
    envelope: &Envelope<'_>,
) -> StoreResult<Option<Delivery>> {
    match deliver(d, tx, to, envelope).await {
        Err(crate::StoreError::NotFound) => Ok(None),
        other => other.map(Some),
    }
}

/// Puts one event into `to`'s inbox, numbered next in its sequence (I2).
pub(crate) async fn deliver<D: EventStatements>(
    d: &D,
    tx: &mut D::Tx,
    to: AgentId,
    envelope: &Envelope<'_>,
) -> StoreResult<Delivery> {
    let Envelope {
        tenant,
        from,
        room,
        msg,
        now,
    } = *envelope;
    let seq = d.next_seq(tx, tenant, to).await?;
    let event_id = EventId::new();
    let (sender_agent_id, sender_name) = match from {
        Actor::Agent { id, name } => (Some(*id), Some(name.clone())),
        _ => (None, None),
    };
    let row = NewEvent {
        id: event_id,
        tenant,
        agent: to,
        seq: seq as i64,
        sender_agent_id,
        sender_name,
        room_id: room.map(|(r, _)| r),
        room_seq: room.map(|(_, s)| s as i64),
        msg,
        now,
    };
    d.insert_event(tx, &row).await?;
    Ok(Delivery {
        agent_id: to,
        event_id,
        seq,
    })
}
