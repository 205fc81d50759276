//! Sends and rooms, once for every backend: business writes that fan out into
//! inboxes, each one transaction with its idempotency key's response (I1, I8); the
//! wake-ups are returned to be sent after the commit.
//!
//! Lock order of a room send: the room's row first (`next_room_seq`). It orders the
//! room's messages, and holding it keeps the member list fixed for this send
//! (`set_member` locks it too). Then the members' agent rows, in agent-id order, as
//! each event takes its recipient's next sequence number (I2), so two room sends
//! lock shared members in the same order. On SQLite the single writer gives all of
//! this at once.

use super::area::store_area;
use super::events::{Envelope, EventStatements, deliver, deliver_member};
use super::idempotency::{self, IdemStatements};
use crate::clock::{Millis, to_timestamp};
use crate::rows::room_sender;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::Delivery;

/// The statements of sends and rooms (`store/statements/send.rs`), each in the
/// caller's transaction unless it says otherwise.
#[async_trait]
pub(crate) trait SendStatements: EventStatements + IdemStatements {
    /// Increments the room's `head_seq` (locking its row) and returns the new value;
    /// `RowNotFound` when the room is not in `tenant`.
    async fn next_room_seq(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        room: RoomId,
    ) -> StoreResult<u64>;
    /// The room's members, in agent-id order.
    async fn room_members(&self, tx: &mut Self::Tx, room: RoomId) -> StoreResult<Vec<AgentId>>;
    /// Appends a message to the room's own log.
    async fn insert_room_message(
        &self,
        tx: &mut Self::Tx,
        room: RoomId,
        seq: u64,
        sender: Option<AgentId>,
        msg: &NewMessage,
        now: Millis,
    ) -> StoreResult<()>;
    /// Inserts a room; `false` when the tenant has a room of that name.
    async fn insert_room(
        &self,
        tx: &mut Self::Tx,
        id: RoomId,
        tenant: TenantId,
        name: &str,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Whether the room is `tenant`'s, and if so its row locked until the
    /// transaction ends.
    async fn lock_room(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        room: RoomId,
    ) -> StoreResult<bool>;
    /// Whether the agent is `tenant`'s.
    async fn tenant_has_agent(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<bool>;
    /// Makes the agent a member (nothing if it is one).
    async fn add_member(
        &self,
        tx: &mut Self::Tx,
        room: RoomId,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<()>;
    async fn remove_member(
        &self,
        tx: &mut Self::Tx,
        room: RoomId,
        agent: AgentId,
    ) -> StoreResult<()>;
    /// A room of `tenant` by id or by name (`NotFound`), its members by name: in
    /// `tx`, or without one on the read pool.
    async fn load_room(
        &self,
        tx: Option<&mut Self::Tx>,
        tenant: TenantId,
        key: &str,
    ) -> StoreResult<Room>;
    async fn room_log(
        &self,
        room: RoomId,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::RoomMessage>>;
}

fn wakes_of(tenant: TenantId, deliveries: &[Delivery]) -> Vec<Wake> {
    deliveries
        .iter()
        .map(|d| Wake {
            tenant_id: tenant,
            agent_id: d.agent_id,
            cursor_hint: d.seq,
        })
        .collect()
}

// Every backend with the send statements has sends and rooms.
store_area! {
    /// Business writes that fan out into inboxes (I1), and the rooms they go through.
    pub trait SendStore for Engine<D: SendStatements> {
        async fn send_direct(
            &self,
            tenant: TenantId,
            to: AgentId,
            from: &Actor,
            msg: &NewMessage,
            idem: Option<&IdemKey>,
            now: Millis,
        ) -> StoreResult<Committed<SendReceipt>> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                let envelope = Envelope {
                    tenant,
                    from,
                    room: None,
                    msg,
                    now,
                };
                let delivered = deliver(d, &mut tx, to, &envelope).await?;
                let receipt = SendReceipt {
                    event_id: delivered.event_id,
                    agent_id: delivered.agent_id,
                    seq: delivered.seq,
                };
                idempotency::finish(d, &mut tx, idem, 201, &receipt).await?;
                d.hooks().before_send_commit().await?;
                let wakes = wakes_of(tenant, &[delivered]);
                d.commit(tx, &wakes).await?;
                Ok(Committed {
                    value: receipt,
                    wakes,
                })
            })
            .await
        }

        async fn send_room(
            &self,
            tenant: TenantId,
            room: RoomId,
            from: &Actor,
            msg: &NewMessage,
            idem: Option<&IdemKey>,
            now: Millis,
        ) -> StoreResult<Committed<RoomReceipt>> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                let room_seq = d.next_room_seq(&mut tx, tenant, room).await?;
                let members = d.room_members(&mut tx, room).await?;
                let sender = room_sender(from, &members)?;
                d.insert_room_message(&mut tx, room, room_seq, sender, msg, now)
                    .await?;
                let mut deliveries = Vec::with_capacity(members.len());
                let envelope = Envelope {
                    tenant,
                    from,
                    room: Some((room, room_seq)),
                    msg,
                    now,
                };
                for member in members.into_iter().filter(|m| Some(*m) != sender) {
                    deliveries.extend(deliver_member(d, &mut tx, member, &envelope).await?);
                }
                let receipt = RoomReceipt {
                    room_id: room,
                    room_seq,
                    deliveries,
                };
                idempotency::finish(d, &mut tx, idem, 201, &receipt).await?;
                d.hooks().before_send_commit().await?;
                let wakes = wakes_of(tenant, &receipt.deliveries);
                d.commit(tx, &wakes).await?;
                Ok(Committed {
                    value: receipt,
                    wakes,
                })
            })
            .await
        }

        async fn create_room(
            &self,
            tenant: TenantId,
            name: &str,
            now: Millis,
        ) -> StoreResult<Room> {
            let d = &self.0;
            d.retrying(|| async {
                let id = RoomId::new();
                let mut tx = d.begin_write().await?;
                if !d.insert_room(&mut tx, id, tenant, name, now).await? {
                    return Err(StoreError::Conflict(format!(
                        "a room named {name:?} already exists in this tenant; pick another name"
                    )));
                }
                d.commit(tx, &[]).await?;
                Ok(Room {
                    room_id: id,
                    name: name.to_owned(),
                    head_seq: 0,
                    members: Vec::new(),
                    created_at: to_timestamp(now),
                })
            })
            .await
        }

        /// A room of `tenant` by id or by name, with its members.
        async fn room(&self, tenant: TenantId, key: &str) -> StoreResult<Room> {
            self.0.load_room(None, tenant, key).await
        }

        /// Up to `limit` messages of a room's log with `room_seq > after`, oldest first.
        async fn room_log(
            &self,
            room: RoomId,
            after: u64,
            limit: u32,
        ) -> StoreResult<Vec<switchboard_proto::RoomMessage>> {
            SendStatements::room_log(&self.0, room, after, limit).await
        }

        async fn set_member(
            &self,
            tenant: TenantId,
            room: RoomId,
            agent: AgentId,
            member: bool,
            now: Millis,
        ) -> StoreResult<Room> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                // Both must belong to the tenant (I9). The room's row lock orders this change
                // against room sends.
                if !d.lock_room(&mut tx, tenant, room).await?
                    || !d.tenant_has_agent(&mut tx, tenant, agent).await?
                {
                    return Err(StoreError::NotFound);
                }
                if member {
                    d.add_member(&mut tx, room, agent, now).await?;
                } else {
                    d.remove_member(&mut tx, room, agent).await?;
                }
                let room = d.load_room(Some(&mut tx), tenant, &room.to_string()).await;
                d.commit(tx, &[]).await?;
                room
            })
            .await
        }
    }
}
