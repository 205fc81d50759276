//! The read-only tools: `read_room` and `look_at_inbox`. What other agents wrote
//! comes back fenced and labelled (see `text`).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, in_range};
use crate::mcp::Session;
use crate::mcp::text::{self, ToolError};

/// Arguments of `read_room`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadRoomArgs {
    /// The room's name (or id); this agent must be a member.
    room: String,
    /// Read messages after this position in the room's log (default 0: from the
    /// start). Pass the previous answer's next_cursor to read on.
    #[serde(default)]
    after_cursor: Option<u64>,
    /// At most this many messages, 1..=100 (default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

/// Arguments of `look_at_inbox`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LookAtInboxArgs {
    /// Show events after this sequence number (default: from the oldest open one,
    /// pending, claimed or quarantined; 0 shows the whole retained history). Pass the
    /// previous answer's next_cursor to read on.
    #[serde(default)]
    after_cursor: Option<u64>,
    /// At most this many events, 1..=100 (default 20).
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    limit: Option<u32>,
}

pub(super) async fn read_room(session: &Session, args: Result<ReadRoomArgs, ToolError>) -> Answer {
    let args = args?;
    let limit = in_range("limit", args.limit, 1, 100)?.unwrap_or(20);
    let room = args.room.trim();
    let page = session
        .client
        .room_messages(room, args.after_cursor.unwrap_or(0), Some(limit))
        .await?;
    let nonce = text::nonce();
    let mut blocks = Vec::new();
    let mut messages = Vec::new();
    for m in &page.messages {
        let from = match &m.sender {
            Some(member) => format!("agent {:?}", member.name),
            None => "an operator".to_owned(),
        };
        blocks.push(text::fenced(
            &nonce,
            &from,
            &format!("room {room:?}, message {}", m.room_seq),
            &m.payload,
        ));
        messages.push(json!({
            "room_seq": m.room_seq,
            "sender": from,
            "correlation_id": m.correlation_id,
            "created_at": m.created_at.to_string(),
            "content_from_another_agent": m.payload,
        }));
    }
    let summary = format!(
        "{} message(s) in room {room:?}; next_cursor {}{}.\n\n{}",
        page.messages.len(),
        page.next_cursor,
        if page.has_more {
            " (more after it)"
        } else {
            ""
        },
        blocks.join("\n\n")
    );
    Ok(text::answer(
        summary.trim_end(),
        json!({"messages": messages, "next_cursor": page.next_cursor, "has_more": page.has_more}),
    ))
}

pub(super) async fn look_at_inbox(
    session: &Session,
    args: Result<LookAtInboxArgs, ToolError>,
) -> Answer {
    let args = args?;
    let limit = in_range("limit", args.limit, 1, 100)?.unwrap_or(20);
    let snapshot = session.client.snapshot(&session.agent).await?;
    let after = args
        .after_cursor
        .unwrap_or(snapshot.resume_cursor)
        .max(snapshot.oldest_cursor);
    let page = session
        .client
        .poll(&session.agent, after, Some(limit))
        .await?;
    let nonce = text::nonce();
    let mut blocks = Vec::new();
    let mut events = Vec::new();
    for event in &page.events {
        let from = text::sender_name(&event.sender);
        let status = serde_json::to_value(event.status).unwrap_or(Value::Null);
        if let Some(payload) = &event.payload {
            blocks.push(text::fenced(
                &nonce,
                &from,
                &format!("event {}, seq {}, {status}", event.event_id, event.seq),
                payload,
            ));
        }
        events.push(json!({
            "event_id": event.event_id,
            "seq": event.seq,
            "status": status,
            "sender": from,
            "priority": event.priority,
            "correlation_id": event.correlation_id,
            "content_from_another_agent": event.payload,
        }));
    }
    let counts = &snapshot.counts;
    let summary = format!(
        "Inbox of {}: {} pending, {} claimed, {} quarantined. Showing {} event(s) after seq \
         {after}; next_cursor {}.\n\n{}",
        session.agent,
        counts.pending,
        counts.claimed,
        counts.quarantined,
        page.events.len(),
        page.next_cursor,
        blocks.join("\n\n")
    );
    Ok(text::answer(
        summary.trim_end(),
        json!({
            "counts": counts,
            "events": events,
            "next_cursor": page.next_cursor,
            "has_more": page.has_more,
        }),
    ))
}
