//! The agent's inbox, once for every backend: poll by cursor, claim under a lease,
//! ack, release, extend, and the snapshot a consumer resumes from.
//!
//! This file is what a driver supplies ([`InboxStatements`], [`InboxDriver`]) and
//! the rules they hold; the transactions over them are in `inbox_transactions.rs`.
//! Claim and ack are one statement each on PostgreSQL (a CTE writes the history rows
//! too, [`InboxDriver`]), so a drain costs one commit per claim batch plus one per
//! ack; the portable shapes select, then update row by row.
//!
//! The rules, here once: a cursor below the low-water mark is gone (410) and one
//! above the head never came from this server (`check_cursor`); a claim token is
//! honoured only while it is the event's current one and its lease runs, and a
//! refused one is explained ([`stale_claim`]); a retried ack of a completed claim
//! succeeds again; a release at the attempt limit quarantines (I5, [`QUARANTINES`]).

use super::events::EventDriver;
use super::maintenance::MaintenanceDriver;
use crate::clock::{Millis, to_timestamp};
use crate::store::*;
use async_trait::async_trait;
use switchboard_proto::{EventStatus, InboxEvent};

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
    EventDriver + super::directory::DirectoryStatements
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

/// Where a backend's shape differs: each method has the portable default.
#[async_trait]
pub(crate) trait InboxDriver: InboxStatements + MaintenanceDriver {
    /// A claim rewrites the agent's `last_seen_at` at most this often (0: every
    /// claim). PostgreSQL: once a second, as a row rewrite per claim would be a dead
    /// tuple per claim.
    const SEEN_EVERY_MS: Millis = 0;

    /// Orders the claims of one agent: taken first in every claim transaction and
    /// held to its end, so that a claim waits behind an unfinished claim of the same
    /// agent instead of skipping the rows it holds (`SKIP LOCKED`) and handing out a
    /// later event first. The unfinished claim may be a dead one: a server killed
    /// while its database session was busy (in a lock wait, say) leaves its
    /// transaction open until the database notices, and the consumer's retry reached
    /// the restarted server first (the crash loop on PostgreSQL saw it). Claims of
    /// different agents never wait for each other. SQLite: nothing (one writer).
    async fn order_claims(&self, _tx: &mut Self::Tx, _agent: AgentId) -> StoreResult<()> {
        Ok(())
    }

    /// Claims up to `limit` events for `agent` until `lease_until`, each with a new
    /// token (random, or [`attempt_token`] of the claim's `attempt` id) and its
    /// `claimed` step in its row. PostgreSQL: one statement, rows taken `FOR UPDATE
    /// SKIP LOCKED` (one round trip).
    async fn claim_batch(
        &self,
        tx: &mut Self::Tx,
        agent: &AgentRecord,
        limit: u32,
        lease_until: Millis,
        attempt: Option<uuid::Uuid>,
        now: Millis,
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let ids = self.claimable(tx, agent.id, now, limit).await?;
        let claimer = agent.actor().to_string();
        let mut claimed = Vec::with_capacity(ids.len());
        for (id, attempts) in ids {
            // With an attempt id, the token names the attempt and this claim's number.
            let token =
                attempt.map_or_else(ClaimToken::new, |a| attempt_token(a, id, attempts + 1));
            let event = self
                .take_claim(tx, id, &claimer, token, lease_until, now)
                .await?;
            claimed.push(ClaimedEvent {
                event,
                claim_token: token,
                lease_expires_at: to_timestamp(lease_until),
            });
        }
        Ok(claimed)
    }

    /// Completes every entry whose token holds its claim (its `acked` step is the
    /// row's `completed_at`), in one transaction of its own; the states of those it
    /// completed.
    /// PostgreSQL: one autocommitted statement (one round trip, one commit).
    async fn complete_claims(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<EventState>> {
        let mut tx = self.begin_write().await?;
        let done = self
            .complete_claims_in(&mut tx, agent, entries, now)
            .await?;
        self.commit(tx, &[]).await?;
        Ok(done)
    }

    /// [`complete_claims`](Self::complete_claims) in the caller's transaction `tx`.
    /// PostgreSQL: the same one statement.
    async fn complete_claims_in(
        &self,
        tx: &mut Self::Tx,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<EventState>> {
        let mut done = Vec::with_capacity(entries.len());
        for &(event, token) in entries {
            if let Some(state) = self.complete_claim(tx, agent.id, event, token, now).await? {
                done.push(state);
            }
        }
        Ok(done)
    }

    /// [`InboxStatements::release_claim_row`] and its history step (`released`, or
    /// `quarantined`), after the claim's step moved out of the row. PostgreSQL: one
    /// CTE.
    async fn release_claim(
        &self,
        tx: &mut Self::Tx,
        r: &ReleaseRow<'_>,
    ) -> StoreResult<Option<(EventState, u64)>> {
        // Moving the steps of a claim this token does not hold is harmless: they are
        // the same timeline, rows instead of columns.
        self.move_steps(tx, &r.event.to_string()).await?;
        let Some((state, seq)) = self.release_claim_row(tx, r).await? else {
            return Ok(None);
        };
        let action = if state.status == EventStatus::Quarantined {
            "quarantined"
        } else {
            "released"
        };
        self.history(
            tx,
            &r.event.to_string(),
            r.now,
            action,
            &r.agent.actor().to_string(),
            r.detail.clone(),
        )
        .await?;
        Ok(Some((state, seq)))
    }
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
