//! Rooms: append-only logs with their own sequence, fanned out to members' inboxes.

use crate::{AgentId, EventId, RoomId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/rooms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateRoom {
    /// 1..=64 characters of `[A-Za-z0-9._-]`, unique per tenant.
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoomMember {
    pub agent_id: AgentId,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Room {
    pub room_id: RoomId,
    pub name: String,
    /// The room log's newest sequence number.
    pub head_seq: u64,
    pub members: Vec<RoomMember>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// One delivery made by a room send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Delivery {
    pub agent_id: AgentId,
    pub event_id: EventId,
    pub seq: u64,
}

/// The answer to `POST /rooms/{room}/messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoomReceipt {
    pub room_id: RoomId,
    pub room_seq: u64,
    pub deliveries: Vec<Delivery>,
}

/// One message of a room's log (`GET /api/v1/rooms/{room}/messages`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoomMessage {
    /// Its place in the room's log (1, 2, …): pass the last one as `after_cursor`.
    pub room_seq: u64,
    /// The sending agent; none when an operator sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender: Option<RoomMember>,
    /// Any JSON value, as sent.
    pub payload: serde_json::Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// A page of a room's log, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoomPage {
    pub room_id: RoomId,
    pub messages: Vec<RoomMessage>,
    /// Pass as `after_cursor` to read on. Equals the request's cursor when empty.
    pub next_cursor: u64,
    pub has_more: bool,
}
