//! Business writes that fan out into inboxes in the same transaction (I1): direct
//! messages and rooms. Both sends require an Idempotency-Key (I8).

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_WRITE, SCOPE_SEND};
use super::extract::{Json, Path, Query, RawJson, parse_json};
use super::idempotency;
use super::limits::*;
use crate::clock::from_timestamp;
use crate::error::{ApiError, ApiResult};
use crate::store::{NewMessage, StoreError};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use switchboard_proto::*;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_direct))
        .routes(routes!(create_room))
        .routes(routes!(get_room))
        .routes(routes!(add_member, remove_member))
        .routes(routes!(send_room, room_messages))
}

/// Validates a message against the limits and the clock.
fn validate(msg: SendMessage, now: i64) -> ApiResult<NewMessage> {
    let priority = bounded("priority", msg.priority, 0, -MAX_PRIORITY, MAX_PRIORITY)?;
    let max_attempts = bounded(
        "max_attempts",
        msg.max_attempts,
        DEFAULT_ATTEMPTS,
        1,
        MAX_ATTEMPTS,
    )?;
    if msg
        .correlation_id
        .as_ref()
        .is_some_and(|c| c.len() > MAX_CORRELATION_BYTES)
    {
        return Err(ApiError::unprocessable(format!(
            "correlation_id must be at most {MAX_CORRELATION_BYTES} bytes"
        )));
    }
    let available_at = msg.available_at.map_or(now, from_timestamp).max(now);
    let expires_at = msg.expires_at.map(from_timestamp);
    if let Some(exp) = expires_at
        && exp <= available_at
    {
        return Err(ApiError::unprocessable(
            "expires_at must be later than now and than available_at; send a future time or omit it",
        ));
    }
    Ok(NewMessage {
        payload: msg.payload.to_string(),
        correlation_id: msg.correlation_id,
        priority,
        available_at,
        expires_at,
        max_attempts,
    })
}

/// The shared shape of both sends: scope check, body parsed and validated before
/// the key is recorded, then `work` runs at most once per Idempotency-Key (I8) with
/// the validated message and the sender's identity.
async fn send_once<T, F, Fut>(
    state: AppState,
    principal: Principal,
    headers: HeaderMap,
    path: String,
    body: axum::body::Bytes,
    policy: idempotency::Policy,
    work: F,
) -> ApiResult<Response>
where
    T: serde::Serialize,
    F: FnOnce(AppState, Principal, NewMessage, crate::store::Actor, crate::store::IdemKey) -> Fut,
    Fut: std::future::Future<Output = ApiResult<T>>,
{
    principal.require(SCOPE_SEND)?;
    let msg = validate(parse_json::<SendMessage>(&body)?, state.now())?;
    let (st, me) = (state.clone(), principal.clone());
    idempotency::run(
        &state,
        &principal,
        &headers,
        &path,
        &body,
        policy,
        |key| async move {
            let from = me.actor();
            work(st, me, msg, from, key).await
        },
    )
    .await
}

/// Send a message into one agent's inbox. The receipt names its sequence number.
#[utoipa::path(post, path = "/api/v1/agents/{agent}/messages", tag = "messages",
    params(("agent" = String, Path, description = "Recipient agent id or name"),
           ("Idempotency-Key" = String, Header, description = "Required; reuse it on retries")),
    request_body = SendMessage,
    responses((status = 201, body = SendReceipt, description = "Sent (or replayed: header Idempotent-Replayed: true)"),
              (status = 400, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem),
              (status = 413, body = Problem), (status = 422, body = Problem)))]
async fn send_direct(
    State(state): State<AppState>,
    principal: Principal,
    Path(agent): Path<String>,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> ApiResult<Response> {
    let path = format!("/api/v1/agents/{agent}/messages");
    send_once(
        state,
        principal,
        headers,
        path,
        body,
        idempotency::REPLAY_AS_STORED,
        |st, me, msg, from, key| async move {
            let to = super::inbox::load_agent(&st, me.tenant_id, &agent).await?;
            let done = st
                .store
                .send_direct(me.tenant_id, to.id, &from, &msg, Some(&key), st.now())
                .await?;
            Ok(done.value)
        },
    )
    .await
}

/// Create a room (operators).
#[utoipa::path(post, path = "/api/v1/rooms", tag = "messages", request_body = CreateRoom,
    responses((status = 201, body = Room), (status = 409, body = Problem), (status = 422, body = Problem)))]
async fn create_room(
    State(state): State<AppState>,
    principal: Principal,
    Json(req): Json<CreateRoom>,
) -> ApiResult<(StatusCode, axum::Json<Room>)> {
    principal.require(SCOPE_OPS_WRITE)?;
    name("name", &req.name)?;
    let room = state
        .store
        .create_room(principal.tenant_id, &req.name, state.now())
        .await?;
    Ok((StatusCode::CREATED, axum::Json(room)))
}

async fn load_room(state: &AppState, principal: &Principal, key: &str) -> ApiResult<Room> {
    state
        .store
        .room(principal.tenant_id, key)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::not_found(format_args!("room {key:?}")),
            e => e.into(),
        })
}

/// The room `key` names, if `principal` may see it: an operator any room of its
/// tenant, an agent only a room it is a member of (to others it does not exist).
async fn visible_room(state: &AppState, principal: &Principal, key: &str) -> ApiResult<Room> {
    let room = load_room(state, principal, key).await?;
    if let Some(me) = principal.agent_id
        && !room.members.iter().any(|m| m.agent_id == me)
    {
        return Err(ApiError::not_found(format_args!("room {:?}", room.name)));
    }
    Ok(room)
}

/// A room and its members.
#[utoipa::path(get, path = "/api/v1/rooms/{room}", tag = "messages",
    params(("room" = String, Path, description = "Room id or name")),
    responses((status = 200, body = Room), (status = 404, body = Problem)))]
async fn get_room(
    State(state): State<AppState>,
    principal: Principal,
    Path(room): Path<String>,
) -> ApiResult<axum::Json<Room>> {
    Ok(axum::Json(visible_room(&state, &principal, &room).await?))
}

async fn membership(
    state: AppState,
    principal: Principal,
    room: String,
    agent: String,
    member: bool,
) -> ApiResult<axum::Json<Room>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let r = load_room(&state, &principal, &room).await?;
    let a = super::inbox::load_agent(&state, principal.tenant_id, &agent).await?;
    let room = state
        .store
        .set_member(principal.tenant_id, r.room_id, a.id, member, state.now())
        .await?;
    Ok(axum::Json(room))
}

/// Add an agent to a room (operators). Idempotent.
#[utoipa::path(put, path = "/api/v1/rooms/{room}/members/{agent}", tag = "messages",
    params(("room" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = Room), (status = 404, body = Problem)))]
async fn add_member(
    State(state): State<AppState>,
    principal: Principal,
    Path((room, agent)): Path<(String, String)>,
) -> ApiResult<axum::Json<Room>> {
    membership(state, principal, room, agent, true).await
}

/// Remove an agent from a room (operators). Idempotent.
#[utoipa::path(delete, path = "/api/v1/rooms/{room}/members/{agent}", tag = "messages",
    params(("room" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = Room), (status = 404, body = Problem)))]
async fn remove_member(
    State(state): State<AppState>,
    principal: Principal,
    Path((room, agent)): Path<(String, String)>,
) -> ApiResult<axum::Json<Room>> {
    membership(state, principal, room, agent, false).await
}

/// Read a room's log after a cursor, oldest first: members and operators. The log
/// is the room's own record (every message once, with its sender), apart from the
/// inbox event each member got.
#[utoipa::path(get, path = "/api/v1/rooms/{room}/messages", tag = "messages",
    params(("room" = String, Path, description = "Room id or name"), InboxQuery),
    responses((status = 200, body = RoomPage), (status = 404, body = Problem)))]
async fn room_messages(
    State(state): State<AppState>,
    principal: Principal,
    Path(room): Path<String>,
    Query(q): Query<InboxQuery>,
) -> ApiResult<axum::Json<RoomPage>> {
    let room = visible_room(&state, &principal, &room).await?;
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    let after = q.after_cursor.unwrap_or(0);
    let mut messages = state.store.room_log(room.room_id, after, limit + 1).await?;
    let has_more = messages.len() > limit as usize;
    messages.truncate(limit as usize);
    let next_cursor = messages.last().map_or(after, |m| m.room_seq);
    Ok(axum::Json(RoomPage {
        room_id: room.room_id,
        messages,
        next_cursor,
        has_more,
    }))
}

/// Append to a room's log and deliver one inbox event to every member but the sender,
/// all in one transaction.
#[utoipa::path(post, path = "/api/v1/rooms/{room}/messages", tag = "messages",
    params(("room" = String, Path, description = "Room id or name"),
           ("Idempotency-Key" = String, Header, description = "Required; reuse it on retries")),
    request_body = SendMessage,
    responses((status = 201, body = RoomReceipt), (status = 403, body = Problem), (status = 404, body = Problem)))]
async fn send_room(
    State(state): State<AppState>,
    principal: Principal,
    Path(room): Path<String>,
    headers: HeaderMap,
    RawJson(body): RawJson,
) -> ApiResult<Response> {
    let path = format!("/api/v1/rooms/{room}/messages");
    // To an agent that is no member the room does not exist, for a send as for a
    // read (no existence oracle); checked again in the send's transaction.
    visible_room(&state, &principal, &room).await?;
    send_once(
        state,
        principal,
        headers,
        path,
        body,
        idempotency::ROOM_SEND,
        |st, me, msg, from, key| async move {
            let r = visible_room(&st, &me, &room).await?;
            let done = st
                .store
                .send_room(me.tenant_id, r.room_id, &from, &msg, Some(&key), st.now())
                .await
                .map_err(|e| match e {
                    StoreError::NotFound => ApiError::not_found(format_args!("room {room:?}")),
                    e => e.into(),
                })?;
            Ok(done.value)
        },
    )
    .await
}
