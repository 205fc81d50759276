//! Business writes that fan out into inboxes in the same transaction (I1): direct
//! messages and rooms. Both sends require an Idempotency-Key (I8).

use super::AppState;
use super::auth::{Principal, SCOPE_OPS_WRITE, SCOPE_SEND};
use super::extract::{Json, Path, Query, RawJson, parse_json};
use super::idempotency;
use super::limits::*;
use crate::app::idempotency::IdemKey;
use crate::app::messages::{self as app, NewMessage};
use crate::clock::from_timestamp;
use crate::error::{ApiError, ApiResult};
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
/// the validated message.
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
    F: FnOnce(NewMessage, IdemKey) -> Fut,
    Fut: std::future::Future<Output = ApiResult<T>>,
{
    principal.refuse_read_only()?;
    principal.require(SCOPE_SEND)?;
    let msg = validate(parse_json::<SendMessage>(&body)?, state.now())?;
    idempotency::run(&state, &principal, &headers, &path, &body, policy, |key| {
        work(msg, key)
    })
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
    let (st, me) = (state.clone(), principal.clone());
    send_once(
        state,
        principal,
        headers,
        path,
        body,
        idempotency::REPLAY_AS_STORED,
        |msg, key| async move { app::send_direct(&st, &me, &agent, &msg, &key).await },
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
    let room = app::create_room(&state, &principal, &req.name).await?;
    Ok((StatusCode::CREATED, axum::Json(room)))
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
    Ok(axum::Json(
        app::visible_room(&state, &principal, &room).await?,
    ))
}

async fn membership(
    state: AppState,
    principal: Principal,
    room: String,
    agent: String,
    member: bool,
) -> ApiResult<axum::Json<Room>> {
    principal.require(SCOPE_OPS_WRITE)?;
    let room = app::set_member(&state, &principal, &room, &agent, member).await?;
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
    let room = app::visible_room(&state, &principal, &room).await?;
    let limit = bounded("limit", q.limit, DEFAULT_PAGE, 1, MAX_PAGE)?;
    let after = q.after_cursor.unwrap_or(0);
    Ok(axum::Json(
        app::room_log(&state, &room, after, limit).await?,
    ))
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
    app::visible_room(&state, &principal, &room).await?;
    let (st, me) = (state.clone(), principal.clone());
    send_once(
        state,
        principal,
        headers,
        path,
        body,
        idempotency::ROOM_SEND,
        |msg, key| async move { app::send_room(&st, &me, &room, &msg, &key).await },
    )
    .await
}
