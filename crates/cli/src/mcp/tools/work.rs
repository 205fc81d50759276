//! Claimed work: `claim_work`, `complete_work`, `release_work`, `extend_claim`.
//! The claim tokens stay in the session's keeper; the model names events by id.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_sdk::proto::{ClaimRequest, EventId, ExtendRequest, ReleaseRequest};

use super::{Answer, event_id, in_range};
use crate::mcp::Session;
use crate::mcp::keeper::Claim;
use crate::mcp::text::{self, NOT_CLAIMED, ToolError};

/// Arguments of `claim_work`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ClaimWorkArgs {
    /// How many events to claim at most, 1..=10 (default 1).
    #[serde(default)]
    #[schemars(range(min = 1, max = 10))]
    limit: Option<u32>,
    /// How long the claim lasts before the event goes back to the queue, in
    /// seconds, 1..=43200 (default 300). Extend it with extend_claim.
    #[serde(default)]
    #[schemars(range(min = 1, max = 43200))]
    lease_seconds: Option<u32>,
}

/// Arguments naming one claimed event.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EventArgs {
    /// The event_id claim_work returned.
    event_id: String,
}

/// Arguments of `release_work`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReleaseWorkArgs {
    /// The event_id claim_work returned.
    event_id: String,
    /// Claimable again only after this many seconds, 0..=43200 (default 0).
    #[serde(default)]
    #[schemars(range(min = 0, max = 43200))]
    delay_seconds: Option<u32>,
    /// true: the work cannot be done; it goes to the operators' quarantine instead
    /// of back to the queue.
    #[serde(default)]
    failed: bool,
    /// Why (kept with the event for the operators).
    #[serde(default)]
    reason: Option<String>,
}

/// Arguments of `extend_claim`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ExtendClaimArgs {
    /// The event_id claim_work returned.
    event_id: String,
    /// The claim then lasts this long from now, in seconds, 1..=43200 (default 300).
    #[serde(default)]
    #[schemars(range(min = 1, max = 43200))]
    lease_seconds: Option<u32>,
}

pub(super) async fn claim_work(
    session: &Session,
    args: Result<ClaimWorkArgs, ToolError>,
) -> Answer {
    let args = args?;
    let request = ClaimRequest {
        limit: Some(in_range("limit", args.limit, 1, 10)?.unwrap_or(1)),
        lease_seconds: Some(
            in_range("lease_seconds", args.lease_seconds, 1, 43200)?.unwrap_or(300),
        ),
        // A repeat after a lost answer returns the same events and tokens.
        attempt_id: Some(uuid::Uuid::now_v7()),
    };
    let claimed = session.client.claim(&session.agent, &request).await?;
    let nonce = text::nonce();
    let mut blocks = Vec::new();
    let mut events = Vec::new();
    for c in claimed.events {
        let event = &c.event;
        session.keeper.hold_claim(
            event.event_id,
            Claim {
                token: c.claim_token,
                lease_expires_at: c.lease_expires_at,
            },
        );
        let from = text::sender_name(&event.sender);
        let payload = event.payload.clone().unwrap_or(Value::Null);
        blocks.push(text::fenced(
            &nonce,
            &from,
            &format!("event {}, attempt {}", event.event_id, event.attempts),
            &payload,
        ));
        events.push(json!({
            "event_id": event.event_id,
            "seq": event.seq,
            "sender": from,
            "attempt": event.attempts,
            "max_attempts": event.max_attempts,
            "priority": event.priority,
            "correlation_id": event.correlation_id,
            "lease_expires_at": c.lease_expires_at.to_string(),
            "content_from_another_agent": payload,
        }));
    }
    if events.is_empty() {
        let next = claimed
            .next_available_at
            .map(|at| format!(" The next waiting event becomes available at {at}."))
            .unwrap_or_default();
        return Ok(text::answer(
            format!("Nothing to claim: the inbox has no pending work.{next}"),
            json!({"events": []}),
        ));
    }
    session.inbox.raise();
    Ok(text::answer(
        format!(
            "Claimed {} event(s). When done call complete_work with the event_id (or \
             release_work to give it back).\n\n{}",
            events.len(),
            blocks.join("\n\n")
        ),
        json!({"events": events}),
    ))
}

/// The claim this session holds on `event_id`, or the error that says so.
pub(super) fn held(session: &Session, event: &str) -> Result<(EventId, Claim), ToolError> {
    let id = event_id(event)?;
    match session.keeper.claim(id) {
        Some(claim) => Ok((id, claim)),
        None => {
            let held: Vec<String> = session
                .keeper
                .claims()
                .iter()
                .map(|(id, _)| id.to_string())
                .collect();
            Err(ToolError::new(
                NOT_CLAIMED,
                format!(
                    "this session holds no claim on event {id}; claim_work first{}",
                    if held.is_empty() {
                        String::new()
                    } else {
                        format!(" (it holds {})", held.join(", "))
                    }
                ),
            ))
        }
    }
}

/// An answer from the server about a claimed event: a stale claim is dropped from
/// the keeper (it will never be current again).
pub(super) fn settle<T>(
    session: &Session,
    id: EventId,
    result: Result<T, switchboard_sdk::Error>,
) -> Result<T, ToolError> {
    result.map_err(|e| {
        if matches!(
            e.code(),
            Some(switchboard_sdk::proto::ErrorCode::StaleClaim)
                | Some(switchboard_sdk::proto::ErrorCode::NotFound)
        ) {
            session.keeper.drop_claim(id);
        }
        ToolError::from_sdk(&e)
    })
}

pub(super) async fn complete_work(session: &Session, args: Result<EventArgs, ToolError>) -> Answer {
    let args = args?;
    let (id, claim) = held(session, &args.event_id)?;
    let state = settle(
        session,
        id,
        session.client.ack(&session.agent, id, claim.token).await,
    )?;
    session.keeper.drop_claim(id);
    session.inbox.raise();
    Ok(text::answer(
        format!("Event {id} is complete."),
        json!({"event_id": id, "status": state.status}),
    ))
}

pub(super) async fn release_work(
    session: &Session,
    args: Result<ReleaseWorkArgs, ToolError>,
) -> Answer {
    let args = args?;
    let (id, claim) = held(session, &args.event_id)?;
    let request = ReleaseRequest {
        claim_token: claim.token,
        delay_seconds: in_range("delay_seconds", args.delay_seconds, 0, 43200)?,
        error: args.reason,
        terminal: args.failed,
    };
    let state = settle(
        session,
        id,
        session.client.release(&session.agent, id, &request).await,
    )?;
    session.keeper.drop_claim(id);
    session.inbox.raise();
    let status = serde_json::to_value(state.status).unwrap_or(Value::Null);
    Ok(text::answer(
        format!("Event {id} was given back; it is now {status}."),
        json!({"event_id": id, "status": status, "available_at": state.available_at.to_string()}),
    ))
}

pub(super) async fn extend_claim(
    session: &Session,
    args: Result<ExtendClaimArgs, ToolError>,
) -> Answer {
    let args = args?;
    let (id, claim) = held(session, &args.event_id)?;
    let request = ExtendRequest {
        claim_token: claim.token,
        lease_seconds: Some(
            in_range("lease_seconds", args.lease_seconds, 1, 43200)?.unwrap_or(300),
        ),
    };
    let state = settle(
        session,
        id,
        session.client.extend(&session.agent, id, &request).await,
    )?;
    if let Some(at) = state.lease_expires_at {
        session.keeper.update_claim_expiry(id, at);
    }
    let until = state
        .lease_expires_at
        .map(|at| at.to_string())
        .unwrap_or_default();
    Ok(text::answer(
        format!("The claim on event {id} now lasts until {until}."),
        json!({"event_id": id, "lease_expires_at": until}),
    ))
}
