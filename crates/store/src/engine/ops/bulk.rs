//! Operator bulk actions (replay, release, purge over ids or a filter), once for
//! every backend. An action runs either at once, in one transaction ([`bulk`], for
//! ids or a small filter), or as a job (`jobs.rs`): an audit row whose `count` grows
//! with each batch, each batch its own transaction, so other writers get the
//! database (SQLite: the single writer connection) between batches.
//!
//! A batch changes each event with a history entry, and wakes each agent concerned
//! once, at its largest changed sequence number. Where several writers share the
//! database, an event changed concurrently (an ack, a claim, another job) must be
//! re-checked against the action's statuses after that change, never changed twice:
//! the portable batch re-checks each event's status in its `UPDATE`; PostgreSQL's
//! locks them all in the one statement that changes them (`postgres/bulk.rs`).

use super::OpsStatements;
use crate::clock::Millis;
use crate::engine::events::EventStatements;
use crate::rows::parse_id;
use crate::*;
use async_trait::async_trait;
use std::collections::BTreeMap;
use switchboard_proto::JobState;

/// The ids a batch covers: `after < id <= upto`, at most `limit` of them, in id
/// order. The default covers every matching event.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Window {
    pub(crate) after: Option<EventId>,
    pub(crate) upto: Option<EventId>,
    pub(crate) limit: Option<u64>,
}

/// A matching event as the portable batch found it (its `status` then).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) seq: i64,
    pub(crate) status: String,
}

/// An event a batch changed.
#[derive(Debug, Clone)]
pub(crate) struct Changed {
    pub(crate) id: String,
    pub(crate) agent: String,
    pub(crate) seq: i64,
}

/// What a batch changed; `full`: it reached its window's limit, so the window may
/// hold more.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) changed: Vec<Changed>,
    pub(crate) full: bool,
}

/// A job's part of its audit row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewJob<'a> {
    pub(crate) state: JobState,
    pub(crate) total: u64,
    pub(crate) rate: Option<u32>,
    /// The instance running it (see `Driver::job_owner`).
    pub(crate) owner: Option<&'a str>,
}

/// An audit row to write: an action done at once (`job: None`), or a job.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NewAudit<'a> {
    pub(crate) tenant: TenantId,
    pub(crate) scope: &'a Scope<'a>,
    pub(crate) actor: &'a Actor,
    pub(crate) count: u64,
    pub(crate) job: Option<NewJob<'a>>,
    pub(crate) now: Millis,
}

/// The statements of the bulk actions (`store/statements/bulk.rs`), in `tx`.
#[async_trait]
pub(crate) trait BulkStatements: OpsStatements + EventStatements {
    /// Appends ` FROM events e JOIN agents a … WHERE` the events of `tenant` that
    /// `scope` names and its action applies to, with ids in `window` (not its limit).
    fn push_scope(
        qb: &mut sqlx::QueryBuilder<Self::Db>,
        tenant: TenantId,
        scope: &Scope<'_>,
        window: &Window,
    );
    /// How many events `scope` covers now, and the largest id among them.
    async fn count_matching(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        scope: &Scope<'_>,
    ) -> StoreResult<(u64, Option<EventId>)>;
    /// The matching events of `window`, in id order (no locks).
    async fn find_targets(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        scope: &Scope<'_>,
        window: &Window,
    ) -> StoreResult<Vec<Target>>;
    /// Applies `action` to the event unless its status is no longer the one it was
    /// found with; whether it did.
    async fn apply_to(
        &self,
        tx: &mut Self::Tx,
        action: BulkAction,
        target: &Target,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Writes the row and returns its id.
    async fn insert_audit(&self, tx: &mut Self::Tx, row: &NewAudit<'_>) -> StoreResult<i64>;
}

/// Where a backend's shape differs: each method has the portable default.
#[async_trait]
pub(crate) trait BulkDriver: BulkStatements {
    /// Applies `scope.action` to the matching events of `window`, with a history
    /// entry each. Portable: find them, then change each whose status is still the
    /// one it was found with (the `UPDATE` re-checks it under the row's write lock).
    /// PostgreSQL: one statement that locks and changes them and writes the history.
    async fn apply_batch(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        scope: &Scope<'_>,
        window: &Window,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Batch> {
        let targets = self.find_targets(tx, tenant, scope, window).await?;
        let verb = verb(scope.action);
        let mut changed = Vec::with_capacity(targets.len());
        let actor = actor.to_string();
        for target in &targets {
            // Before the change: a replay resets the attempts its claim step names.
            self.move_steps(tx, &target.id).await?;
            if self.apply_to(tx, scope.action, target, now).await? {
                self.history(tx, &target.id, now, verb, &actor, None)
                    .await?;
                changed.push(Changed {
                    id: target.id.clone(),
                    agent: target.agent.clone(),
                    seq: target.seq,
                });
            }
        }
        // An event skipped because it changed meanwhile no longer matches: the
        // window is exhausted only when fewer than the limit were found.
        let full = window.limit.is_some_and(|l| targets.len() as u64 >= l);
        Ok(Batch { changed, full })
    }
}

/// An action's step in an event's history.
pub(crate) fn verb(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Replay => "replayed",
        BulkAction::Release => "released",
        BulkAction::Purge => "purged",
    }
}

/// What [`apply`] did.
pub(crate) struct Applied {
    pub(crate) count: u64,
    /// The largest id changed.
    pub(crate) last: Option<EventId>,
    /// One per agent, at its largest changed sequence number.
    pub(crate) wakes: Vec<Wake>,
    pub(crate) full: bool,
}

/// Applies `scope.action` to the matching events of `window` (see
/// [`BulkDriver::apply_batch`]).
pub(crate) async fn apply<D: BulkDriver>(
    d: &D,
    tx: &mut D::Tx,
    tenant: TenantId,
    scope: &Scope<'_>,
    window: &Window,
    actor: &Actor,
    now: Millis,
) -> StoreResult<Applied> {
    let batch = d.apply_batch(tx, tenant, scope, window, actor, now).await?;
    let mut wakes: BTreeMap<&str, Wake> = BTreeMap::new();
    let mut last: Option<&str> = None;
    for e in &batch.changed {
        let seq = e.seq as u64;
        let wake = Wake {
            tenant_id: tenant,
            agent_id: parse_id(&e.agent)?,
            cursor_hint: seq,
        };
        wakes
            .entry(&e.agent)
            .and_modify(|w| w.cursor_hint = w.cursor_hint.max(seq))
            .or_insert(wake);
        // A batch need not return its events in order: the last is the largest id.
        // Ids are UUID text of one shape, which any collation orders as bytes, as
        // `e.id > $after` does.
        if last.is_none_or(|l| l < e.id.as_str()) {
            last = Some(&e.id);
        }
    }
    Ok(Applied {
        count: batch.changed.len() as u64,
        last: last.map(parse_id).transpose()?,
        wakes: wakes.into_values().collect(),
        full: batch.full,
    })
}
