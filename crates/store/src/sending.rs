//! The store traits of idempotency keys (I8), sends and rooms. Both are written once
//! in the engine (`engine/idempotency.rs`, `engine/send.rs`) for every backend.

use super::*;
use async_trait::async_trait;

/// Idempotency keys (I8): recorded as in flight before the work runs, completed
/// with the response in the work's own transaction.
#[async_trait]
pub trait IdemStore: Send + Sync {
    async fn idem_begin(
        &self,
        key: &IdemKey,
        now: Millis,
        lock_ms: Millis,
        ttl_ms: Millis,
    ) -> StoreResult<IdemBegin>;
    /// Forgets an in-flight key whose request failed transiently, so a retry can run.
    /// Only while `key.owner` still holds it: a key taken over by another instance
    /// after its lock ran out is not this request's to forget.
    async fn idem_abort(&self, key: &IdemKey) -> StoreResult<()>;
    /// At start: forgets in-flight keys left by a process that died mid-request. Only
    /// for a backend that one process owns (SQLite); a shared backend relies on the
    /// in-flight lock expiring instead.
    async fn idem_recover(&self) -> StoreResult<u64>;
    /// Stores a final (error) response for the key, replayed on retries.
    async fn idem_complete(&self, key: &IdemKey, response: &StoredResponse) -> StoreResult<()>;
}

/// Business writes that fan out into inboxes (I1), and the rooms they go through.
#[async_trait]
pub trait SendStore: Send + Sync {
    async fn send_direct(
        &self,
        tenant: TenantId,
        to: AgentId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<SendReceipt>>;
    async fn send_room(
        &self,
        tenant: TenantId,
        room: RoomId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<RoomReceipt>>;

    async fn create_room(&self, tenant: TenantId, name: &str, now: Millis) -> StoreResult<Room>;
    /// A room of `tenant` by id or by name, with its members.
    async fn room(&self, tenant: TenantId, key: &str) -> StoreResult<Room>;
    /// Up to `limit` messages of a room's log with `room_seq > after`, oldest first.
    async fn room_log(
        &self,
        room: RoomId,
        after: u64,
        limit: u32,
    ) -> StoreResult<Vec<switchboard_proto::RoomMessage>>;
    async fn set_member(
        &self,
        tenant: TenantId,
        room: RoomId,
        agent: AgentId,
        member: bool,
        now: Millis,
    ) -> StoreResult<Room>;
}
