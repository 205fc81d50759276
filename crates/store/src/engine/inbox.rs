//! The agent's inbox, once for every backend: poll by cursor, claim under a lease,
//! ack, release, extend, and the snapshot a consumer resumes from.
//!
//! This file is what a driver supplies ([`InboxStatements`]) and the rules they
//! hold; the shapes that differ per backend (`InboxDriver`) and the transactions
//! over them are in `inbox_transactions.rs`.
//! Claim and ack are one statement each on PostgreSQL (a CTE writes the history rows
//! too, [`InboxDriver`]), so a drain costs one commit per claim batch plus one per
//! ack; the portable shapes select, then update row by row.
//!
//! The rules, here once: a cursor below the low-water mark is gone (410) and one
//! above the head never came from this server (`check_cursor`); a claim token is
//! honoured only while it is the event's current one and its lease runs, and a
//! refused one is explained ([`stale_claim`]); a retried ack of a completed claim
//! succeeds again; a release at the attempt limit quarantines (I5, [`QUARANTINES`]).

use super::events::EventStatements;
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::InboxEvent;

/// I5 in SQL, for the statements that decide an event's next status in its own row
/// (a release; PostgreSQL's scavenger): its attempts are used up.
/// [`quarantines`](super::maintenance::quarantines) is the same rule for a row
/// already read.
pub(crate) const QUARANTINES: &str = "attempts >= max_attempts";

/// Whether a pending event (the `events` row aliased `e`, or unaliased for `""`) is
/// available to a claim whose clock is the parameter `now`: due by that clock, or
/// sent without a delay (`available_at` no later than `created_at`), which is
/// available from its commit whatever the clocks say. Two sends read their clocks
/// before they take the agent's row, so the later sequence number can carry the
/// earlier `available_at`; a claim whose clock fell between the two would hand out
/// the later one first (I3's order). A delayed event waits for its time. The one
/// definition for claims, `next_available` and the webhook's due check.
pub(crate) fn available(e: &str, now: &str) -> String {
    format!("({e}available_at <= {now} OR {e}available_at <= {e}created_at)")
}

/// An agent's sequence head and low-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Marks {
    pub(crate) head: u64,
    pub(crate) low_water: u64,
}

/// Where an event's claim stands, to explain why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimHold {
    pub(crate) status: String,
    pub(crate) claim_token: Option<String>,
    pub(crate) lease_expires_at: Option<Millis>,
}

/// A release as its statement binds it.
pub(crate) struct ReleaseRow<'a> {
    pub(crate) agent: &'a AgentRecord,
    pub(crate) event: EventId,
    pub(crate) token: ClaimToken,
    /// Quarantine now, whatever the attempts.
    pub(crate) terminal: bool,
    pub(crate) available_at: Millis,
    /// Kept as the event's `last_error` (the previous one stays when `None`).
    pub(crate) error: Option<&'a str>,
    /// The history step's detail.
    pub(crate) detail: Option<String>,
    pub(crate) now: Millis,
}

/// The inbox's statements (`store/statements/inbox.rs`). Each is one statement: in
/// `tx`, or where it says so on its own (a read on the read pool, or one autocommit
/// write).
#[async_trait]
pub(crate) trait InboxStatements:
    EventStatements + super::directory::DirectoryStatements
{
    /// The event's state and sequence number, in `tx` (where MySQL reads back what
    /// an `UPDATE` wrote: it has no `UPDATE … RETURNING`).
    async fn state_of(&self, tx: &mut Self::Tx, event: EventId) -> StoreResult<(EventState, u64)>;
    /// The agent's head and low-water mark; `NotFound` for no such agent. With
    /// `lock`, its row is locked `@FOR_UPDATE` until the transaction ends (in a
    /// write transaction only).
    async fn marks(&self, tx: &mut Self::Tx, agent: AgentId, lock: bool) -> StoreResult<Marks>;
    /// At most `rows` events with `after < seq <= through`, in sequence order.
    async fn events_after(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        after: u64,
        through: u64,
        rows: u32,
    ) -> StoreResult<Vec<InboxEvent>>;
    async fn status_counts(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<StatusCounts>;
    /// The lowest sequence number of an event that still needs work.
    async fn first_open_seq(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<Option<u64>>;
    /// Up to `limit` pending events available at `now` and unexpired, by priority then
    /// sequence, locked `@SKIP_LOCKED`: concurrent claimers take different rows. Each
    /// with its attempts so far.
    async fn claimable(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<(EventId, u32)>>;
    /// The earliest `available_at` after `now` among the agent's pending events.
    async fn next_available(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<Option<Millis>>;
    /// The agent's claimed events whose leases run at `now`, with their tokens and
    /// leases, by priority then sequence (to find a retried claim's events).
    async fn claims_held(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
    ) -> StoreResult<Vec<ClaimedEvent>>;
    /// Claims one event for `claimer` under `token` until `lease_until` (one more
    /// attempt); the claim's step is the row's `claimed_at` and `claimed_by`.
    async fn take_claim(
        &self,
        tx: &mut Self::Tx,
        event: EventId,
        claimer: &str,
        token: ClaimToken,
        lease_until: Millis,
        now: Millis,
    ) -> StoreResult<InboxEvent>;
    /// Completes the event if `token` holds its claim (current, lease running). The
    /// token stays on the completed event, so a retried ack can be recognised.
    async fn complete_claim(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Option<EventState>>;
    /// Returns the event to pending (or to the quarantine: terminal, or at the
    /// attempt limit) if the token holds its claim; its state and sequence number.
    async fn release_claim_row(
        &self,
        tx: &mut Self::Tx,
        r: &ReleaseRow<'_>,
    ) -> StoreResult<Option<(EventState, u64)>>;
    /// Moves the lease's end to `until` if `token` holds the claim. One statement on
    /// its own (autocommit): nothing else changes with it.
    async fn extend_claim(
        &self,
        agent: AgentId,
        event: EventId,
        token: ClaimToken,
        until: Millis,
        now: Millis,
    ) -> StoreResult<Option<EventState>>;
    /// The event's state if `token` completed it (a read, outside any transaction).
    async fn completed_by(
        &self,
        agent: AgentId,
        event: EventId,
        token: ClaimToken,
    ) -> StoreResult<Option<EventState>>;
    /// Where the event's claim stands (a read, outside any transaction).
    async fn claim_hold(&self, agent: AgentId, event: EventId) -> StoreResult<Option<ClaimHold>>;
}

/// The claim token of the `attempts`th claim of `event` by a claim request with
/// the `attempt` id: the first 16 bytes of SHA-256(`attempt:event:attempts`) (the
/// PostgreSQL claim computes the same in SQL). A retry of that request finds its
/// events by it. The claim's number makes every claim's token new, even if a
/// client reuses an attempt id, so fencing (I4) never rests on the client; the
/// attempt id, which only its client knows, keeps it unguessable.
pub(crate) fn attempt_token(attempt: uuid::Uuid, event: EventId, attempts: u32) -> ClaimToken {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{attempt}:{event}:{attempts}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    ClaimToken(uuid::Uuid::from_bytes(bytes))
}

/// Why a claim token was refused, from where the event's claim stands: not the
/// current token, an expired lease, or not claimed.
pub(crate) fn stale_claim(
    event: EventId,
    token: ClaimToken,
    hold: &ClaimHold,
    now: Millis,
) -> StoreError {
    let status = hold.status.as_str();
    if hold.claim_token.as_deref() != Some(token.to_string().as_str()) {
        return StoreError::StaleClaim(format!(
            "claim token is not the current one for event {event} (it is {status}; it was \
             released, re-claimed or changed by an operator)"
        ));
    }
    match (status, hold.lease_expires_at) {
        ("claimed", Some(until)) if until <= now => StoreError::StaleClaim(format!(
            "the lease on event {event} expired {} ms ago",
            now - until
        )),
        (status, _) => StoreError::StaleClaim(format!("event {event} is {status}, not claimed")),
    }
}

/// A cursor read's bounds: below the low-water mark is gone (410), above the head
/// never came from this server.
pub(crate) fn check_cursor(after: u64, head: u64, low_water: u64) -> StoreResult<()> {
    if after < low_water {
        return Err(StoreError::CursorGone {
            cursor: after,
            oldest: low_water,
        });
    }
    if after > head {
        return Err(StoreError::Invalid(format!(
            "after_cursor {after} is ahead of this inbox's newest event ({head}); a cursor \
             only comes from next_cursor or a snapshot of this server; fetch the snapshot to resync"
        )));
    }
    Ok(())
}
