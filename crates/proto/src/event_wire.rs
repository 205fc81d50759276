//! [`InboxEvent`] on the wire. Its sequence number is written under both names, `seq`
//! (ours) and `sequence_number` (the notifications seed's), so clients of either
//! read it; either is read, and when both come they must agree. Written by hand
//! rather than derived because serde writes one key per field.

use crate::{AgentId, EventId, EventStatus, InboxEvent, RoomId, Sender};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::OffsetDateTime;

#[derive(Serialize)]
struct Out<'a> {
    event_id: EventId,
    agent_id: AgentId,
    seq: u64,
    sequence_number: u64,
    sender: &'a Sender,
    #[serde(skip_serializing_if = "Option::is_none")]
    room_id: Option<RoomId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    room_seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    correlation_id: Option<&'a str>,
    priority: i32,
    status: EventStatus,
    payload: Option<&'a serde_json::Value>,
    attempts: u32,
    max_attempts: u32,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    available_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    expires_at: Option<OffsetDateTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
}

#[derive(Deserialize)]
struct In {
    event_id: EventId,
    agent_id: AgentId,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    sequence_number: Option<u64>,
    sender: Sender,
    #[serde(default)]
    room_id: Option<RoomId>,
    #[serde(default)]
    room_seq: Option<u64>,
    #[serde(default)]
    correlation_id: Option<String>,
    priority: i32,
    status: EventStatus,
    payload: Option<serde_json::Value>,
    attempts: u32,
    max_attempts: u32,
    #[serde(with = "time::serde::rfc3339")]
    created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    available_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    expires_at: Option<OffsetDateTime>,
    #[serde(default)]
    last_error: Option<String>,
}

impl Serialize for InboxEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Out {
            event_id: self.event_id,
            agent_id: self.agent_id,
            seq: self.seq,
            sequence_number: self.seq,
            sender: &self.sender,
            room_id: self.room_id,
            room_seq: self.room_seq,
            correlation_id: self.correlation_id.as_deref(),
            priority: self.priority,
            status: self.status,
            payload: self.payload.as_ref(),
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            created_at: self.created_at,
            available_at: self.available_at,
            expires_at: self.expires_at,
            last_error: self.last_error.as_deref(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for InboxEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = In::deserialize(deserializer)?;
        let seq = match (w.seq, w.sequence_number) {
            (Some(a), Some(b)) if a != b => {
                return Err(D::Error::custom(format!(
                    "seq ({a}) and sequence_number ({b}) name one number and must agree"
                )));
            }
            (Some(n), _) | (None, Some(n)) => n,
            (None, None) => return Err(D::Error::missing_field("sequence_number")),
        };
        Ok(InboxEvent {
            event_id: w.event_id,
            agent_id: w.agent_id,
            seq,
            sender: w.sender,
            room_id: w.room_id,
            room_seq: w.room_seq,
            correlation_id: w.correlation_id,
            priority: w.priority,
            status: w.status,
            payload: w.payload,
            attempts: w.attempts,
            max_attempts: w.max_attempts,
            created_at: w.created_at,
            available_at: w.available_at,
            expires_at: w.expires_at,
            last_error: w.last_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event() -> InboxEvent {
        InboxEvent {
            event_id: EventId::new(),
            agent_id: AgentId::new(),
            seq: 1041,
            sender: Sender::Operator,
            room_id: None,
            room_seq: None,
            correlation_id: Some("msg_99x".into()),
            priority: 0,
            status: EventStatus::Pending,
            payload: Some(json!({"type": "meeting_room_post"})),
            attempts: 0,
            max_attempts: 5,
            created_at: OffsetDateTime::UNIX_EPOCH,
            available_at: OffsetDateTime::UNIX_EPOCH,
            expires_at: None,
            last_error: None,
        }
    }

    #[test]
    fn both_names_are_written_and_either_is_read() {
        let e = event();
        let mut wire = serde_json::to_value(&e).unwrap();
        assert_eq!(
            (&wire["seq"], &wire["sequence_number"]),
            (&json!(1041), &json!(1041))
        );
        assert_eq!(
            serde_json::from_value::<InboxEvent>(wire.clone()).unwrap(),
            e
        );
        let only_seed = {
            let mut w = wire.clone();
            w.as_object_mut().unwrap().remove("seq");
            w
        };
        assert_eq!(serde_json::from_value::<InboxEvent>(only_seed).unwrap(), e);
        wire.as_object_mut().unwrap().remove("sequence_number");
        assert_eq!(
            serde_json::from_value::<InboxEvent>(wire.clone()).unwrap(),
            e
        );
        wire["sequence_number"] = json!(7);
        let err = serde_json::from_value::<InboxEvent>(wire).unwrap_err();
        assert!(err.to_string().contains("must agree"), "{err}");
    }
}
