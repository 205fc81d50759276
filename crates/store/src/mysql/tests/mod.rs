//! The MySQL backend on a real server: `SWITCHBOARD_TEST_MYSQL` is an admin URL
//! (`cargo xtask test` starts Debian's MariaDB and sets it). Each test makes its own
//! database `sb_t_…`. The driver suite (`store/engine/suite`) and the HTTP
//! conformance suite run on MariaDB too; these are the MySQL backend's own.

use super::*;
use crate::Actor;
use crate::RetryCount;
use crate::engine::Driver;
use crate::migrate::OpenOptions;
use crate::testing::ServerDb;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use switchboard_proto::{AgentId, TenantId};
use tokio_util::sync::CancellationToken;

mod wake_ups;

/// A database of its own on the test server.
struct TestDb(ServerDb<MySql>);

impl TestDb {
    async fn new() -> Self {
        Self(ServerDb::create("SWITCHBOARD_TEST_MYSQL", "my").await)
    }

    fn url(&self) -> &str {
        &self.0.url
    }

    async fn open(&self) -> MySqlStore {
        MySqlStore::open(self.url(), 8, StoreHooks::default())
            .await
            .expect("open")
    }

    async fn drop(self) {
        self.0.drop("").await;
    }
}

/// Agents `a1` and `a2` of one tenant.
struct TwoAgents {
    a1: AgentId,
    a2: AgentId,
}

async fn two_agents(store: &MySqlStore) -> TwoAgents {
    use crate::DirectoryStore;
    let tenant = store.ensure_tenant("two", 0).await.expect("tenant");
    let mut ids = Vec::new();
    for (n, name) in ["w1", "w2"].into_iter().enumerate() {
        let agent = store
            .create_agent(tenant, name, &[n as u8 + 1; 32], &[], None, 0)
            .await
            .expect("agent");
        ids.push(agent.id);
    }
    TwoAgents {
        a1: ids[0],
        a2: ids[1],
    }
}

/// Two claimers of one agent, each in an open transaction, and a claimer of
/// another agent: each gets events of its own at once. A claim must lock only what
/// it returns (`FOR UPDATE SKIP LOCKED` on the recipient's index, in order, up to
/// the limit): planned on another index with a filesort, InnoDB locks every
/// pending row it read, and the others' claims come back empty while work waits.
#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn open_claims_lock_only_the_rows_they_return() {
    use crate::engine::inbox::InboxStatements;
    use crate::engine::suite::message;
    use crate::{DirectoryStore, SendStore};
    let db = TestDb::new().await;
    let store = db.open().await;
    let tenant = store.ensure_tenant("claims", 0).await.expect("tenant");
    let mut agents = Vec::new();
    for (n, name) in ["busy", "quiet"].into_iter().enumerate() {
        let agent = store
            .create_agent(tenant, name, &[n as u8 + 1; 32], &[], None, 0)
            .await
            .expect("agent");
        for i in 0..6 {
            store
                .send_direct(tenant, agent.id, &Actor::Operator, &message(i), None, 1)
                .await
                .expect("send");
        }
        agents.push(agent.id);
    }
    // Most of the table done, as in a running deployment: `status = 'pending'` is
    // then the most selective condition, and the planner's favourite.
    for n in 0..40 {
        let agent = store
            .create_agent(
                tenant,
                &format!("done-{n}"),
                &[n as u8 + 10; 32],
                &[],
                None,
                0,
            )
            .await
            .expect("agent");
        for i in 0..25 {
            store
                .send_direct(tenant, agent.id, &Actor::Operator, &message(i), None, 1)
                .await
                .expect("send");
        }
    }
    sqlx::raw_sql(
        "UPDATE events SET status = 'completed' WHERE agent_id IN \
         (SELECT id FROM agents WHERE name LIKE 'done-%'); ANALYZE TABLE events",
    )
    .execute(store.pool())
    .await
    .expect("finish the others' events");
    let mut first = store.begin_write().await.expect("begin");
    let got = store
        .claimable(&mut first, agents[0], 10, 1)
        .await
        .expect("claim");
    assert_eq!(got.len(), 1);
    let mut second = store.begin_write().await.expect("begin");
    let other = store
        .claimable(&mut second, agents[0], 10, 1)
        .await
        .expect("claim");
    assert_eq!(
        other.len(),
        1,
        "a second claimer of the same agent gets the next event"
    );
    assert_ne!(other, got);
    let mut third = store.begin_write().await.expect("begin");
    let quiet = store
        .claimable(&mut third, agents[1], 10, 5)
        .await
        .expect("claim");
    assert_eq!(quiet.len(), 5, "another agent's claim is not held up");
    for tx in [first, second, third] {
        tx.rollback().await.expect("rollback");
    }
    store.close().await;
    db.drop().await;
}

#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn the_server_is_checked_for_skip_locked_and_row_based_binary_logging() {
    let db = TestDb::new().await;
    let mut conn = MySqlConnection::connect(db.url()).await.expect("connect");
    let found = server::check_server(&mut conn)
        .await
        .expect("a supported server");
    eprintln!("server: {found:?}");
    server::check_binlog(&mut conn)
        .await
        .expect("the test server logs in ROW format, or not at all");
    let log_bin: i64 = sqlx::query_scalar("SELECT CAST(@@log_bin AS SIGNED)")
        .fetch_one(&mut conn)
        .await
        .expect("log_bin");
    // A session that would log statements is refused (where this user may switch
    // its own format: `cargo xtask` gives it BINLOG ADMIN).
    match (&mut conn)
        .execute("SET SESSION binlog_format = 'MIXED'")
        .await
    {
        Ok(_) if log_bin != 0 => {
            let e = server::check_binlog(&mut conn)
                .await
                .expect_err("MIXED is refused");
            let StoreError::Invalid(msg) = e else {
                panic!("{e:?}")
            };
            assert!(
                msg.contains("MIXED") && msg.contains("binlog_format = ROW"),
                "{msg}"
            );
        }
        Ok(_) => eprintln!("binary logging is off on this server: nothing to refuse"),
        Err(e) => eprintln!("cannot switch this session's binlog format ({e}): not checked"),
    }
    conn.close().await.expect("close");
    db.drop().await;
}

#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn instances_starting_at_once_migrate_the_database_once() {
    let db = TestDb::new().await;
    let opened = futures::future::join_all(
        (0..3).map(|_| MySqlStore::open(db.url(), 2, StoreHooks::default())),
    )
    .await;
    let stores: Vec<MySqlStore> = opened
        .into_iter()
        .map(|o| o.expect("every instance opens"))
        .collect();
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(stores[0].pool())
            .await
            .expect("migrations");
    let every: Vec<(i64, bool)> = sqlx::migrate!("../../migrations/mysql")
        .iter()
        .map(|m| (m.version, true))
        .collect();
    assert!(every.len() > 1, "the migrations are found");
    assert_eq!(applied, every, "each migration applied once");
    for s in &stores {
        s.close().await;
    }
    db.drop().await;
}

#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn deadlocks_are_retried_and_lock_waits_end() {
    let db = TestDb::new().await;
    let store = db.open().await;
    let s = two_agents(&store).await;
    // Two transactions lock the two agents in opposite orders: InnoDB kills one
    // (1213), the engine's loop runs it again, and both commit.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let attempts = Arc::new(AtomicU32::new(0));
    let cross = |first: AgentId, second: AgentId| {
        let (store, barrier, attempts) = (store.clone(), barrier.clone(), attempts.clone());
        async move {
            let run = || {
                let (store, barrier, attempts) = (store.clone(), barrier.clone(), attempts.clone());
                async move {
                    let n = attempts.fetch_add(1, Ordering::SeqCst);
                    let mut tx = store.begin_write().await?;
                    for (i, agent) in [first, second].into_iter().enumerate() {
                        if i == 1 && n < 2 {
                            barrier.wait().await;
                        }
                        sqlx::query("UPDATE agents SET low_water = low_water + 1 WHERE id = ?")
                            .bind(agent)
                            .execute(&mut *tx)
                            .await?;
                    }
                    store.commit(tx, &[]).await
                }
            };
            store.retrying(run).await
        }
    };
    let (one, two) = tokio::join!(cross(s.a1, s.a2), cross(s.a2, s.a1));
    one.expect("first commits");
    two.expect("second commits");
    assert_eq!(
        attempts.load(Ordering::SeqCst),
        3,
        "one attempt was run again"
    );
    let total: i64 = sqlx::query_scalar("SELECT CAST(SUM(low_water) AS SIGNED) FROM agents")
        .fetch_one(store.pool())
        .await
        .expect("sum");
    assert_eq!(total, 4);
    assert_eq!(
        store.transaction_retries(),
        [RetryCount {
            backend: "mysql",
            code: "1213",
            count: 1
        }],
        "the retry is counted"
    );

    // A lock wait that runs out (1205) is retryable, and a 503 once retries end.
    let mut holder = store.begin_write().await.expect("begin");
    sqlx::query("UPDATE agents SET low_water = 0 WHERE id = ?")
        .bind(s.a1)
        .execute(&mut *holder)
        .await
        .expect("lock");
    let mut waiter = MySqlConnection::connect(db.url()).await.expect("connect");
    (&mut waiter)
        .execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .expect("set");
    let e: StoreError = sqlx::query("UPDATE agents SET low_water = 1 WHERE id = ?")
        .bind(s.a1)
        .execute(&mut waiter)
        .await
        .expect_err("times out")
        .into();
    assert_eq!(retryable(&e), Some("1205"), "{e:?}");
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    drop(holder);
    waiter.close().await.expect("close");
    store.close().await;
    db.drop().await;
}

/// The statement limit of the upgrade tests' pooled sessions (15 s in production):
/// the old path ran the migrations under the pool's limit.
const LIMIT: Duration = Duration::from_millis(400);
/// `created` rows of the big database: their one DELETE must take several times
/// [`LIMIT`] on any machine, loaded or idle. 200,000 took about 1.7 s on the 2-core
/// machine under load but once under 0.4 s idle (the old path then finished, and
/// the test could not show it failing); three times as many keep the margin
/// (seeding them takes a few seconds).
const BIG: i64 = 600_000;

fn limited(background_steps: bool) -> OpenOptions {
    OpenOptions {
        statement_timeout: LIMIT,
        background_steps,
    }
}

/// A pool whose sessions are the store's (the migrations are written for its SQL
/// mode) with `statement`, the store's limit.
async fn session_pool(url: &str, statement: Duration) -> MySqlPool {
    let mut conn = MySqlConnection::connect(url).await.expect("connect");
    let flavor = server::check_server(&mut conn)
        .await
        .expect("server")
        .flavor;
    conn.close().await.expect("close");
    let limits = Limits {
        statement,
        ..Limits::POOL
    };
    MySqlPoolOptions::new()
        .max_connections(2)
        .after_connect(move |conn, _| Box::pin(async move { session(conn, flavor, limits).await }))
        .connect(url)
        .await
        .expect("connect")
}

/// The store's sessions, as the old path had them, with [`LIMIT`].
async fn limited_pool(url: &str) -> MySqlPool {
    session_pool(url, LIMIT).await
}

/// The schema before 0008, `bulk` `created` rows, then an earlier version's rows.
async fn old_database(pool: &MySqlPool, bulk: i64) -> crate::migrate::fixture::OldRows {
    let mut before = sqlx::migrate!("../../migrations/mysql");
    before.set_locking(false);
    before.run_to(7, pool).await.expect("the schema of 0007");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "INSERT INTO event_history (event_id, at, action, actor) \
         SELECT 'old', seq, 'created', 'operator' FROM seq_1_to_{bulk}"
    )))
    .execute(pool)
    .await
    .expect("bulk rows");
    let old = crate::migrate::fixture::OldRows::new();
    for statement in old.statements() {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
            .execute(pool)
            .await
            .expect("old rows");
    }
    old
}

async fn number(pool: &MySqlPool, sql: &'static str) -> i64 {
    sqlx::query_scalar::<_, Option<i64>>(sql)
        .fetch_one(pool)
        .await
        .expect(sql)
        .unwrap_or_default()
}

/// Every file's migration is recorded, applied, under the file's checksum, and
/// sqlx's own migrator (an older version's start) accepts the database as it is.
async fn recorded_as_the_files(pool: &MySqlPool) {
    let applied: Vec<(i64, bool, Vec<u8>)> =
        sqlx::query_as("SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version")
            .fetch_all(pool)
            .await
            .expect("migrations");
    let mut files = sqlx::migrate!("../../migrations/mysql");
    let every: Vec<(i64, bool, Vec<u8>)> = files
        .iter()
        .map(|m| (m.version, true, m.checksum.to_vec()))
        .collect();
    assert_eq!(applied, every, "each file applied once, as it is");
    files.set_locking(false);
    files
        .run(pool)
        .await
        .expect("sqlx finds every checksum unchanged");
}

/// MariaDB's "max_statement_time exceeded" (1969) in migration `version`.
fn over_the_limit(e: &sqlx::migrate::MigrateError, version: i64) -> bool {
    match e {
        sqlx::migrate::MigrateError::ExecuteMigration(sqlx::Error::Database(db), v) => {
            *v == version
                && db
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|db| db.number() == 1969)
        }
        _ => false,
    }
}

/// 0008's DELETE over a big history: on the old path (the migrator under the
/// pool's statement limit) MariaDB interrupts it after the ALTER committed, and
/// sqlx leaves the database dirty: no start until someone repairs it. The runner
/// repairs it, the server serves, and the step deletes the rows in the background.
#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn a_big_upgrade_runs_past_the_statement_limit() {
    let db = TestDb::new().await;
    let pool = session_pool(db.url(), Duration::ZERO).await;
    let old = old_database(&pool, BIG).await;

    let limited_pool = limited_pool(db.url()).await;
    let mut files = sqlx::migrate!("../../migrations/mysql");
    files.set_locking(false);
    let e = files
        .run(&limited_pool)
        .await
        .expect_err("the old path cannot delete the rows within the limit");
    assert!(over_the_limit(&e, 8), "{e:?}");
    limited_pool.close().await;
    let dirty: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations WHERE version >= 8")
            .fetch_all(&pool)
            .await
            .expect("read");
    assert_eq!(dirty, [(8, false)], "left dirty");
    let mut retried = sqlx::migrate!("../../migrations/mysql");
    retried.set_locking(false);
    let e = retried
        .run(&pool)
        .await
        .expect_err("sqlx refuses a dirty database");
    assert!(matches!(e, sqlx::migrate::MigrateError::Dirty(8)), "{e:?}");

    let started = Instant::now();
    let store = MySqlStore::open_with(db.url(), 4, StoreHooks::default(), limited(true))
        .await
        .expect("the runner repairs and migrates");
    eprintln!("opened after {:?}", started.elapsed());
    old.check_timeline(&store).await;
    crate::migrate::fixture::until_finished(&store.0).await;
    eprintln!("step finished after {:?}", started.elapsed());
    assert_eq!(
        number(
            &pool,
            "SELECT COUNT(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        0
    );
    assert_eq!(
        number(&pool, "SELECT COUNT(*) FROM event_history").await,
        3,
        "the other rows stay"
    );
    old.check_timeline(&store).await;
    recorded_as_the_files(&pool).await;
    store.close().await;
    pool.close().await;
    db.drop().await;
}

/// While an instance migrates (holds the migration lock), the old path's
/// `GET_LOCK(…, 300)` is cut at the statement limit; two instances starting at once
/// wait past it, and both start once the lock is released.
#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn instances_starting_at_once_wait_for_the_migration_lock() {
    let db = TestDb::new().await;
    let mut holder = MySqlConnection::connect(db.url()).await.expect("connect");
    let got: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT GET_LOCK({}, 0)",
        migrate::LOCK
    )))
    .fetch_one(&mut holder)
    .await
    .expect("lock");
    assert_eq!(got, Some(1));

    // MariaDB ends the wait at the statement limit with NULL, not an error: the old
    // path refused to start, saying another instance had migrated for 300 s.
    let limited_pool = limited_pool(db.url()).await;
    let started = Instant::now();
    let got: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT GET_LOCK({}, 300)",
        migrate::LOCK
    )))
    .fetch_one(&limited_pool)
    .await
    .expect("GET_LOCK");
    assert_eq!(got, None, "the old path's wait is cut short");
    assert!(started.elapsed() < Duration::from_secs(10), "at the limit");
    limited_pool.close().await;

    let url = db.url().to_owned();
    let opening = tokio::spawn(async move {
        let open = || MySqlStore::open_with(&url, 2, StoreHooks::default(), limited(true));
        tokio::join!(open(), open())
    });
    tokio::time::sleep(LIMIT * 4).await;
    assert!(!opening.is_finished(), "both wait for the lock");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT RELEASE_LOCK({})",
        migrate::LOCK
    )))
    .execute(&mut holder)
    .await
    .expect("release");
    holder.close().await.expect("close");
    let (a, b) = opening.await.expect("the task");
    let (a, b) = (a.expect("one opens"), b.expect("the other opens"));
    recorded_as_the_files(a.pool()).await;
    for store in [a, b] {
        store.close().await;
    }
    db.drop().await;
}

/// A step stopped after a batch (a shutdown, a crash: a batch is one transaction)
/// leaves `created` rows that readers skip, and the next start finishes it.
#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn an_interrupted_step_resumes() {
    use crate::migrate::{CREATED_ROWS, Ran, run_steps};
    let db = TestDb::new().await;
    let pool = session_pool(db.url(), Duration::ZERO).await;
    let old = old_database(&pool, 25_000).await;
    let last_id = number(&pool, "SELECT MAX(id) FROM event_history").await;
    let before = number(
        &pool,
        "SELECT COUNT(*) FROM event_history WHERE action = 'created' AND id > 10000",
    )
    .await;
    let options = |background_steps| OpenOptions {
        statement_timeout: STATEMENT_TIMEOUT,
        background_steps,
    };

    let store = MySqlStore::open_with(db.url(), 4, StoreHooks::default(), options(false))
        .await
        .expect("open");
    let ran = run_steps(&store.0, &CancellationToken::new(), Some(1))
        .await
        .expect("one batch");
    assert_eq!(ran, Ran::Stopped);
    let step = || async {
        sqlx::query_as::<_, (i64, i64, Option<i64>)>(
            "SELECT done_through, last_id, finished_at FROM _switchboard_steps WHERE name = ?",
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
            "SELECT COUNT(*) FROM event_history WHERE action = 'created' AND id <= 10000"
        )
        .await,
        0
    );
    assert_eq!(
        number(
            &pool,
            "SELECT COUNT(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        before,
        "the rest is left, the old events' among them"
    );
    old.check_timeline(&store).await;
    store.close().await;

    let store = MySqlStore::open(db.url(), 4, StoreHooks::default())
        .await
        .expect("open again");
    crate::migrate::fixture::until_finished(&store.0).await;
    let (done_through, _, finished) = step().await;
    assert!(done_through == last_id && finished.is_some());
    assert_eq!(
        number(
            &pool,
            "SELECT COUNT(*) FROM event_history WHERE action = 'created'"
        )
        .await,
        0
    );
    assert_eq!(number(&pool, "SELECT COUNT(*) FROM event_history").await, 3);
    old.check_timeline(&store).await;
    store.close().await;
    pool.close().await;
    db.drop().await;
}

/// Requests of several instances racing with one new Idempotency-Key: exactly one
/// runs, the others are told it is in flight, and none deadlocks. A plain insert
/// leaves a shared lock on the duplicate row on InnoDB, and the racers then all ask
/// for the exclusive lock: a deadlock (1213) per round, which the retry loop hid.
#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it"]
async fn racing_first_uses_of_one_key_queue_without_deadlocks() {
    use crate::{IdemBegin, IdemKey, IdemStore};
    let db = TestDb::new().await;
    let store = std::sync::Arc::new(db.open().await);
    let tenant = {
        use crate::DirectoryStore;
        store.ensure_tenant("keys", 0).await.expect("tenant")
    };
    for round in 0..20u8 {
        let mut racers = tokio::task::JoinSet::new();
        for instance in 0..6u8 {
            let store = store.clone();
            racers.spawn(async move {
                let key = IdemKey {
                    tenant_id: tenant,
                    principal: "agent:racer".into(),
                    key_hash: vec![round; 32],
                    fingerprint: vec![7; 32],
                    owner: vec![instance; 16],
                };
                store.idem_begin(&key, 1_000, 60_000, 86_400_000).await
            });
        }
        let mut fresh = 0;
        while let Some(begun) = racers.join_next().await {
            match begun.expect("task").expect("begin") {
                IdemBegin::Fresh => fresh += 1,
                IdemBegin::InFlight => {}
                other => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(fresh, 1, "round {round}: one request runs");
    }
    let deadlocks: Vec<RetryCount> = store
        .transaction_retries()
        .into_iter()
        .filter(|r| r.code == "1213")
        .collect();
    assert!(deadlocks.is_empty(), "no deadlock to retry: {deadlocks:?}");
    db.drop().await;
}
