//! Wake-ups across instances without LISTEN/NOTIFY: the `wakes` table.
//!
//! A write that makes wake-ups inserts them into `wakes` as the last statement of
//! its transaction ([`publish`], from the driver's `commit`), so other instances can
//! see them once it commits and never before (I1); a rollback takes them back. Every
//! instance polls the table every [`POLL`] ([`listen`]) and hands the rows of other
//! instances to its own hub; its own wake-ups it delivered itself after the commit.
//! The delay is the poll interval plus one indexed read: see ARCHITECTURE.md for
//! what was measured.
//!
//! Ids are AUTO_INCREMENT values, taken when a row is inserted, not when its
//! transaction commits: a transaction may commit after one with a higher id, so
//! "every row above the highest id seen" would skip it. The watcher therefore keeps
//! the ids below its high-water mark that it has not seen (holes: transactions still
//! committing, or rolled back) and reads them again on every poll until they appear
//! or [`HOLE_TTL`] passes. Wake-ups carry no data and are idempotent, so a late one is
//! harmless; each row is delivered once. After the watcher lost the database it
//! wakes every local subscriber once (they poll and find what they missed), as the
//! PostgreSQL listener does after it reconnects.
//!
//! Rows are pruned by id after [`KEEP`]: each watcher deletes what was below its
//! high-water mark that long ago (never an id it still waits for).

use super::MySqlDriver;
use crate::WakeOut;
use crate::{StoreResult, Wake};
use sqlx::{MySql, MySqlConnection, QueryBuilder, Row};
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often each instance reads the table.
pub(crate) const POLL: Duration = Duration::from_millis(50);
/// How long an id below the high-water mark is waited for. Longer than any commit
/// takes (a semi-synchronous replica may hold one for 10 s): a transaction inserts
/// its wake-ups right before its COMMIT.
const HOLE_TTL: Duration = Duration::from_secs(60);
/// The most holes tracked; past it the oldest (surely rolled back) are dropped.
const MAX_HOLES: usize = 1000;
/// How far below the high-water mark a starting watcher looks for holes.
const START_WINDOW: i64 = 1000;
/// Rows read per query.
const BATCH: i64 = 1000;
/// How long rows stay, and how often a watcher prunes.
const KEEP: Duration = Duration::from_secs(300);
const PRUNE_EVERY: Duration = Duration::from_secs(60);
const PRUNE_BATCH: u64 = 5000;
/// Wake-ups per INSERT (4 parameters each).
const WAKES_PER_INSERT: usize = 250;

/// Inserts `wakes` in `conn`'s transaction, to be seen by the other instances when
/// it commits.
pub(super) async fn publish(
    conn: &mut MySqlConnection,
    instance: &str,
    wakes: &[Wake],
) -> StoreResult<()> {
    for chunk in wakes.chunks(WAKES_PER_INSERT) {
        let mut insert = QueryBuilder::<MySql>::new(
            "INSERT INTO wakes (instance, tenant_id, agent_id, cursor_hint) ",
        );
        insert.push_values(chunk, |mut row, w| {
            row.push_bind(instance)
                .push_bind(w.tenant_id)
                .push_bind(w.agent_id)
                .push_bind(w.cursor_hint as i64);
        });
        insert.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// What a watcher knows of the table.
#[derive(Debug)]
pub(crate) struct Watch {
    /// The highest id read.
    high: i64,
    /// Ids below `high` not read yet, with when they were first missed.
    holes: BTreeMap<i64, Instant>,
    /// `high` at each prune, to find what it was [`KEEP`] ago.
    marks: VecDeque<(Instant, i64)>,
    last_prune: Instant,
}

impl Watch {
    /// A watch whose table reads `present` (ascending) between `floor` (exclusive)
    /// and its highest id `high`: the missing ids in between are holes.
    fn new(high: i64, floor: i64, present: &[i64], now: Instant) -> Self {
        let mut watch = Self {
            high: floor,
            holes: BTreeMap::new(),
            marks: VecDeque::new(),
            last_prune: now,
        };
        watch.saw_new(present.iter().copied(), now);
        watch.high = watch.high.max(high);
        watch
    }

    /// Takes ids read above `high`, ascending: the ids skipped on the way are holes.
    fn saw_new(&mut self, ids: impl IntoIterator<Item = i64>, now: Instant) {
        for id in ids {
            if id <= self.high {
                continue;
            }
            // The ids nearest below `id` were taken last: keep those if not all fit.
            let first = (self.high + 1).max(id - MAX_HOLES as i64);
            for hole in first..id {
                self.holes.insert(hole, now);
            }
            self.high = id;
        }
        while self.holes.len() > MAX_HOLES {
            self.holes.pop_first();
        }
    }

    /// Whether `id` was a hole (and so is new); it is one no longer.
    fn filled(&mut self, id: i64) -> bool {
        self.holes.remove(&id).is_some()
    }

    /// Forgets holes waited for longer than [`HOLE_TTL`]: rolled back.
    fn expire(&mut self, now: Instant) {
        self.holes
            .retain(|_, since| now.duration_since(*since) < HOLE_TTL);
    }

    /// When a prune is due, the id below which rows may go: `high` as it was
    /// [`KEEP`] ago, and below every hole.
    fn prune_below(&mut self, now: Instant) -> Option<i64> {
        if now.duration_since(self.last_prune) < PRUNE_EVERY {
            return None;
        }
        self.last_prune = now;
        self.marks.push_back((now, self.high));
        let mut below = None;
        while let Some(&(at, high)) = self.marks.front() {
            if now.duration_since(at) < KEEP {
                break;
            }
            below = Some(high);
            self.marks.pop_front();
        }
        let lowest_hole = self.holes.keys().next().copied().unwrap_or(i64::MAX);
        below.map(|b| b.min(lowest_hole))
    }

    /// The table as it is now: its highest id, and the holes of the last
    /// [`START_WINDOW`] ids (transactions that may still commit).
    pub(super) async fn start(conn: &mut MySqlConnection) -> StoreResult<Self> {
        let (high, low): (i64, i64) =
            sqlx::query_as("SELECT COALESCE(MAX(id), 0), COALESCE(MIN(id), 1) FROM wakes")
                .fetch_one(&mut *conn)
                .await?;
        let floor = (low - 1).max(high - START_WINDOW);
        let present: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM wakes WHERE id > ? AND id <= ? ORDER BY id")
                .bind(floor)
                .bind(high)
                .fetch_all(&mut *conn)
                .await?;
        Ok(Self::new(high, floor, &present, Instant::now()))
    }

    /// One poll: the rows above `high` and the holes that appeared, delivered to
    /// `out` unless `me` wrote them; then expiry and pruning. Returns whether a full
    /// batch came (read again at once).
    async fn poll(
        &mut self,
        conn: &mut MySqlConnection,
        me: &str,
        out: &WakeOut,
    ) -> StoreResult<bool> {
        let now = Instant::now();
        let rows = sqlx::query(
            "SELECT id, instance, tenant_id, agent_id, cursor_hint FROM wakes \
             WHERE id > ? ORDER BY id LIMIT ?",
        )
        .bind(self.high)
        .bind(BATCH)
        .fetch_all(&mut *conn)
        .await?;
        let full = rows.len() as i64 == BATCH;
        let mut wakes = Vec::new();
        let mut ids = Vec::with_capacity(rows.len());
        for row in &rows {
            ids.push(row.try_get::<i64, _>("id")?);
            collect(row, me, &mut wakes)?;
        }
        // Holes first, then the new rows' gaps: a gap found now is read next time.
        let holes: Vec<i64> = self.holes.keys().copied().collect();
        for chunk in holes.chunks(500) {
            let mut q = QueryBuilder::<MySql>::new(
                "SELECT id, instance, tenant_id, agent_id, cursor_hint FROM wakes WHERE id IN (",
            );
            let mut list = q.separated(", ");
            for id in chunk {
                list.push_bind(*id);
            }
            q.push(")");
            for row in q.build().fetch_all(&mut *conn).await? {
                if self.filled(row.try_get("id")?) {
                    collect(&row, me, &mut wakes)?;
                }
            }
        }
        self.saw_new(ids, now);
        out.wake(&wakes);
        self.expire(now);
        if let Some(below) = self.prune_below(now) {
            prune(conn, below).await?;
        }
        Ok(full)
    }
}

/// `row`'s wake-up, unless this instance (`me`) wrote it.
fn collect(row: &sqlx::mysql::MySqlRow, me: &str, wakes: &mut Vec<Wake>) -> StoreResult<()> {
    let instance: String = row.try_get("instance")?;
    if instance == me {
        return Ok(());
    }
    wakes.push(Wake {
        tenant_id: row.try_get("tenant_id")?,
        agent_id: row.try_get("agent_id")?,
        cursor_hint: row.try_get::<i64, _>("cursor_hint")?.max(0) as u64,
    });
    Ok(())
}

/// Deletes the rows below `below`, a batch at a time (several instances may prune
/// at once: they only wait for each other's batch).
async fn prune(conn: &mut MySqlConnection, below: i64) -> StoreResult<()> {
    loop {
        let done = sqlx::query("DELETE FROM wakes WHERE id < ? LIMIT ?")
            .bind(below)
            .bind(PRUNE_BATCH as i64)
            .execute(&mut *conn)
            .await?;
        if done.rows_affected() < PRUNE_BATCH {
            return Ok(());
        }
    }
}

/// Delivers other instances' wake-ups to the store's sink until `stop`. The watch was taken
/// when the store opened, so nothing committed after that is missed; after losing
/// the database it goes on where it was and wakes every local subscriber once.
pub(super) async fn listen(store: &MySqlDriver, stop: CancellationToken) {
    let mut watch = store.take_watch();
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        let result = async {
            let mut conn = store.pool().acquire().await?;
            let w = match watch.as_mut() {
                Some(w) => w,
                None => watch.insert(Watch::start(&mut conn).await?),
            };
            if failures > 0 {
                // Whatever was written while this instance could not read: look again.
                store.wakes_out().wake_all();
                tracing::info!("reading other instances' wake-ups again");
                failures = 0;
            }
            loop {
                let full = w
                    .poll(&mut conn, store.instance(), store.wakes_out())
                    .await?;
                if full {
                    continue;
                }
                tokio::select! {
                    _ = stop.cancelled() => return Ok::<_, crate::StoreError>(()),
                    _ = tokio::time::sleep(POLL) => {}
                }
            }
        }
        .await;
        let Err(e) = result else { return };
        failures += 1;
        if failures == 1 {
            tracing::warn!(error = %e, "cannot read other instances' wake-ups; retrying");
        }
        let wait = Duration::from_millis(200 * u64::from(failures.min(10)));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_id_seen_first_leaves_a_hole_until_it_commits() {
        let t0 = Instant::now();
        let mut w = Watch::new(0, 0, &[], t0);
        w.saw_new([1, 2, 4, 7], t0);
        assert_eq!(w.high, 7);
        assert_eq!(w.holes.keys().copied().collect::<Vec<_>>(), [3, 5, 6]);
        // 5 commits: delivered once, and never again.
        assert!(w.filled(5));
        assert!(!w.filled(5));
        assert!(!w.filled(7), "a row seen above the mark is no hole");
        // Rows at or below the mark come only through the holes.
        w.saw_new([6, 8], t0);
        assert_eq!(w.high, 8);
        assert_eq!(w.holes.keys().copied().collect::<Vec<_>>(), [3, 6]);
        // A hole nobody fills (a rollback) is dropped after HOLE_TTL.
        w.expire(t0 + HOLE_TTL - Duration::from_millis(1));
        assert_eq!(w.holes.len(), 2);
        w.expire(t0 + HOLE_TTL);
        assert!(w.holes.is_empty());
    }

    #[test]
    fn a_starting_watch_waits_for_the_missing_ids_of_the_tail() {
        let t0 = Instant::now();
        let w = Watch::new(10, 4, &[5, 6, 8, 10], t0);
        assert_eq!(w.high, 10);
        assert_eq!(w.holes.keys().copied().collect::<Vec<_>>(), [7, 9]);
        let empty = Watch::new(0, 0, &[], t0);
        assert_eq!((empty.high, empty.holes.len()), (0, 0));
    }

    #[test]
    fn holes_are_bounded_keeping_the_newest() {
        let t0 = Instant::now();
        let mut w = Watch::new(0, 0, &[], t0);
        w.saw_new([10 * MAX_HOLES as i64], t0);
        assert_eq!(w.holes.len(), MAX_HOLES);
        assert_eq!(w.holes.keys().next(), Some(&(9 * MAX_HOLES as i64)));
        w.saw_new([10 * MAX_HOLES as i64 + 5], t0);
        assert_eq!(w.holes.len(), MAX_HOLES);
        assert_eq!(w.holes.keys().last(), Some(&(10 * MAX_HOLES as i64 + 4)));
    }

    #[test]
    fn rows_are_pruned_after_keep_never_above_a_hole() {
        let t0 = Instant::now();
        let mut w = Watch::new(0, 0, &[], t0);
        w.saw_new([100], t0);
        w.holes.clear();
        assert_eq!(w.prune_below(t0), None, "not due yet");
        let t1 = t0 + PRUNE_EVERY;
        assert_eq!(w.prune_below(t1), None, "nothing is KEEP old yet");
        w.saw_new([200], t1);
        w.holes.clear();
        let t2 = t1 + KEEP;
        assert_eq!(w.prune_below(t2), Some(100), "high as it was KEEP ago");
        w.saw_new([300], t2);
        w.holes.insert(150, t2);
        assert_eq!(w.prune_below(t2 + KEEP), Some(150), "below the lowest hole");
    }
}
