//! The inbox's transactions, once for every backend, over the driver of
//! `inbox.rs`: poll and snapshot (one read snapshot each), claim, ack, release and
//! extend, and the [`InboxStore`] of the [`Engine`](super::Engine) they make.

use super::area::store_area;
use super::inbox::check_cursor;
use super::inbox::{InboxStatements, ReleaseRow, attempt_token, stale_claim};
use super::maintenance;
use super::maintenance::MaintenanceDriver;
use crate::clock::{Millis, from_timestamp, to_timestamp};
use crate::rows::release_detail;
use crate::*;
use async_trait::async_trait;
use std::collections::HashMap;
use switchboard_proto::EventStatus;

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
    let marks = d.marks(&mut tx, agent, false).await?;
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

/// What a claim asks for: how many, the lease, the attempt id of a retry.
#[derive(Debug, Clone, Copy)]
pub struct ClaimArgs {
    pub limit: u32,
    pub lease_ms: Millis,
    pub attempt: Option<uuid::Uuid>,
}

async fn claim<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    args: ClaimArgs,
    now: Millis,
) -> StoreResult<Claimed> {
    let mut tx = d.begin_write().await?;
    // Behind any unfinished claim of this agent, so its events go out in order.
    d.order_claims(&mut tx, agent.id).await?;
    let claimed = claim_in(d, &mut tx, agent, args, now).await?;
    d.commit(tx, &claimed.reaped.wakes).await?;
    Ok(claimed)
}

/// A claim's steps in `tx`, after [`InboxDriver::order_claims`]; the caller commits
/// with `reaped.wakes`.
async fn claim_in<D: InboxDriver>(
    d: &D,
    tx: &mut D::Tx,
    agent: &AgentRecord,
    args: ClaimArgs,
    now: Millis,
) -> StoreResult<Claimed> {
    // Expired leases of this agent are claimable again now, not at the next scavenger
    // pass (as with SQS's visibility timeout).
    let reaped = maintenance::return_expired(d, tx, now, Some(agent.id)).await?;
    // A retry of a claim that took events (its answer was lost): the same events.
    if let Some(attempt) = args.attempt {
        let again: Vec<ClaimedEvent> = d
            .claims_held(tx, agent.id, now)
            .await?
            .into_iter()
            .filter(|c| c.claim_token == attempt_token(attempt, c.event.event_id, c.event.attempts))
            .collect();
        if !again.is_empty() {
            return Ok(Claimed {
                events: again,
                reaped,
                next_available: None,
            });
        }
    }
    let events = d
        .claim_batch(
            tx,
            agent,
            args.limit,
            now + args.lease_ms,
            args.attempt,
            now,
        )
        .await?;
    // Nothing more to take now: say when the next waiting event becomes available,
    // since no wake-up marks that moment.
    let next_available = if (events.len() as u32) < args.limit {
        d.next_available(tx, agent.id, now).await?
    } else {
        None
    };
    // In the claim's transaction, so it costs no commit of its own.
    let seen_after = match D::SEEN_EVERY_MS {
        0 => Millis::MAX,
        every => now - every,
    };
    d.note_seen(Some(tx), agent.id, now, seen_after).await?;
    Ok(Claimed {
        events,
        reaped,
        next_available,
    })
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
    let completed = d.complete_claims(agent, entries, now).await?;
    explain_acks(d, agent, entries, completed, now).await
}

/// Each entry's result, in order, from the states of those an ack batch completed:
/// the completed ones, then for the rest what a single ack would answer.
async fn explain_acks<D: InboxStatements>(
    d: &D,
    agent: &AgentRecord,
    entries: &[(EventId, ClaimToken)],
    completed: Vec<EventState>,
    now: Millis,
) -> StoreResult<Vec<StoreResult<Acked>>> {
    let mut done: HashMap<EventId, EventState> = completed
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
            Err(
                e @ (StoreError::Unavailable(_)
                | StoreError::StorageFull(_)
                | StoreError::Database(_)),
            ) => {
                return Err(e);
            }
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

async fn snapshot<D: InboxDriver>(
    d: &D,
    agent: &AgentRecord,
    now: Millis,
) -> StoreResult<Snapshot> {
    let mut tx = d.begin_read().await?;
    let marks = d.marks(&mut tx, agent.id, false).await?;
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

// Every backend with the inbox's driver has the inbox.
store_area! {
    /// The agent's inbox: poll by cursor, claim under a lease, ack, release, extend.
    pub trait InboxStore for Engine<D: InboxDriver> {
        async fn poll(&self, agent: AgentId, after: u64, limit: u32) -> StoreResult<InboxPage> {
            poll(&self.0, agent, after, limit).await
        }

        /// Claims up to `limit` events until `now + lease_ms`. With an `attempt` id
        /// that already claimed events whose leases still run (its answer was lost),
        /// returns those again, tokens and all, and claims nothing new.
        async fn claim(
            &self,
            agent: &AgentRecord,
            limit: u32,
            lease_ms: Millis,
            attempt: Option<uuid::Uuid>,
            now: Millis,
        ) -> StoreResult<Claimed> {
            let args = ClaimArgs {
                limit,
                lease_ms,
                attempt,
            };
            self.0.retrying(|| claim(&self.0, agent, args, now)).await
        }

        /// Acks `entries` (as [`InboxStore::ack_batch`]) and claims (as
        /// [`InboxStore::claim`]) in one transaction: one commit for both. `entries`
        /// may be empty.
        // Acks a batch and claims the next in one transaction (one commit for both): the
        // consumer's steady state. The claim is ordered behind other claims of the agent
        // first (the lock order of a plain claim), then the acks complete, then the claim
        // takes events (those just acked are no longer claimable). Entries not completed
        // are explained afterwards, as [`ack_batch`] does.
        async fn ack_and_claim(
            &self,
            agent: &AgentRecord,
            entries: &[(EventId, ClaimToken)],
            args: ClaimArgs,
            now: Millis,
        ) -> StoreResult<(Vec<StoreResult<Acked>>, Claimed)> {
            let d = &self.0;
            d.retrying(|| async {
                let mut tx = d.begin_write().await?;
                d.order_claims(&mut tx, agent.id).await?;
                let completed = if entries.is_empty() {
                    Vec::new()
                } else {
                    d.complete_claims_in(&mut tx, agent, entries, now).await?
                };
                let claimed = claim_in(d, &mut tx, agent, args, now).await?;
                d.commit(tx, &claimed.reaped.wakes).await?;
                let acked = explain_acks(d, agent, entries, completed, now).await?;
                Ok((acked, claimed))
            })
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
            self.0
                .retrying(|| ack_batch(&self.0, agent, &entry, now))
                .await?
                .pop()
                .unwrap_or(Err(StoreError::NotFound))
        }

        /// Acks several events in one transaction; each entry's result as
        /// [`InboxStore::ack`] would give it. A database error fails the whole batch;
        /// acks are idempotent, so the caller may send it again.
        async fn ack_batch(
            &self,
            agent: &AgentRecord,
            entries: &[(EventId, ClaimToken)],
            now: Millis,
        ) -> StoreResult<Vec<StoreResult<Acked>>> {
            self.0
                .retrying(|| ack_batch(&self.0, agent, entries, now))
                .await
        }

        async fn release(
            &self,
            agent: &AgentRecord,
            event: EventId,
            token: ClaimToken,
            args: &ReleaseArgs,
            now: Millis,
        ) -> StoreResult<Committed<EventState>> {
            let d = &self.0;
            d.retrying(|| async {
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
            })
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
            let d = &self.0;
            d.retrying(|| async {
                match d
                    .extend_claim(agent.id, event, token, now + lease_ms, now)
                    .await?
                {
                    Some(state) => Ok(state),
                    None => Err(refuse(d, agent.id, event, token, now).await),
                }
            })
            .await
        }

        async fn snapshot(&self, agent: &AgentRecord, now: Millis) -> StoreResult<Snapshot> {
            snapshot(&self.0, agent, now).await
        }
    }
}
