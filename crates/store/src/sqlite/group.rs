//! Group commit on the single writer.
//!
//! Every write transaction of a SQLite store is a *member* of a *batch*: one physical
//! transaction (`BEGIN IMMEDIATE … COMMIT`) on the one writer connection. A member
//! has the writer to itself while it runs its statements (the batch's lock), so the
//! members of a batch run one after the other, each seeing the ones before it: the
//! order of the batch is the serial order, as it was when each had its own commit.
//! What changes is when the work becomes durable: a member that finishes while other
//! writers are queued for the lock does not commit. It leaves its work in the open
//! transaction and waits; the last member of the batch (one that finds nobody
//! waiting), or the batch's *closer*, commits them all with one fsync and tells each
//! member the outcome. A member's `commit` returns only after the physical commit
//! that holds its work, so nothing is answered, and no wake-up sent, before it is
//! durable and visible to readers (I1).
//!
//! A member that fails keeps its own outcome: every member after the first of its
//! batch runs inside a `SAVEPOINT`, and a member dropped without committing (an
//! error, a test hook's abort, a cancelled request) rolls back to it, so the others'
//! work stays. The first member of a batch needs no savepoint: with nobody before it,
//! its failure rolls back the whole (empty) batch. A failure that ends the physical
//! transaction itself (the commit fails, a rollback to the savepoint fails) fails
//! every member still waiting with 503 `unavailable`: nothing of theirs was written.
//!
//! Nobody is left waiting for a commit that never comes: the first member to defer
//! spawns the batch's closer, which queues for the lock (FIFO) behind the writers
//! that were waiting, and commits whatever is still open when its turn comes. A
//! member whose caller went away (a client disconnected while it waited) still has
//! its work committed, and its wake-ups delivered: every member's wake-ups go to the
//! store's sink once its commit is done, whoever is still waiting.
//!
//! With nobody else writing, a member commits at once: uncontended latency is that
//! of a plain transaction.

use crate::{StoreError, StoreResult, Wake};
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use tokio::sync::{Mutex, OwnedMutexGuard, oneshot};

/// At most this many members wait in one batch; the next one commits it.
const MAX_MEMBERS: usize = 256;

/// How long the closer of a batch that only [`Member::commit_later`] left open waits
/// before it queues: time for the same request's next transaction to join it.
const LATER: std::time::Duration = std::time::Duration::from_millis(2);

/// The single writer with group commit.
pub(crate) struct Group {
    /// The pool of the one writer connection.
    pool: SqlitePool,
    batch: Arc<Mutex<Batch>>,
    /// Writers queued for the batch's lock: while there are any, a finishing member
    /// leaves its commit to the batch.
    waiting: AtomicUsize,
    /// Off: every member commits alone (the store's setting; the bench compares).
    enabled: AtomicBool,
    /// Physical commits, for tests and the bench.
    commits: AtomicU64,
    /// Where the members' wake-ups go once their commit is done (the store's
    /// sink), whether or not their caller still waits.
    wakes_out: crate::WakeOut,
}

#[derive(Default)]
struct Batch {
    /// The open physical transaction, while members wait for its commit.
    tx: Option<Transaction<'static, Sqlite>>,
    /// The members whose work is in `tx`, waiting for its commit.
    done: Vec<Done>,
    /// A member was dropped inside its savepoint: roll back to it before anything
    /// else runs on the writer.
    undo: bool,
    /// Counts batches, so a closer commits only its own.
    generation: u64,
    /// This batch's closer was spawned.
    closer: bool,
}

struct Done {
    tell: oneshot::Sender<StoreResult<()>>,
    wakes: Vec<Wake>,
}

/// Decrements [`Group::waiting`] however the wait for the lock ends (a cancelled
/// request drops it).
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Group {
    pub(crate) fn new(pool: SqlitePool, wakes_out: crate::WakeOut) -> Arc<Self> {
        Arc::new(Self {
            pool,
            batch: Arc::default(),
            waiting: AtomicUsize::new(0),
            enabled: AtomicBool::new(true),
            commits: AtomicU64::new(0),
            wakes_out,
        })
    }

    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::SeqCst);
    }

    /// Physical commits so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::SeqCst)
    }

    /// The batch's lock, with a rollback a dropped member left behind done first.
    async fn lock(&self, queued: bool) -> OwnedMutexGuard<Batch> {
        let mut batch = if queued {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            let _queued = Queued(&self.waiting);
            self.batch.clone().lock_owned().await
        } else {
            self.batch.clone().lock_owned().await
        };
        if std::mem::take(&mut batch.undo) {
            let undone = match batch.tx.as_mut() {
                Some(tx) => sqlx::query("ROLLBACK TO member")
                    .execute(&mut **tx)
                    .await
                    .map(drop),
                None => Ok(()),
            };
            if let Err(e) = undone {
                self.fail(&mut batch, e.into()).await;
            }
        }
        batch
    }

    /// Starts a member: the writer to itself until it commits or is dropped.
    pub(crate) async fn begin(self: &Arc<Self>) -> StoreResult<Member> {
        let mut batch = self.lock(true).await;
        let savepoint = match batch.tx.as_mut() {
            None => {
                batch.tx = Some(self.pool.begin_with("BEGIN IMMEDIATE").await?);
                false
            }
            Some(tx) => {
                if let Err(e) = sqlx::query("SAVEPOINT member").execute(&mut **tx).await {
                    let e = StoreError::from(e);
                    self.fail(&mut batch, echo(&e)).await;
                    return Err(e);
                }
                true
            }
        };
        Ok(Member {
            batch: Some(batch),
            savepoint,
            group: self.clone(),
        })
    }

    /// Commits the open batch (the caller holds its lock) and tells its members.
    async fn commit(&self, batch: &mut Batch) -> StoreResult<()> {
        let Some(tx) = batch.tx.take() else {
            return Ok(());
        };
        batch.generation += 1;
        batch.closer = false;
        let done = std::mem::take(&mut batch.done);
        let result = tx.commit().await.map_err(StoreError::from);
        if result.is_ok() {
            self.commits.fetch_add(1, Ordering::SeqCst);
        }
        self.tell(done, &result);
        result
    }

    /// The physical transaction is lost: every waiting member fails with `e`.
    async fn fail(&self, batch: &mut Batch, e: StoreError) {
        batch.generation += 1;
        batch.closer = false;
        if let Some(tx) = batch.tx.take() {
            let _ = tx.rollback().await;
        }
        let done = std::mem::take(&mut batch.done);
        self.tell(done, &Err(e));
    }

    fn tell(&self, done: Vec<Done>, result: &StoreResult<()>) {
        for member in done {
            let answer = match result {
                Ok(()) => Ok(()),
                Err(e) => Err(echo(e)),
            };
            if result.is_ok() {
                // Committed: its wake-ups go out now, even if its caller went away.
                self.wakes_out.wake(&member.wakes);
            }
            let _ = member.tell.send(answer);
        }
    }

    /// Leaves a member's work in the open batch, to be told at its commit; the first
    /// to do so spawns the batch's closer (queuing after `delay`).
    fn leave(self: &Arc<Self>, batch: &mut Batch, done: Done, delay: std::time::Duration) {
        batch.done.push(done);
        if !batch.closer {
            batch.closer = true;
            tokio::spawn(self.clone().close(batch.generation, delay));
        }
    }

    /// Commits batch `generation` if it is still open when the closer's turn comes
    /// (after `delay`).
    async fn close(self: Arc<Self>, generation: u64, delay: std::time::Duration) {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut batch = self.lock(false).await;
        if batch.generation == generation {
            let _ = self.commit(&mut batch).await;
        }
    }
}

/// The error a member that shared a failed commit gets (the committer has the
/// database's own): nothing of its work was written, a retry may succeed.
fn echo(e: &StoreError) -> StoreError {
    match e {
        StoreError::StorageFull(source) => {
            StoreError::StorageFull(sqlx::Error::Protocol(source.to_string()))
        }
        other => StoreError::Aborted(format!("the commit this change shared failed: {other}")),
    }
}

/// One write transaction of a batch; it derefs to the writer connection.
pub(crate) struct Member {
    batch: Option<OwnedMutexGuard<Batch>>,
    savepoint: bool,
    group: Arc<Group>,
}

impl Member {
    /// Commits this member's work: at once if nobody waits for the writer, else with
    /// the rest of its batch. Returns once the commit that holds it is done.
    pub(crate) async fn commit(mut self, wakes: &[Wake]) -> StoreResult<()> {
        let mut batch = self.batch.take().expect("a member commits once");
        let group = self.group.clone();
        let defer = group.enabled.load(Ordering::SeqCst)
            && group.waiting.load(Ordering::SeqCst) > 0
            && batch.done.len() < MAX_MEMBERS;
        if !defer {
            let committed = group.commit(&mut batch).await;
            if committed.is_ok() {
                group.wakes_out.wake(wakes);
            }
            return committed;
        }
        let (tell, told) = oneshot::channel();
        group.leave(
            &mut batch,
            Done {
                tell,
                wakes: wakes.to_vec(),
            },
            std::time::Duration::ZERO,
        );
        drop(batch);
        told.await.unwrap_or_else(|_| {
            Err(StoreError::Aborted(
                "the group commit ended without an answer".into(),
            ))
        })
    }

    /// Leaves this member's work to its batch without waiting for the commit: for
    /// work whose durability buys nothing because one process owns the file (an
    /// idempotency key in flight, forgotten at start anyway). The request's next
    /// transaction usually joins the same batch, so both cost one commit; if none
    /// comes, the batch's closer commits it shortly ([`LATER`]). Off (group commit
    /// disabled): commits now.
    pub(crate) async fn commit_later(mut self) -> StoreResult<()> {
        let group = self.group.clone();
        if !group.enabled.load(Ordering::SeqCst) {
            return self.commit(&[]).await;
        }
        let mut batch = self.batch.take().expect("a member commits once");
        // Nobody waits for the answer: a failed commit fails the request's own next
        // transaction, which shares it, or loses only the key's in-flight mark.
        let (tell, _) = oneshot::channel();
        let done = Done {
            tell,
            wakes: Vec::new(),
        };
        group.leave(&mut batch, done, LATER);
        Ok(())
    }

    fn tx(&self) -> &Transaction<'static, Sqlite> {
        self.batch
            .as_ref()
            .and_then(|b| b.tx.as_ref())
            .expect("a running member has the open transaction")
    }

    fn tx_mut(&mut self) -> &mut Transaction<'static, Sqlite> {
        self.batch
            .as_mut()
            .and_then(|b| b.tx.as_mut())
            .expect("a running member has the open transaction")
    }
}

impl Drop for Member {
    /// Dropped without a commit: its work goes. The first member of a batch takes the
    /// transaction with it (sqlx rolls it back); a later one leaves a rollback to its
    /// savepoint for the next holder of the lock (the batch's closer at the latest).
    fn drop(&mut self) {
        if let Some(mut batch) = self.batch.take() {
            if self.savepoint {
                batch.undo = true;
            } else {
                batch.tx = None;
                batch.generation += 1;
            }
        }
    }
}

impl std::ops::Deref for Member {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        self.tx()
    }
}

impl std::ops::DerefMut for Member {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        self.tx_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
    use std::str::FromStr;
    use std::time::Duration;
    use switchboard_proto::{AgentId, TenantId};

    /// A WAL file with one table, its one writer and a reader pool.
    async fn file(dir: &tempfile::TempDir) -> (SqlitePool, SqlitePool) {
        let url = format!("sqlite://{}/g.db", dir.path().display());
        let opts = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(opts.clone())
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY)")
            .execute(&write)
            .await
            .unwrap();
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(opts.read_only(true))
            .await
            .unwrap();
        (write, read)
    }

    async fn insert(m: &mut Member, id: i64) {
        sqlx::query("INSERT INTO t (id) VALUES (?)")
            .bind(id)
            .execute(&mut **m)
            .await
            .unwrap();
    }

    async fn ids(read: &SqlitePool) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM t ORDER BY id")
            .fetch_all(read)
            .await
            .unwrap()
    }

    async fn seen(read: &SqlitePool, id: i64) -> bool {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM t WHERE id = ?")
            .bind(id)
            .fetch_one(read)
            .await
            .unwrap()
            == 1
    }

    /// Many writers at once, every seventh failing after its insert: each commit
    /// returns only once its row is visible to a reader, the failed ones leave
    /// nothing, the others all stay, and they shared commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn writers_that_queue_share_a_commit_and_keep_their_own_outcome() {
        for grouped in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let (write, read) = file(&dir).await;
            let group = Group::new(write, crate::WakeOut::default());
            group.set_enabled(grouped);
            let mut expected = Vec::new();
            for round in 0..3_i64 {
                let mut tasks = tokio::task::JoinSet::new();
                for i in 0..48_i64 {
                    let id = round * 1000 + i;
                    let (group, read) = (group.clone(), read.clone());
                    tasks.spawn(async move {
                        let mut m = group.begin().await.unwrap();
                        insert(&mut m, id).await;
                        tokio::task::yield_now().await;
                        if i % 7 == 3 {
                            drop(m);
                            return None;
                        }
                        m.commit(&[]).await.unwrap();
                        assert!(seen(&read, id).await, "{id} answered before it was visible");
                        Some(id)
                    });
                }
                while let Some(done) = tasks.join_next().await {
                    expected.extend(done.unwrap());
                }
            }
            expected.sort_unstable();
            assert_eq!(ids(&read).await, expected, "grouped: {grouped}");
            let commits = group.commits() as usize;
            if grouped {
                assert!(
                    commits < expected.len(),
                    "{commits} commits for {} writers",
                    expected.len()
                );
            } else {
                assert_eq!(commits, expected.len());
            }
        }
    }

    async fn until(what: impl Fn() -> bool) {
        for _ in 0..1000 {
            if what() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("timed out");
    }

    /// A sink that keeps what it was given.
    #[derive(Default)]
    struct Heard(std::sync::Mutex<Vec<Wake>>);

    impl crate::WakeSink for Heard {
        fn wake(&self, wakes: &[Wake]) {
            self.0.lock().unwrap().extend_from_slice(wakes);
        }
        fn wake_all(&self) {}
    }

    /// A member whose caller went away while it waited for its group: its work is
    /// committed with the group, and its wake-ups reach the store's sink.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_whose_caller_went_away_is_committed_and_its_wakes_sent() {
        let dir = tempfile::tempdir().unwrap();
        let (write, read) = file(&dir).await;
        let heard = Arc::new(Heard::default());
        let out = crate::WakeOut::default();
        out.set(heard.clone());
        let group = Group::new(write, out);
        let wake = Wake {
            tenant_id: TenantId::new(),
            agent_id: AgentId::new(),
            cursor_hint: 7,
        };

        let mut a = group.begin().await.unwrap();
        let b = tokio::spawn({
            let group = group.clone();
            async move {
                let mut b = group.begin().await.unwrap();
                insert(&mut b, 2).await;
                b.commit(&[wake]).await
            }
        });
        until(|| group.waiting.load(Ordering::SeqCst) == 1).await;
        let (begun, c_begun) = oneshot::channel();
        let (go, c_go) = oneshot::channel::<()>();
        let c = tokio::spawn({
            let group = group.clone();
            async move {
                let mut c = group.begin().await.unwrap();
                begun.send(()).unwrap();
                c_go.await.unwrap();
                insert(&mut c, 3).await;
                c.commit(&[]).await
            }
        });
        until(|| group.waiting.load(Ordering::SeqCst) == 2).await;
        insert(&mut a, 1).await;
        // Writers wait: a's commit waits for its group.
        let a = tokio::spawn(a.commit(&[]));
        // c has the writer, so b has left its work to the group: b's caller goes.
        c_begun.await.unwrap();
        b.abort();
        assert!(b.await.unwrap_err().is_cancelled());
        assert!(
            ids(&read).await.is_empty(),
            "nothing is visible before the commit"
        );
        go.send(()).unwrap();
        c.await.unwrap().unwrap();
        a.await.unwrap().unwrap();
        assert_eq!(ids(&read).await, [1, 2, 3]);
        assert_eq!(group.commits(), 1, "one commit for the three");
        assert_eq!(
            *heard.0.lock().unwrap(),
            [wake],
            "b's wake-up was delivered, once"
        );
    }

    /// A member that fails after others left their work in the open transaction
    /// rolls back to its savepoint: theirs stays, and the next one still commits it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failing_member_in_the_middle_of_a_group_loses_only_its_own_work() {
        let dir = tempfile::tempdir().unwrap();
        let (write, read) = file(&dir).await;
        let group = Group::new(write, crate::WakeOut::default());
        let mut a = group.begin().await.unwrap();
        let b = tokio::spawn({
            let group = group.clone();
            async move {
                let mut b = group.begin().await.unwrap();
                insert(&mut b, 2).await;
                // A duplicate key: the statement fails, the member is dropped.
                let dup = sqlx::query("INSERT INTO t (id) VALUES (1)")
                    .execute(&mut *b)
                    .await;
                assert!(dup.is_err());
            }
        });
        until(|| group.waiting.load(Ordering::SeqCst) == 1).await;
        insert(&mut a, 1).await;
        let a = tokio::spawn(a.commit(&[]));
        b.await.unwrap();
        a.await.unwrap().unwrap();
        assert_eq!(ids(&read).await, [1], "b's row went, a's stayed");
        let mut d = group.begin().await.unwrap();
        insert(&mut d, 4).await;
        d.commit(&[]).await.unwrap();
        assert_eq!(ids(&read).await, [1, 4]);
    }

    /// Work left with `commit_later` shares the next member's commit; alone, the
    /// closer commits it soon after.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_committed_later_joins_the_next_commit_or_is_closed_soon() {
        let dir = tempfile::tempdir().unwrap();
        let (write, read) = file(&dir).await;
        let group = Group::new(write, crate::WakeOut::default());
        let mut key = group.begin().await.unwrap();
        insert(&mut key, 1).await;
        key.commit_later().await.unwrap();
        let mut change = group.begin().await.unwrap();
        insert(&mut change, 2).await;
        change.commit(&[]).await.unwrap();
        assert_eq!(ids(&read).await, [1, 2]);
        assert_eq!(group.commits(), 1, "one commit for both");

        let mut alone = group.begin().await.unwrap();
        insert(&mut alone, 3).await;
        alone.commit_later().await.unwrap();
        until(|| group.commits() == 2).await;
        assert_eq!(ids(&read).await, [1, 2, 3]);
    }
}
