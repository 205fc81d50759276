//! The fenced data plane's decisions (pure functions over what a record call's
//! transaction read): why a call is refused, to whom a token was issued, what a
//! write does, and the `memory_updated` event it sends. `engine/records.rs` reads,
//! locks and writes, and decides with these. (The rows they read are decoded in
//! `lease_rules.rs`.)

use crate::clock::Millis;
use crate::{Actor, NewMessage, RecordCall, RecordOp, StoreError, StoreResult};
use switchboard_proto::{MemoryId, MemoryRecord, MemoryUpdated};

/// Why a record call was refused, before it is recorded.
pub(crate) enum Refusal {
    Stale(String),
    Expired(String),
    /// The token is not one the caller was issued.
    NotHolder(String),
}

impl Refusal {
    pub(crate) fn into_error(self) -> StoreError {
        match self {
            Self::Stale(why) => StoreError::StaleFence(why),
            Self::Expired(why) => StoreError::LeaseExpired(why),
            Self::NotHolder(why) => StoreError::NotHolder(why),
        }
    }
}

/// Whom a fencing token went to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IssuedTo {
    /// [`Actor::key`]: an agent by its id.
    Key(String),
    /// An `Actor`'s text (`agent:<name>`): a record made before keys were kept,
    /// whose token is stale by now (migration 0018 / 0010 / 0009 gave the live
    /// leases' records their keys).
    Text(String),
}

impl IssuedTo {
    /// Whether `who` is the one it names.
    pub(crate) fn is(&self, who: &Actor) -> bool {
        match self {
            Self::Key(key) => *key == who.key(),
            Self::Text(text) => *text == who.to_string(),
        }
    }
}

/// The data plane is bound to the lease holder (I7): a token counts only for the
/// principal it was issued to (`issued_to`, from `issued_tokens`). Anyone else gets
/// one refusal, the same whether the memory is leased or not, whether the token is
/// current, stale or was never issued, so a token learnt elsewhere is worth nothing
/// and the answer tells nothing about the memory's lease.
pub(crate) fn holder_refusal(
    memory: MemoryId,
    token: u64,
    issued_to: Option<&IssuedTo>,
    who: &crate::Actor,
) -> Option<Refusal> {
    if issued_to.is_some_and(|to| to.is(who)) {
        return None;
    }
    Some(Refusal::NotHolder(format!(
        "you hold no lease on memory {memory} with fencing token {token}; records are \
         read and written only by the holder of the memory's lease: acquire it with \
         POST /api/v1/leases and use the fencing_token it returns"
    )))
}

/// `token` (issued to the caller) against the memory's current `fence`: a refusal
/// unless they are equal. It never states the current token: only its holder may
/// know it.
pub(crate) fn fence_refusal(memory: MemoryId, token: u64, fence: i64) -> Option<Refusal> {
    let token_i = token as i64;
    if token_i < fence {
        return Some(Refusal::Stale(format!(
            "fencing token {token} is stale: memory {memory} was leased again since; \
             this holder lost its lease and must stop writing"
        )));
    }
    if token_i > fence {
        return Some(Refusal::Stale(format!(
            "fencing token {token} is not memory {memory}'s current token; use the \
             token of your lease"
        )));
    }
    None
}

/// The current token without a live lease.
pub(crate) fn expired_refusal(memory: MemoryId, token: u64) -> Refusal {
    Refusal::Expired(format!(
        "the lease with fencing token {token} on memory {memory} has expired or was \
         released; acquire it again"
    ))
}

/// What a fenced call does to its record, decided over the record as it is.
pub(crate) enum RecordPlan {
    Read(MemoryRecord),
    /// Write `value` as `version` (the existing one's + 1); `created`: there was none.
    Put {
        value: String,
        version: i64,
        created: bool,
    },
    /// Delete the record at `version`.
    Delete {
        version: u64,
    },
}

/// Checks the call's preconditions against `existing`.
pub(crate) fn plan_record(
    call: &RecordCall<'_>,
    existing: Option<MemoryRecord>,
) -> StoreResult<RecordPlan> {
    let version = existing.as_ref().map_or(0, |r| r.version);
    let precondition = |if_match: Option<u64>| match if_match {
        Some(v) if v != version => Err(StoreError::PreconditionFailed(format!(
            "record {} is at version {version} (ETag {}), not {v}; read it again and \
             retry with its ETag",
            call.key,
            MemoryRecord::etag(version)
        ))),
        _ => Ok(()),
    };
    match &call.op {
        RecordOp::Get => Ok(RecordPlan::Read(existing.ok_or(StoreError::NotFound)?)),
        RecordOp::Put {
            value,
            if_match,
            if_none_match,
        } => {
            if existing.is_some() && *if_none_match {
                return Err(StoreError::PreconditionFailed(format!(
                    "record {} exists (If-None-Match: *); update it with If-Match",
                    call.key
                )));
            }
            if existing.is_some() && if_match.is_none() {
                return Err(StoreError::PreconditionRequired(format!(
                    "record {} exists: send If-Match with its ETag ({}), so a concurrent \
                     update is not lost",
                    call.key,
                    MemoryRecord::etag(version)
                )));
            }
            precondition(*if_match)?;
            Ok(RecordPlan::Put {
                value: value.clone(),
                version: version as i64 + 1,
                created: existing.is_none(),
            })
        }
        RecordOp::Delete { if_match } => {
            if existing.is_none() {
                return Err(StoreError::NotFound);
            }
            precondition(*if_match)?;
            Ok(RecordPlan::Delete { version })
        }
    }
}

/// The message carrying a change's `memory_updated` event to a subscriber.
pub(crate) fn memory_updated(
    call: &RecordCall<'_>,
    version: u64,
    deleted: bool,
    now: Millis,
) -> NewMessage {
    let change = MemoryUpdated {
        kind: "memory_updated".to_owned(),
        memory_instance_id: call.memory,
        key: call.key.to_owned(),
        version,
        deleted,
    };
    NewMessage {
        payload: serde_json::to_string(&change).unwrap_or_default(),
        correlation_id: Some(change.memory_instance_id.to_string()),
        priority: 0,
        available_at: now,
        expires_at: None,
        max_attempts: 5,
    }
}
