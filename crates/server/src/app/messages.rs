//! Messages and rooms as use cases: a direct send and a room send fan out into
//! inboxes in the transaction of the send (I1), under the request's idempotency key
//! (I8); rooms are made, read and joined here.

use super::{AppState, or_not_found};
use crate::access::Principal;
use crate::error::{ApiError, ApiResult};
use crate::store::IdemKey;
use switchboard_proto::*;

pub use crate::store::NewMessage;

/// Sends `msg` from `principal` into the inbox of the agent named `to`.
pub async fn send_direct(
    state: &AppState,
    principal: &Principal,
    to: &str,
    msg: &NewMessage,
    key: &IdemKey,
) -> ApiResult<SendReceipt> {
    let to = super::inbox::agent(state, principal.tenant_id, to).await?;
    let done = state
        .store
        .send_direct(
            principal.tenant_id,
            to.id,
            &principal.actor(),
            msg,
            Some(key),
            state.now(),
        )
        .await?;
    Ok(done.value)
}

/// Sends `msg` from `principal` to every member of the room named `room` but the
/// sender: its log and one inbox event each, in one transaction.
pub async fn send_room(
    state: &AppState,
    principal: &Principal,
    room: &str,
    msg: &NewMessage,
    key: &IdemKey,
) -> ApiResult<RoomReceipt> {
    let r = visible_room(state, principal, room).await?;
    let done = state
        .store
        .send_room(
            principal.tenant_id,
            r.room_id,
            &principal.actor(),
            msg,
            Some(key),
            state.now(),
        )
        .await;
    Ok(or_not_found(done, format_args!("room {room:?}"))?.value)
}

/// Makes a room named `name`.
pub async fn create_room(state: &AppState, principal: &Principal, name: &str) -> ApiResult<Room> {
    Ok(state
        .store
        .create_room(principal.tenant_id, name, state.now())
        .await?)
}

async fn room(state: &AppState, principal: &Principal, key: &str) -> ApiResult<Room> {
    or_not_found(
        state.store.room(principal.tenant_id, key).await,
        format_args!("room {key:?}"),
    )
}

/// The room `key` names, if `principal` may see it: an operator any room of its
/// tenant, an agent only a room it is a member of (to others it does not exist).
pub async fn visible_room(state: &AppState, principal: &Principal, key: &str) -> ApiResult<Room> {
    let room = room(state, principal, key).await?;
    if let Some(me) = principal.agent_id
        && !room.members.iter().any(|m| m.agent_id == me)
    {
        return Err(ApiError::not_found(format_args!("room {:?}", room.name)));
    }
    Ok(room)
}

/// Adds the agent named `agent` to the room named `room` (`member`), or removes it.
pub async fn set_member(
    state: &AppState,
    principal: &Principal,
    room: &str,
    agent: &str,
    member: bool,
) -> ApiResult<Room> {
    let r = self::room(state, principal, room).await?;
    let a = super::inbox::agent(state, principal.tenant_id, agent).await?;
    Ok(state
        .store
        .set_member(principal.tenant_id, r.room_id, a.id, member, state.now())
        .await?)
}

/// Up to `limit` messages of `room`'s log after `after`, and whether more follow.
pub async fn room_log(
    state: &AppState,
    room: &Room,
    after: u64,
    limit: u32,
) -> ApiResult<RoomPage> {
    let mut messages = state.store.room_log(room.room_id, after, limit + 1).await?;
    let has_more = messages.len() > limit as usize;
    messages.truncate(limit as usize);
    let next_cursor = messages.last().map_or(after, |m| m.room_seq);
    Ok(RoomPage {
        room_id: room.room_id,
        messages,
        next_cursor,
        has_more,
    })
}
