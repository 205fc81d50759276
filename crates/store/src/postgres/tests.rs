//! The PostgreSQL backend on a real server: `SWITCHBOARD_TEST_POSTGRES` is an admin
//! URL (`cargo xtask test` sets it). Each test makes its own database `sb_t_pg_…`.
//! The driver suite (`store/engine/suite`) and the HTTP conformance suite run on
//! PostgreSQL too; these are the backend's own: migrations under the statement
//! limit (`store/migrate.rs`), and whole transactions run again after a deadlock or
//! a serialization failure (`retry_transaction`).

use super::*;
use crate::engine::Driver;
use crate::engine::suite::message;
use crate::migrate::fixture::{OldRows, until_finished};
use crate::migrate::{CREATED_ROWS, OpenOptions, Ran, run_steps};
use crate::testing::ServerDb;
use crate::{DirectoryStore, RetryCount, SendStore};
use sqlx::migrate::{Migrate, MigrateError};
use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The statement limit of the upgrade tests' pooled sessions (15 s in production):
/// the old path ran the migrations under the pool's limit.
const LIMIT: Duration = Duration::from_millis(150);
/// `created` rows of the big database: their one DELETE took 0.5–0.7 s on the
/// 2-core machine, several times [`LIMIT`] (seeding them takes about 3.5 s).
const BIG: i64 = 600_000;

/// A database of its own on the test server.
struct TestDb(ServerDb<Postgres>);

impl TestDb {
    async fn new() -> Self {
        Self(ServerDb::create("SWITCHBOARD_TEST_POSTGRES", "pg").await)
    }

    fn url(&self) -> &str {
        &self.0.url
    }

    /// A pool with no statement limit, for the test's own statements.
    async fn pool(&self) -> PgPool {
        PgPool::connect(self.url()).await.expect("connect")
    }

    /// A pool whose sessions have [`LIMIT`], as the store's had.
    async fn limited_pool(&self) -> PgPool {
        let limit = format!("{}ms", LIMIT.as_millis());
        let opts = PgConnectOptions::from_str(self.url())
            .expect("url")
            .options([("statement_timeout", limit.as_str())]);
        PgPoolOptions::new()
            .max_connections(1)
            .connect_with(opts)
            .await
            .expect("connect")
    }

    async fn open(&self, options: OpenOptions) -> StoreResult<PgStore> {
        PgStore::open_with(self.url(), 4, StoreHooks::default(), options).await
    }

    async fn drop(self) {
        self.0.drop(" WITH (FORCE)").await;
    }
}

fn limited(background_steps: bool) -> OpenOptions {
    OpenOptions {
        statement_timeout: LIMIT,
        background_steps,
    }
}

/// The schema before 0009, `bulk` `created` rows, then an earlier version's rows.
async fn old_database(pool: &PgPool, bulk: i64) -> OldRows {
    sqlx::migrate!("../../migrations/postgres")
        .run_to(8, pool)
        .await
        .expect("the schema of 0008");
    sqlx::query(
        "INSERT INTO event_history (event_id, at, action, actor) \
         SELECT 'old', g, 'created', 'operator' FROM generate_series(1, $1) g",
    )
    .bind(bulk)
    .execute(pool)
    .await
    .expect("bulk rows");
    let old = OldRows::new();
    for statement in old.statements() {
        sqlx::raw_sql(AssertSqlSafe(statement))
            .execute(pool)
            .await
            .expect("old rows");
    }
    old
}

async fn number(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar::<_, Option<i64>>(sql)
        .fetch_one(pool)
        .await
        .expect(sql)
        .unwrap_or_default()
}

/// Every file's migration is recorded, applied, under the file's checksum, and
/// sqlx's own migrator (an older version's start) accepts the database as it is.
async fn recorded_as_the_files(pool: &PgPool) {
    let applied: Vec<(i64, bool, Vec<u8>)> =
        sqlx::query_as("SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version")
            .fetch_all(pool)
            .await
            .expect("migrations");
    let files = sqlx::migrate!("../../migrations/postgres");
    let every: Vec<(i64, bool, Vec<u8>)> = files
        .iter()
        .map(|m| (m.version, true, m.checksum.to_vec()))
        .collect();
    assert_eq!(applied, every, "each file applied once, as it is");
    files
        .run(pool)
        .await
        .expect("sqlx finds every checksum unchanged");
}

/// Whether `e` is PostgreSQL's "canceling statement due to statement timeout".
fn statement_timeout(e: &MigrateError) -> bool {
    let db = match e {
        MigrateError::ExecuteMigration(sqlx::Error::Database(db), _)
        | MigrateError::Execute(sqlx::Error::Database(db)) => db,
        _ => return false,
    };
    db.code().as_deref() == Some("57014")
}

/// 0009's DELETE over a big history: the old path (sqlx's migrator on the pool,
/// under its statement limit) is cancelled and the server cannot start; the runner
/// migrates, the server serves, and the step deletes the rows in the background.
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there"]
async fn a_big_upgrade_runs_past_the_statement_limit() {
    let db = TestDb::new().await;
    let pool = db.pool().await;
    let old = old_database(&pool, BIG).await;

    let limited_pool = db.limited_pool().await;
    let e = sqlx::migrate!("../../migrations/postgres")
        .run(&limited_pool)
        .await
        .expect_err("the old path cannot delete the rows within the limit");
    assert!(
        matches!(e, MigrateError::ExecuteMigration(_, 9)) && statement_timeout(&e),
        "{e:?}"
    );
    limited_pool.close().await;
    assert_eq!(
        number(&pool, "SELECT max(version) FROM _sqlx_migrations").await,
        8,
        "0009 rolled back"
    );

    let started = Instant::now();
    let store = db.open(limited(true)).await.expect("the runner migrates");
    eprintln!("opened after {:?}", started.elapsed());
    old.check_timeline(&store).await;
    until_finished(&store.0).await;
    eprintln!("step finished after {:?}", started.elapsed());
    assert_eq!(
        number(
            &pool,
            "SELECT count(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        0
    );
    assert_eq!(
        number(&pool, "SELECT count(*) FROM event_history").await,
        3,
        "the other rows stay"
    );
    old.check_timeline(&store).await;
    recorded_as_the_files(&pool).await;
    store.close().await;
    pool.close().await;
    db.drop().await;
}

/// While an instance migrates (here an older version: sqlx's own lock), the old
/// path's wait for the lock is cut at the statement limit; two instances starting
/// at once wait past it, and both start once it is released.
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there"]
async fn instances_starting_at_once_wait_for_the_migration_lock() {
    let db = TestDb::new().await;
    let mut holder = PgConnection::connect(db.url()).await.expect("connect");
    holder.lock().await.expect("sqlx's migration lock");

    let limited_pool = db.limited_pool().await;
    let e = sqlx::migrate!("../../migrations/postgres")
        .run(&limited_pool)
        .await
        .expect_err("the old path's wait is cut short");
    assert!(statement_timeout(&e), "{e:?}");
    limited_pool.close().await;

    let url = db.url().to_owned();
    let opening = tokio::spawn(async move {
        let open = || PgStore::open_with(&url, 2, StoreHooks::default(), limited(true));
        tokio::join!(open(), open())
    });
    tokio::time::sleep(LIMIT * 8).await;
    assert!(!opening.is_finished(), "both wait for the lock");
    holder.unlock().await.expect("unlock");
    holder.close().await.expect("close");
    let (a, b) = opening.await.expect("the task");
    let (a, b) = (a.expect("one opens"), b.expect("the other opens"));
    let pool = db.pool().await;
    recorded_as_the_files(&pool).await;
    for store in [a, b] {
        store.close().await;
    }
    pool.close().await;
    db.drop().await;
}

/// A step stopped after a batch (a shutdown, a crash: a batch is one transaction)
/// leaves `created` rows that readers skip, and the next start finishes it.
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there"]
async fn an_interrupted_step_resumes() {
    let db = TestDb::new().await;
    let pool = db.pool().await;
    let old = old_database(&pool, 25_000).await;
    let last_id = number(&pool, "SELECT max(id) FROM event_history").await;
    let options = |background_steps| OpenOptions {
        statement_timeout: STATEMENT_TIMEOUT,
        background_steps,
    };

    let store = db.open(options(false)).await.expect("open");
    let ran = run_steps(&store.0, &CancellationToken::new(), Some(1))
        .await
        .expect("one batch");
    assert_eq!(ran, Ran::Stopped);
    let step = || async {
        sqlx::query_as::<_, (i64, i64, Option<i64>)>(
            "SELECT done_through, last_id, finished_at FROM _switchboard_steps WHERE name = $1",
        )
        .bind(CREATED_ROWS.name)
        .fetch_one(&pool)
        .await
        .expect("the step")
    };
    assert_eq!(step().await, (10_000, last_id, None), "one batch of ids");
    assert_eq!(
        number(
            &pool,
            "SELECT count(*) FROM event_history WHERE action = 'created' AND id <= 10000"
        )
        .await,
        0
    );
    assert_eq!(
        number(
            &pool,
            "SELECT count(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        15_002,
        "the rest is left, the old events' among them"
    );
    old.check_timeline(&store).await;
    store.close().await;

    let store = db.open(options(true)).await.expect("open again");
    until_finished(&store.0).await;
    let (done_through, _, finished) = step().await;
    assert!(done_through == last_id && finished.is_some());
    assert_eq!(
        number(
            &pool,
            "SELECT count(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        0
    );
    assert_eq!(number(&pool, "SELECT count(*) FROM event_history").await, 3);
    old.check_timeline(&store).await;
    store.close().await;
    pool.close().await;
    db.drop().await;
}

/// Waits until a session of this database waits for a lock.
async fn until_a_lock_wait(pool: &PgPool) {
    let start = Instant::now();
    while number(
        pool,
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
         WHERE NOT l.granted AND a.datname = current_database()",
    )
    .await
        == 0
    {
        assert!(start.elapsed() < Duration::from_secs(10), "a lock wait");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn lock_agent(conn: &mut PgConnection, agent: switchboard_proto::AgentId) {
    sqlx::query("UPDATE agents SET low_water = low_water WHERE id = $1")
        .bind(agent)
        .execute(conn)
        .await
        .expect("lock the agent's row");
}

/// A room send locks its members' rows in id order; a session that holds the second
/// and then asks for the first deadlocks with it. PostgreSQL rolls the send's
/// transaction back (40P01: the send waited first, so its deadlock check runs
/// first), the store runs it again, and it is applied once.
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there"]
async fn a_deadlocked_send_runs_again_and_is_applied_once() {
    let db = TestDb::new().await;
    let pool = db.pool().await;
    let store = PgStore::open(db.url(), 4, StoreHooks::default())
        .await
        .expect("open");
    let tenant = store.ensure_tenant("deadlock", 0).await.expect("tenant");
    let room = store.create_room(tenant, "r", 0).await.expect("room");
    let mut members = Vec::new();
    for n in 1..=2u8 {
        let agent = store
            .create_agent(tenant, &format!("m{n}"), &[n; 32], &[], None, 0)
            .await
            .expect("agent");
        store
            .set_member(tenant, room.room_id, agent.id, true, 0)
            .await
            .expect("member");
        members.push(agent.id);
    }
    members.sort_by_key(|a| a.to_string());
    let (first, second) = (members[0], members[1]);

    let mut other = PgConnection::connect(db.url()).await.expect("connect");
    // Belt and braces: this session is never the one that finds the deadlock.
    other
        .execute("SET deadlock_timeout = '10s'")
        .await
        .expect("set");
    other.execute("BEGIN").await.expect("begin");
    lock_agent(&mut other, second).await;
    let send = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .send_room(tenant, room.room_id, &Actor::Operator, &message(1), None, 1)
                .await
        }
    });
    until_a_lock_wait(&pool).await;
    // The send holds `first` and waits for `second`: asking for `first` closes the
    // cycle. This returns once the send's attempt is rolled back.
    lock_agent(&mut other, first).await;
    other.execute("COMMIT").await.expect("commit");

    let receipt = send
        .await
        .expect("the task")
        .expect("the send succeeds after a retry")
        .value;
    assert_eq!((receipt.room_seq, receipt.deliveries.len()), (1, 2));
    assert_eq!(
        number(&pool, "SELECT count(*) FROM room_messages").await,
        1,
        "one message in the room's log"
    );
    assert_eq!(
        number(&pool, "SELECT count(*) FROM events").await,
        2,
        "one event per member"
    );
    assert_eq!(
        number(&pool, "SELECT sum(head_seq)::bigint FROM agents").await,
        2,
        "each member's sequence moved once"
    );
    assert_eq!(
        store.transaction_retries(),
        [RetryCount {
            backend: "postgres",
            code: "40P01",
            count: 1
        }]
    );
    other.close().await.expect("close");
    store.close().await;
    pool.close().await;
    db.drop().await;
}

/// Two REPEATABLE READ transactions read an agent's row, then both update it: the
/// second fails with 40001 once the first commits, and the store's loop runs it
/// again on a new snapshot. Both increments land, once each.
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there"]
async fn a_serialization_failure_runs_again_and_is_applied_once() {
    let db = TestDb::new().await;
    let store = PgStore::open(db.url(), 4, StoreHooks::default())
        .await
        .expect("open");
    let tenant = store.ensure_tenant("serial", 0).await.expect("tenant");
    let agent = store
        .create_agent(tenant, "a", &[1; 32], &[], None, 0)
        .await
        .expect("agent")
        .id;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let attempts = Arc::new(AtomicU32::new(0));
    let bump = || {
        let (store, barrier, attempts) = (store.clone(), barrier.clone(), attempts.clone());
        async move {
            let run = || {
                let (store, barrier, attempts) = (store.clone(), barrier.clone(), attempts.clone());
                async move {
                    let n = attempts.fetch_add(1, Ordering::SeqCst);
                    let mut tx = store.begin_write().await?;
                    (&mut *tx)
                        .execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                        .await?;
                    // The snapshot is taken here, before the other one's update.
                    sqlx::query("SELECT low_water FROM agents WHERE id = $1")
                        .bind(agent)
                        .fetch_one(&mut *tx)
                        .await?;
                    if n < 2 {
                        barrier.wait().await;
                    }
                    sqlx::query("UPDATE agents SET low_water = low_water + 1 WHERE id = $1")
                        .bind(agent)
                        .execute(&mut *tx)
                        .await?;
                    store.commit(tx, &[]).await
                }
            };
            store.retrying(run).await
        }
    };
    let (one, two) = tokio::join!(bump(), bump());
    // Either one may be the one that fails and runs again.
    one.expect("both commit");
    two.expect("both commit");
    assert_eq!(attempts.load(Ordering::SeqCst), 3, "one attempt ran again");
    let low_water: i64 = sqlx::query_scalar("SELECT low_water FROM agents WHERE id = $1")
        .bind(agent)
        .fetch_one(store.pool())
        .await
        .expect("read");
    assert_eq!(low_water, 2, "each increment once");
    assert_eq!(
        store.transaction_retries(),
        [RetryCount {
            backend: "postgres",
            code: "40001",
            count: 1
        }]
    );
    store.close().await;
    db.drop().await;
}
