//! The background passes, once for every backend: the scavenger (expired leases,
//! I5 quarantine), expiry, and retention (I6).
//!
//! Every instance runs these passes. They are safe together: each batch locks the
//! rows it changes `@SKIP_LOCKED` (two scavengers split the work, neither waits), and
//! retention takes the agent's row lock before it moves the low-water mark. On
//! SQLite the single writer serializes them anyway.

use super::area::store_area;
use super::inbox::InboxStatements;
use super::trim::{self, TrimStatements};
use crate::clock::Millis;
use crate::*;
use async_trait::async_trait;
use switchboard_proto::EventStatus;

pub(crate) const SCAVENGER: Actor = Actor::System("scavenger");
pub(crate) const EXPIRY: Actor = Actor::System("expiry");
/// Rows one scavenger or expiry batch changes; a pass repeats until less remain.
pub(crate) const BATCH: u32 = 1_000;

/// A claimed event whose lease ran out, as the scavenger reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpiredLease {
    pub(crate) id: EventId,
    pub(crate) tenant: TenantId,
    pub(crate) agent: AgentId,
    pub(crate) seq: u64,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) last_error: Option<String>,
}

/// An agent retention may shorten, with what its archive lines name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RetentionCandidate {
    pub(crate) agent: AgentId,
    pub(crate) tenant: TenantId,
    pub(crate) name: String,
}

/// An event an expired lease gave back: pending again, or quarantined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReturnedLease {
    pub(crate) tenant: TenantId,
    pub(crate) agent: AgentId,
    pub(crate) seq: u64,
    pub(crate) quarantined: bool,
}

/// The background passes' statements (`store/statements/maintenance.rs`). Each is
/// one statement: in `tx`, or where it says so on its own.
#[async_trait]
pub(crate) trait MaintenanceStatements: InboxStatements {
    /// Up to `limit` claimed events (of `agent`, or all) whose lease ended by `now`,
    /// the oldest lease first, locked `@SKIP_LOCKED`.
    async fn expired_leases(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        agent: Option<AgentId>,
        limit: u32,
    ) -> StoreResult<Vec<ExpiredLease>>;
    /// Gives a claimed event back (no token, no lease), available from the moment its
    /// lease ran out (`now` for one that had none).
    async fn return_lease(
        &self,
        tx: &mut Self::Tx,
        event: EventId,
        status: EventStatus,
        last_error: &str,
        now: Millis,
    ) -> StoreResult<()>;
    /// Up to `limit` pending events past their `expires_at`, with their tenants,
    /// locked `@SKIP_LOCKED`.
    async fn expired_events(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<(EventId, TenantId)>>;
    /// Marks the event expired and drops its payload.
    async fn expire_event(&self, tx: &mut Self::Tx, event: EventId, now: Millis)
    -> StoreResult<()>;
    /// Agents whose removable prefix looks longer than their low-water mark (a read,
    /// without locks: it only picks the candidates).
    async fn retention_candidates(&self, cutoff: Millis) -> StoreResult<Vec<RetentionCandidate>>;
    /// The history of the agent's events with `after < seq <= through`, each step
    /// with its event: event by event in sequence order, each event's steps in the
    /// order they happened (`timeline.rs`).
    async fn history_between(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        after: u64,
        through: u64,
    ) -> StoreResult<Vec<(EventId, switchboard_proto::HistoryEntry)>>;
    /// The lowest sequence number retention must keep: an open event, or one changed
    /// after `cutoff`.
    async fn first_kept_seq(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        cutoff: Millis,
    ) -> StoreResult<Option<u64>>;
    /// Deletes the history of the agent's events with `seq <= through`.
    async fn delete_history_through(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        through: u64,
    ) -> StoreResult<()>;
    /// Deletes the agent's events with `seq <= through`; how many.
    async fn delete_events_through(
        &self,
        tx: &mut Self::Tx,
        agent: AgentId,
        through: u64,
    ) -> StoreResult<u64>;
    /// Raises the agent's low-water mark to `to` (never lowers it).
    async fn raise_low_water(&self, tx: &mut Self::Tx, agent: AgentId, to: u64) -> StoreResult<()>;
}

/// Where a backend's shape differs: each method has the portable default.
#[async_trait]
pub(crate) trait MaintenanceDriver: MaintenanceStatements + TrimStatements {
    /// Returns up to `limit` expired leases (of `agent`, or all) to pending, or to
    /// the quarantine at the attempt limit (I5), each with its history step.
    /// PostgreSQL: one CTE over a `FOR UPDATE SKIP LOCKED` subquery.
    async fn return_expired_leases(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        agent: Option<AgentId>,
        limit: u32,
    ) -> StoreResult<Vec<ReturnedLease>> {
        let expired = self.expired_leases(tx, now, agent, limit).await?;
        let mut returned = Vec::with_capacity(expired.len());
        for lease in expired {
            let quarantined = quarantines(lease.attempts, lease.max_attempts);
            let (status, action, detail) = if quarantined {
                (
                    EventStatus::Quarantined,
                    "quarantined",
                    format!(
                        "lease expired on attempt {}; attempts exhausted",
                        lease.attempts
                    ),
                )
            } else {
                (
                    EventStatus::Pending,
                    "lease_expired",
                    format!("attempt {}", lease.attempts),
                )
            };
            let error = expiry_error(&lease);
            let id = lease.id.to_string();
            self.move_steps(tx, &id).await?;
            self.return_lease(tx, lease.id, status, &error, now).await?;
            self.history(tx, &id, now, action, &SCAVENGER.to_string(), Some(detail))
                .await?;
            returned.push(ReturnedLease {
                tenant: lease.tenant,
                agent: lease.agent,
                seq: lease.seq,
                quarantined,
            });
        }
        Ok(returned)
    }

    /// Expires up to `limit` pending events past their `expires_at`, each with its
    /// history step; the tenant of each. PostgreSQL: one CTE over a `SKIP LOCKED`
    /// subquery.
    async fn expire_events(
        &self,
        tx: &mut Self::Tx,
        now: Millis,
        limit: u32,
    ) -> StoreResult<Vec<TenantId>> {
        let expired = self.expired_events(tx, now, limit).await?;
        for &(id, _) in &expired {
            self.expire_event(tx, id, now).await?;
            // A pending event holds no claim or ack step in its row (`timeline.rs`):
            // nothing to move.
            self.history(
                tx,
                &id.to_string(),
                now,
                "expired",
                &EXPIRY.to_string(),
                None,
            )
            .await?;
        }
        Ok(expired.into_iter().map(|(_, tenant)| tenant).collect())
    }
}

/// I5: an event whose lease ran out goes to the quarantine once its attempts are
/// used up. (`inbox::QUARANTINES` is the same rule in SQL.)
pub(crate) fn quarantines(attempts: u32, max_attempts: u32) -> bool {
    attempts >= max_attempts
}

/// The `last_error` an expired lease leaves on its event, keeping the previous one.
pub(crate) fn expiry_error(lease: &ExpiredLease) -> String {
    let mut error = format!(
        "lease expired on attempt {} of {}",
        lease.attempts, lease.max_attempts
    );
    if let Some(last) = &lease.last_error {
        error.push_str(&format!(" (last error: {last})"));
    }
    error
}

/// Returns expired leases (of one agent, or all) to pending, or to the quarantine
/// when their attempts are used up; at most [`BATCH`]. Shared by the scavenger and
/// by claim. Wake-ups for the events that are pending again.
pub(crate) async fn return_expired<D: MaintenanceDriver>(
    d: &D,
    tx: &mut D::Tx,
    now: Millis,
    agent: Option<AgentId>,
) -> StoreResult<ReapStats> {
    let mut stats = ReapStats::default();
    for lease in d.return_expired_leases(tx, now, agent, BATCH).await? {
        stats.lease_expirations += 1;
        let tenant = stats.by_tenant.entry(lease.tenant).or_default();
        tenant.lease_expirations += 1;
        if lease.quarantined {
            stats.quarantined += 1;
            tenant.quarantined += 1;
        } else {
            stats.wakes.push(Wake {
                tenant_id: lease.tenant,
                agent_id: lease.agent,
                cursor_hint: lease.seq,
            });
        }
    }
    Ok(stats)
}

/// The end of the prefix retention may remove now, at most [`RETAIN_BATCH`] events
/// past the low-water mark; `None` when there is none. Read in `tx` after the agent's
/// row lock (`marks`).
async fn removable_through<D: MaintenanceDriver>(
    d: &D,
    tx: &mut D::Tx,
    agent: AgentId,
    marks: &crate::engine::inbox::Marks,
    cutoff: Millis,
) -> StoreResult<Option<u64>> {
    let kept = d.first_kept_seq(tx, agent, cutoff).await?;
    let new_low = kept
        .map_or(marks.head, |k| k.saturating_sub(1))
        .min(marks.head)
        .min(marks.low_water + u64::from(RETAIN_BATCH));
    Ok((new_low > marks.low_water).then_some(new_low))
}

/// The next batch of `candidate`'s removable prefix with its history, read in a read
/// transaction (no lock: the write transaction checks it again); `None` when there
/// is none.
async fn copy_out<D: MaintenanceDriver>(
    d: &D,
    candidate: &RetentionCandidate,
    cutoff: Millis,
) -> StoreResult<Option<Vec<crate::ArchivedEvent>>> {
    let agent = candidate.agent;
    let mut tx = d.begin_read().await?;
    let marks = d.marks(&mut tx, agent, false).await?;
    let batch = match removable_through(d, &mut tx, agent, &marks, cutoff).await? {
        None => None,
        Some(through) => {
            let events = d
                .events_after(&mut tx, agent, marks.low_water, through, ARCHIVE_BATCH)
                .await?;
            let through = events.last().map_or(marks.low_water, |e| e.seq);
            let history = d
                .history_between(&mut tx, agent, marks.low_water, through)
                .await?;
            (!events.is_empty()).then(|| archived(candidate, events, history))
        }
    };
    d.commit(tx, &[]).await?;
    Ok(batch)
}

/// The end of the longest run of `copied` events, from just above `low_water`, that
/// are in `tx` (after the agent's row lock) exactly as they were copied, capped at
/// `through`: what may be removed now that the archive holds it.
async fn unchanged_through<D: MaintenanceDriver>(
    d: &D,
    tx: &mut D::Tx,
    agent: AgentId,
    low_water: u64,
    through: u64,
    copied: &[switchboard_proto::InboxEvent],
) -> StoreResult<u64> {
    let copied: Vec<_> = copied
        .iter()
        .filter(|e| e.seq > low_water && e.seq <= through)
        .collect();
    let Some(last) = copied.last() else {
        return Ok(low_water);
    };
    let now = d
        .events_after(tx, agent, low_water, last.seq, ARCHIVE_BATCH)
        .await?;
    let mut end = low_water;
    for (was, is) in copied.iter().zip(&now) {
        if *was != is || was.seq != end + 1 {
            break;
        }
        end = was.seq;
    }
    Ok(end)
}

/// Events one retention transaction removes at most: the time it holds the agent's
/// row (and, on SQLite, the writer) stays bounded however long the prefix is.
pub(crate) const RETAIN_BATCH: u32 = 1_000;

/// Events one archived retention batch holds: the memory a batch takes and the time
/// it holds the agent's row stay bounded however long the prefix is.
pub(crate) const ARCHIVE_BATCH: u32 = 1_000;

/// The archive's lines for a batch: each event with its history steps.
fn archived(
    candidate: &RetentionCandidate,
    events: Vec<switchboard_proto::InboxEvent>,
    history: Vec<(EventId, switchboard_proto::HistoryEntry)>,
) -> Vec<crate::ArchivedEvent> {
    let mut steps: std::collections::HashMap<EventId, Vec<_>> = std::collections::HashMap::new();
    for (event, step) in history {
        steps.entry(event).or_default().push(step);
    }
    events
        .into_iter()
        .map(|event| crate::ArchivedEvent {
            tenant_id: candidate.tenant,
            agent: candidate.name.clone(),
            history: steps.remove(&event.event_id).unwrap_or_default(),
            event,
        })
        .collect()
}

// Every backend with the background passes' driver has them.
store_area! {
    /// The background passes every instance runs.
    pub trait MaintenanceStore for Engine<D: MaintenanceDriver> {
        /// Expired leases back to pending (or to the quarantine at the attempt limit, I5),
        /// and pending events past `expires_at` to expired.
        // One scavenger pass, in batches of one short transaction each, until a batch
        // finds less than [`BATCH`] of both kinds.
        async fn reap(&self, now: Millis) -> StoreResult<ReapStats> {
            let d = &self.0;
            d.retrying(|| async {
                let mut stats = ReapStats::default();
                loop {
                    let mut tx = d.begin_write().await?;
                    let mut batch = return_expired(d, &mut tx, now, None).await?;
                    let expired = d.expire_events(&mut tx, now, BATCH).await?;
                    d.commit(tx, &batch.wakes).await?;
                    let more = batch.lease_expirations == u64::from(BATCH)
                        || expired.len() == BATCH as usize;
                    batch.expired = expired.len() as u64;
                    for tenant in expired {
                        batch.by_tenant.entry(tenant).or_default().expired += 1;
                    }
                    stats.add(batch);
                    if !more {
                        return Ok(stats);
                    }
                }
            })
            .await
        }

        /// Removes terminal events older than `cutoff` (advancing each low-water mark, I6)
        /// and idempotency records past their expiry. With an `archive`, each agent's
        /// events are written to it first, in batches, and an agent whose batch could not
        /// be written keeps its events ([`RetentionStats::held_back`]).
        // Removes, per agent, the longest prefix of the inbox in which every event is terminal
        // and older than `cutoff`, and moves the low-water mark to its end. Only a prefix is
        // removed, so a reader at or above the mark never misses an event silently (I6).
        // With an `archive`, nothing is removed that the archive has not taken first.
        //
        // In batches of at most [`RETAIN_BATCH`] events, one short write transaction each,
        // so a long-offline agent's first pass never holds the writer (SQLite) or its row
        // lock (PostgreSQL, MariaDB) for one huge delete. With an archive, each batch is
        // copied out first, outside any write transaction (the archive's file I/O never
        // holds the writer), and the write transaction then removes only the events still
        // exactly as they were copied ([`unchanged_through`]).
        async fn retain(
            &self,
            cutoff: Millis,
            now: Millis,
            archive: Option<&dyn ArchiveSink>,
        ) -> StoreResult<RetentionStats> {
            let d = &self.0;
            d.retrying(|| async {
                let mut stats = RetentionStats::default();
                for candidate in d.retention_candidates(cutoff).await? {
                    let agent = candidate.agent;
                    loop {
                        let copied = match archive {
                            None => None,
                            Some(archive) => match copy_out(d, &candidate, cutoff).await? {
                                None => break,
                                Some(batch) => {
                                    let events: Vec<_> =
                                        batch.iter().map(|e| e.event.clone()).collect();
                                    if let Err(why) = archive.archive(batch).await {
                                        // Nothing is removed: the agent keeps its events.
                                        stats.held_back.get_or_insert(why);
                                        break;
                                    }
                                    #[cfg(feature = "failpoints")]
                                    fail::fail_point!("retention-archived");
                                    Some(events)
                                }
                            },
                        };
                        // Lock first, compute second, in two statements (I3, I6). At READ
                        // COMMITTED a `SELECT … FOR UPDATE` that waited for a sender returns the
                        // sender's new row (`head_seq = N+1`), but any subquery of that same
                        // statement still reads the statement's old snapshot, where event N+1 does
                        // not exist: a prefix computed there would end at N+1 and the DELETE below
                        // (a new snapshot) would remove the pending event. The statement after the
                        // lock takes a snapshot in which every send that held the row has
                        // committed, and the prefix is capped at the `head_seq` read under the
                        // lock, so it covers only events that snapshot sees.
                        let mut tx = d.begin_write().await?;
                        let marks = d.marks(&mut tx, agent, true).await?;
                        let Some(mut new_low) =
                            removable_through(d, &mut tx, agent, &marks, cutoff).await?
                        else {
                            break;
                        };
                        if let Some(events) = &copied {
                            // Only what the archive took, and only while it is as it was taken.
                            new_low = unchanged_through(
                                d,
                                &mut tx,
                                agent,
                                marks.low_water,
                                new_low,
                                events,
                            )
                            .await?;
                            if new_low <= marks.low_water {
                                // Changed since it was copied (or removed by another instance):
                                // the next pass copies it again.
                                break;
                            }
                        }
                        d.delete_history_through(&mut tx, agent, new_low).await?;
                        let removed = d.delete_events_through(&mut tx, agent, new_low).await?;
                        d.raise_low_water(&mut tx, agent, new_low).await?;
                        d.commit(tx, &[]).await?;
                        stats.events_removed += removed;
                        stats.batches += 1;
                        if let Some(events) = &copied {
                            let archived =
                                events.iter().filter(|e| e.seq <= new_low).count() as u64;
                            stats.archived += archived;
                            *stats
                                .archived_by_tenant
                                .entry(candidate.tenant)
                                .or_default() += archived;
                        }
                    }
                }
                stats.idempotency_removed =
                    trim::trim(d, &trim::IDEMPOTENCY_KEYS, now.saturating_add(1)).await?;
                Ok(stats)
            })
            .await
        }

        /// Deletes `table`'s rows older than `before` (each table's own age: see
        /// [`Horizon`]), in batches; how many.
        async fn trim(&self, table: Horizon, before: Millis) -> StoreResult<u64> {
            let what = match table {
                Horizon::AuditLog => &trim::AUDIT_LOG,
                Horizon::LeaseAudit => &trim::LEASE_AUDIT,
                Horizon::FencingRejections => &trim::FENCING_REJECTIONS,
                Horizon::RevokedTokens => &trim::REVOKED_TOKENS,
                Horizon::RefreshTokens => &trim::REFRESH_TOKENS,
                Horizon::IssuedTokens => &trim::ISSUED_TOKENS,
            };
            trim::trim(&self.0, what, before).await
        }
    }
}
