//! The sends: `send_message` and `post_to_room`, through the profile's durable
//! outbox and the privacy gate, then a bounded wait for the delivery task.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_sdk::outbox::EntryState;
use switchboard_sdk::proto::SendMessage;
use switchboard_sdk::{OutboxError, Target};

use super::{Answer, in_range};
use crate::mcp::Session;
use crate::mcp::text::{self, LOCAL_STATE, PAYLOAD_REFUSED, ToolError};

/// Arguments of `send_message`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SendMessageArgs {
    /// The recipient agent's name (or id).
    to: String,
    /// The message: a JSON object, for example {"subject": "...", "text": "..."}.
    payload: Value,
    /// The message type the privacy gate checks the payload against (default
    /// "message").
    #[serde(default, rename = "type")]
    message_type: Option<String>,
    /// Ties related messages together (for example the event id of the request this
    /// answers).
    #[serde(default)]
    correlation_id: Option<String>,
    /// -1000..=1000; higher is claimed first (default 0).
    #[serde(default)]
    #[schemars(range(min = -1000, max = 1000))]
    priority: Option<i32>,
}

/// Arguments of `post_to_room`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PostToRoomArgs {
    /// The room's name (or id). Every member gets the message in its inbox.
    room: String,
    /// The message: a JSON object, for example {"subject": "...", "text": "..."}.
    payload: Value,
    /// The message type the privacy gate checks the payload against (default
    /// "message").
    #[serde(default, rename = "type")]
    message_type: Option<String>,
    /// Ties related messages together (for example the event id of the request this
    /// answers).
    #[serde(default)]
    correlation_id: Option<String>,
    /// -1000..=1000; higher is claimed first (default 0).
    #[serde(default)]
    #[schemars(range(min = -1000, max = 1000))]
    priority: Option<i32>,
}

/// The envelope every send shares.
pub(super) fn message(
    payload: Value,
    correlation_id: Option<String>,
    priority: Option<i32>,
) -> Result<SendMessage, ToolError> {
    Ok(SendMessage {
        payload,
        correlation_id,
        priority: in_range("priority", priority, -1000, 1000)?,
        ..SendMessage::default()
    })
}

pub(super) async fn send_message(
    session: &Session,
    args: Result<SendMessageArgs, ToolError>,
) -> Answer {
    let args = args?;
    let message = message(args.payload, args.correlation_id, args.priority)?;
    let to = args.to.trim().to_owned();
    enqueue(
        session,
        Target::Agent(to.clone()),
        args.message_type,
        message,
        &format!("agent {to:?}"),
    )
    .await
}

pub(super) async fn post_to_room(
    session: &Session,
    args: Result<PostToRoomArgs, ToolError>,
) -> Answer {
    let args = args?;
    let message = message(args.payload, args.correlation_id, args.priority)?;
    let room = args.room.trim().to_owned();
    enqueue(
        session,
        Target::Room(room.clone()),
        args.message_type,
        message,
        &format!("room {room:?}"),
    )
    .await
}

/// Into the outbox through the privacy gate, then a bounded wait for delivery.
pub(super) async fn enqueue(
    session: &Session,
    target: Target,
    message_type: Option<String>,
    message: SendMessage,
    to: &str,
) -> Answer {
    let message_type = message_type.unwrap_or_else(|| "message".to_owned());
    let enqueued = match session
        .outbox
        .try_enqueue(target, &message_type, message)
        .await
    {
        Ok(enqueued) => enqueued,
        Err(OutboxError::Blocked(blocked)) => {
            let reasons: Vec<String> = blocked.refusals.iter().map(|r| r.to_string()).collect();
            return Err(ToolError::new(
                PAYLOAD_REFUSED,
                format!(
                    "the privacy gate refused the payload as type {message_type:?} ({}); \
                     nothing was stored or sent: remove what it names and send again",
                    reasons.join("; ")
                ),
            ));
        }
        Err(e @ OutboxError::Full { .. }) => {
            return Err(ToolError::new(
                "outbox_full",
                format!("{e}; wait until the server is reachable and try again"),
            ));
        }
        Err(e) => return Err(ToolError::new(LOCAL_STATE, e.to_string())),
    };
    let entry = delivered(session, enqueued.id).await?;
    let stripped = &enqueued.stripped;
    let Some(entry) = entry else {
        return Ok(text::answer(
            format!(
                "Stored in the outbox for {to}; its entry has already left the local file, \
                 so its delivery cannot be checked here."
            ),
            json!({"state": "unknown", "outbox_id": enqueued.id}),
        ));
    };
    let data = json!({
        "state": entry.state,
        "outbox_id": entry.id,
        "receipt": entry.receipt,
        "stripped_fields": stripped,
    });
    let stripped_note = if stripped.is_empty() {
        String::new()
    } else {
        format!(
            " The privacy gate removed {} (not in the {message_type:?} schema): use the \
             fields the payload's description lists.",
            stripped.join(", ")
        )
    };
    match entry.state {
        EntryState::Sent => Ok(text::answer(format!("Sent to {to}.{stripped_note}"), data)),
        EntryState::Poison | EntryState::Expired => {
            let reason = entry.last_error.unwrap_or_default();
            let code = if reason.contains("not_found") {
                "not_found"
            } else {
                "send_refused"
            };
            Err(ToolError::new(
                code,
                format!("the server refused the message to {to}: {reason}"),
            ))
        }
        _ => Ok(text::answer(
            format!(
                "Queued for {to}: the server has not confirmed it yet ({}). It is stored \
                 durably and will be delivered by this session or the next one of this \
                 agent; do not send it again.{stripped_note}",
                entry.last_error.as_deref().unwrap_or("still sending")
            ),
            data,
        )),
    }
}

/// The entry once the session's delivery task has settled it, or as it is when
/// the send wait is over. The attempts run in that task, not here: a tool call that
/// gives up waiting never leaves an attempt half done.
pub(super) async fn delivered(
    session: &Session,
    id: i64,
) -> Result<Option<switchboard_sdk::outbox::Entry>, ToolError> {
    let deadline = tokio::time::Instant::now() + session.send_wait;
    let mut pause = std::time::Duration::from_millis(10);
    loop {
        let entry = session
            .outbox
            .entry(id)
            .await
            .map_err(|e| ToolError::new(LOCAL_STATE, e.to_string()))?;
        let settled = entry.as_ref().is_none_or(|e| e.state.is_terminal());
        if settled || tokio::time::Instant::now() >= deadline {
            return Ok(entry);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_millis(200));
    }
}
