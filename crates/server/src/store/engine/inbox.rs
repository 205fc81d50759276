//! The agent's inbox, once for every backend: poll by cursor, claim under a lease,
//! ack, release, extend, and the snapshot a consumer resumes from.
//!
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
use super::maintenance::{self, MaintenanceDriver};
use crate::clock::{Millis, from_timestamp, to_timestamp};
use crate::store::rows::{check_cursor, release_detail};
use crate::store::*;
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_proto::{EventStatus, InboxEvent};

/// I5 in SQL, for the statements that decide an event's next status in its own row
/// (a release; PostgreSQL's scavenger): its attempts are used up.
/// [`maintenance::quarantines`] is the same rule for a row already read.
pub(crate) const QUARANTINES: &str = "attempts >= max_attempts";

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
pub(crate) trait InboxStatements: EventDriver {
    /// The agent's head and low-water mark; `NotFound` for no such agent.
    async fn marks(&self, tx: &mut Self::Tx, agent: AgentId) -> StoreResult<Marks>;
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
    /// sequence, locked `@SKIP_LOCKED`: concurrent claimers take different rows.
    async fn claimable(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<EventId>>;
    /// Claims one event under `token` until `lease_until` (one more attempt).
    async fn take_claim(
        &self,
        tx: &mut Self::Tx,
        event: EventId,
        token: ClaimToken,
        lease_until: Millis,
        now: Millis,
    ) -> StoreResult<InboxEvent>;
    /// Sets the agent's `last_seen_at` to `now` unless it is `seen_after` or later.
    async fn note_seen(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        now: Millis,
        seen_after: Millis,
    ) -> StoreResult<()>;
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

    /// Claims up to `limit` events for `agent` until `lease_until`, each with a new
    /// random token and its `claimed` history step. PostgreSQL: one CTE, rows taken
    /// `FOR UPDATE SKIP LOCKED` (one round trip).
    async fn claim_batch(
        &self,
        tx: &mut Self::Tx,
        agent: &AgentRecord,
        limit: u32,
        lease_until: Millis,
        now: Millis,
    ) -> StoreResult<Vec<ClaimedEvent>> {
        let ids = self.claimable(tx, agent.id, now, limit).await?;
        let actor = agent.actor();
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            let token = ClaimToken::new();
            let event = self.take_claim(tx, id, token, lease_until, now).await?;
            let detail = format!("attempt {} of {}", event.attempts, event.max_attempts);
            self.history(tx, &id.to_string(), now, "claimed", &actor, Some(detail))
                .await?;
            claimed.push(ClaimedEvent {
                event,
                claim_token: token,
                lease_expires_at: to_timestamp(lease_until),
            });
        }
        Ok(claimed)
    }

    /// Completes every entry whose token holds its claim, with its `acked` history
    /// step, in one transaction of its own; the states of those it completed.
    /// PostgreSQL: one autocommitted statement (one round trip, one commit).
    async fn complete_claims(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<EventState>> {
        let mut tx = self.begin_write().await?;
        let actor = agent.actor();
        let mut done = Vec::with_capacity(entries.len());
        for &(event, token) in entries {
            if let Some(state) = self
                .complete_claim(&mut tx, agent.id, event, token, now)
                .await?
            {
                self.history(&mut tx, &event.to_string(), now, "acked", &actor, None)
                    .await?;
                done.push(state);
            }
        }
        self.commit(tx, &[]).await?;
        Ok(done)
    }

    /// [`InboxStatements::release_claim_row`] and its history step (`released`, or
    /// `quarantined`). PostgreSQL: one CTE.
    async fn release_claim(
        &self,
        tx: &mut Self::Tx,
        r: &ReleaseRow<'_>,
    ) -> StoreResult<Option<(EventState, u64)>> {
        let Some((state, seq)) = self.release_claim_row(tx, r).await? else {
            return Ok(None);
        };
        let action = if state.status == EventStatus::Quarantined {
            "quarantined"
        } else {
            "released"
        };
        let actor = r.agent.actor();
        self.history(
            tx,
            &r.event.to_string(),
            r.now,
            action,
            &actor,
            r.detail.clone(),
        )
        .await?;
        Ok(Some((state, seq)))
    }
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

/// Explains why a token was refused: the event is gone (404) or the claim is stale.
async fn refuse<D: InboxStatements>(
    d: &D,
    agent: AgentId,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreError {
    match d.claim_hold(agent, event).await {
        Ok(Some(hold)) => stale_claim(event, token, &hold, now),
        Ok(None) => StoreError::NotFound,
        Err(e) => e,
    }
}

async fn poll<D: InboxDriver>(
    d: &D,
    agent: AgentId,
    after: u64,
    limit: u32,
) -> StoreResult<InboxPage> {
    // One read transaction: the low-water mark and the page come from one snapshot.
    let mut tx = d.begin_read().await?;
    let marks = d.marks(&mut tx, agent).await?;
    check_cursor(after, marks.head, marks.low_water)?;
    // Sequence numbers are allocated under the agent's row lock, so every event up
    // to `head` in this snapshot is committed: no gap can fill in behind the page.
    // One row more than the page says whether there is more.
    let mut events = d
        .events_after(&mut tx, agent, after, marks.head, limit.saturating_add(1))
        .await?;
    d.commit(tx, &[]).await?;
    let has_more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let next_cursor = events.last().map_or(after, |e| e.seq);
    Ok(InboxPage {
        events,
        next_cursor,
        has_more,
    })
}

async fn claim<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    limit: u32,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<Claimed> {
    let mut tx = d.begin_write().await?;
    // Expired leases of this agent are claimable again now, not at the next scavenger
    // pass (as with SQS's visibility timeout).
    let reaped = maintenance::return_expired(d, &mut tx, now, Some(agent.id)).await?;
    let events = d
        .claim_batch(&mut tx, agent, limit, now + lease_ms, now)
        .await?;
    // In the claim's transaction, so it costs no commit of its own.
    let seen_after = match D::SEEN_EVERY_MS {
        0 => Millis::MAX,
        every => now - every,
    };
    d.note_seen(&mut tx, agent.id, now, seen_after).await?;
    d.commit(tx, &reaped.wakes).await?;
    Ok(Claimed { events, reaped })
}

/// Acks a batch: what holds is completed in one transaction (one commit), then each
/// entry it did not complete is explained as a single ack would be, a repeat of an
/// ack that completed the event (its answer was lost) or a refusal. A database error
/// fails the whole answer; acks are idempotent, so the caller may send it again.
async fn ack_batch<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    now: Millis,
) -> StoreResult<Vec<StoreResult<Acked>>> {
    let mut done: HashMap<EventId, EventState> = d
        .complete_claims(agent, entries, now)
        .await?
        .into_iter()
        .map(|state| (state.event_id, state))
        .collect();
    let mut results = Vec::with_capacity(entries.len());
    for &(event, token) in entries {
        let result = match done.remove(&event) {
            Some(state) => {
                let latency_ms = now - from_timestamp(state.available_at);
                Ok(Acked {
                    state,
                    latency_ms: Some(latency_ms),
                })
            }
            None => ack_missed(d, agent.id, event, token, now).await,
        };
        match result {
            Err(e @ (StoreError::Unavailable(_) | StoreError::Database(_))) => return Err(e),
            result => results.push(result),
        }
    }
    Ok(results)
}

/// An ack that changed nothing. The claim token stays on a completed event, so a
/// retried ack of the same claim (its answer was lost) succeeds again instead of
/// reporting a stale claim.
async fn ack_missed<D: InboxStatements>(
    d: &D,
    agent: AgentId,
    event: EventId,
    token: ClaimToken,
    now: Millis,
) -> StoreResult<Acked> {
    match d.completed_by(agent, event, token).await? {
        Some(state) => Ok(Acked {
            state,
            latency_ms: None,
        }),
        None => Err(refuse(d, agent, event, token, now).await),
    }
}

async fn release<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    args: &ReleaseArgs,
    now: Millis,
) -> StoreResult<Committed<EventState>> {
    let row = ReleaseRow {
        agent,
        event,
        token,
        terminal: args.terminal,
        available_at: now + args.delay_ms,
        error: args.error.as_deref(),
        detail: release_detail(&args.error, args.terminal),
        now,
    };
    let mut tx = d.begin_write().await?;
    let Some((state, seq)) = d.release_claim(&mut tx, &row).await? else {
        drop(tx);
        return Err(refuse(d, agent.id, event, token, now).await);
    };
    let wakes = if state.status == EventStatus::Pending {
        vec![agent.wake(seq)]
    } else {
        Vec::new()
    };
    d.commit(tx, &wakes).await?;
    Ok(Committed {
        value: state,
        wakes,
    })
}

async fn extend<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    event: EventId,
    token: ClaimToken,
    lease_ms: Millis,
    now: Millis,
) -> StoreResult<EventState> {
    match d
        .extend_claim(agent.id, event, token, now + lease_ms, now)
        .await?
    {
        Some(state) => Ok(state),
        None => Err(refuse(d, agent.id, event, token, now).await),
    }
}

async fn snapshot<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    now: Millis,
) -> StoreResult<Snapshot> {
    let mut tx = d.begin_read().await?;
    let marks = d.marks(&mut tx, agent.id).await?;
    let counts = d.status_counts(&mut tx, agent.id).await?;
    let first_open = d.first_open_seq(&mut tx, agent.id).await?;
    d.commit(tx, &[]).await?;
    Ok(Snapshot {
        agent_id: agent.id,
        name: agent.name.clone(),
        head_cursor: marks.head,
        oldest_cursor: marks.low_water,
        // Just before the first event that still needs work, never below the mark.
        resume_cursor: first_open.map_or(marks.head, |s| s.saturating_sub(1).max(marks.low_water)),
        counts,
        server_time: to_timestamp(now),
    })
}

/// Every backend with the inbox's driver has the inbox.
#[async_trait]
impl<D: InboxDriver> InboxStore for D {
    async fn poll(&self, agent: AgentId, after: u64, limit: u32) -> StoreResult<InboxPage> {
        poll(self, agent, after, limit).await
    }

    async fn claim(
        &self,
        agent: &AgentRecord,
        limit: u32,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<Claimed> {
        self.retrying(|| claim(self, agent, limit, lease_ms, now))
            .await
    }

    async fn ack(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Acked> {
        let entry = [(event, token)];
        self.retrying(|| ack_batch(self, agent, &entry, now))
            .await?
            .pop()
            .unwrap_or(Err(StoreError::NotFound))
    }

    async fn ack_batch(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<StoreResult<Acked>>> {
        self.retrying(|| ack_batch(self, agent, entries, now)).await
    }

    async fn release(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        args: &ReleaseArgs,
        now: Millis,
    ) -> StoreResult<Committed<EventState>> {
        self.retrying(|| release(self, agent, event, token, args, now))
            .await
    }

    async fn extend(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<EventState> {
        self.retrying(|| extend(self, agent, event, token, lease_ms, now))
            .await
    }

    async fn snapshot(&self, agent: &AgentRecord, now: Millis) -> StoreResult<Snapshot> {
        snapshot(self, agent, now).await
    }
}
