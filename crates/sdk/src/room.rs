//! Rooms: append-only logs whose messages fan out into every member's inbox.
//!
//! `{room}` arguments take a room id or name, `{agent}` an agent id or name; anything
//! that implements `Display` works.

use std::fmt::Display;

use reqwest::Method;
use switchboard_proto::{CreateRoom, Room, RoomPage, RoomReceipt, SendMessage};

use crate::call::Call;
use crate::{Client, Error};

impl Client {
    /// `POST /rooms`: creates an empty room.
    ///
    /// Errors: `name_invalid`, `name_confusable`, `conflict` (the name is taken),
    /// `validation_failed`.
    pub async fn create_room(&self, room: &CreateRoom) -> Result<Room, Error> {
        let call = Call::new(Method::POST, self.api_url(&["rooms"])?).json(room)?;
        self.fetch(call).await
    }

    /// `GET /rooms/{room}`: the room, its head sequence and its members.
    ///
    /// Errors: `not_found`.
    pub async fn room(&self, room: impl Display) -> Result<Room, Error> {
        let room = room.to_string();
        self.fetch(Call::get(self.api_url(&["rooms", &room])?))
            .await
    }

    /// `GET /rooms/{room}/messages`: the room's log after `after_cursor`, oldest
    /// first (`limit` 1..=1000, default 100). Members and operators read it; to an
    /// agent outside the room it is `not_found`.
    pub async fn room_messages(
        &self,
        room: impl Display,
        after_cursor: u64,
        limit: Option<u32>,
    ) -> Result<RoomPage, Error> {
        let room = room.to_string();
        let mut call = Call::get(self.api_url(&["rooms", &room, "messages"])?)
            .query("after_cursor", &after_cursor.to_string());
        if let Some(limit) = limit {
            call = call.query("limit", &limit.to_string());
        }
        self.fetch(call).await
    }

    /// `PUT /rooms/{room}/members/{agent}`: adds a member (no-op when it already is
    /// one). It receives messages sent after this.
    ///
    /// Errors: `not_found` (room or agent).
    pub async fn add_member(&self, room: impl Display, agent: impl Display) -> Result<Room, Error> {
        self.member(Method::PUT, room, agent).await
    }

    /// `DELETE /rooms/{room}/members/{agent}`: removes a member. Events already in
    /// its inbox stay.
    ///
    /// Errors: `not_found` (room or agent).
    pub async fn remove_member(
        &self,
        room: impl Display,
        agent: impl Display,
    ) -> Result<Room, Error> {
        self.member(Method::DELETE, room, agent).await
    }

    async fn member(
        &self,
        method: Method,
        room: impl Display,
        agent: impl Display,
    ) -> Result<Room, Error> {
        let (room, agent) = (room.to_string(), agent.to_string());
        let url = self.api_url(&["rooms", &room, "members", &agent])?;
        self.fetch(Call::new(method, url)).await
    }

    /// `POST /rooms/{room}/messages`: appends a message to the room log and puts
    /// one event into each member's inbox, in one transaction.
    ///
    /// Errors as [`Client::send_message`] (`idempotency_key_reused`,
    /// `request_in_progress`, `not_found`, `validation_failed`,
    /// `payload_too_large`).
    pub async fn send_room_message(
        &self,
        room: impl Display,
        message: &SendMessage,
        idempotency_key: &str,
    ) -> Result<RoomReceipt, Error> {
        let room = room.to_string();
        let call = Call::new(Method::POST, self.api_url(&["rooms", &room, "messages"])?)
            .json(message)?
            .idempotency_key(idempotency_key)?;
        self.fetch(call).await
    }
}
