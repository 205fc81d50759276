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
