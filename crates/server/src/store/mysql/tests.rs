//! The MySQL backend on a real server: `SWITCHBOARD_TEST_MYSQL` is an admin URL
//! (`cargo xtask test` starts Debian's MariaDB and sets it). Each test makes its own
//! database `sb_t_…`. The driver suite (`store/engine/suite`) and the HTTP
//! conformance suite run on MariaDB too; these are the MySQL backend's own.

use super::*;
use crate::hub::{Hub, OpsSignal};
use crate::store::Actor;
use crate::store::engine::Driver;
use crate::store::engine::suite::server_db::ServerDb;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use switchboard_proto::{AgentId, TenantId};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

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
        MySqlStore::open(self.url(), 8, Hooks::default())
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
    use crate::store::DirectoryStore;
    let tenant = store.ensure_tenant("two", 0).await.expect("tenant");
    let mut ids = Vec::new();
    for (n, name) in ["w1", "w2"].into_iter().enumerate() {
        let agent = store
            .create_agent(tenant, name, &[n as u8 + 1; 32], &[], 0)
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
    use crate::store::engine::inbox::InboxStatements;
    use crate::store::engine::suite::message;
    use crate::store::{DirectoryStore, SendStore};
    let db = TestDb::new().await;
    let store = db.open().await;
    let tenant = store.ensure_tenant("claims", 0).await.expect("tenant");
    let mut agents = Vec::new();
    for (n, name) in ["busy", "quiet"].into_iter().enumerate() {
        let agent = store
            .create_agent(tenant, name, &[n as u8 + 1; 32], &[], 0)
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
            .create_agent(tenant, &format!("done-{n}"), &[n as u8 + 10; 32], &[], 0)
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
    let opened =
        futures::future::join_all((0..3).map(|_| MySqlStore::open(db.url(), 2, Hooks::default())))
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
                            .bind(agent.to_string())
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

    // A lock wait that runs out (1205) is retryable, and a 503 once retries end.
    let mut holder = store.begin_write().await.expect("begin");
    sqlx::query("UPDATE agents SET low_water = 0 WHERE id = ?")
        .bind(s.a1.to_string())
        .execute(&mut *holder)
        .await
        .expect("lock");
    let mut waiter = MySqlConnection::connect(db.url()).await.expect("connect");
    (&mut waiter)
        .execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .expect("set");
    let e: StoreError = sqlx::query("UPDATE agents SET low_water = 1 WHERE id = ?")
        .bind(s.a1.to_string())
        .execute(&mut waiter)
        .await
        .expect_err("times out")
        .into();
    assert!(retryable(&e), "{e:?}");
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    drop(holder);
    waiter.close().await.expect("close");
    store.close().await;
    db.drop().await;
}

/// The next wake-up `heard` gets for `agent`: its cursor hint.
async fn next_wake(heard: &mut broadcast::Receiver<OpsSignal>, agent: AgentId) -> u64 {
    let wait = async {
        loop {
            match heard.recv().await.expect("the hub is open") {
                OpsSignal::Changed(w) if w.agent_id == agent => return w.cursor_hint,
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .expect("a wake-up within 10 s")
}

fn nothing_heard(heard: &mut broadcast::Receiver<OpsSignal>) -> bool {
    matches!(heard.try_recv(), Err(broadcast::error::TryRecvError::Empty))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn wake_ups_reach_other_instances_after_their_commit_only() {
    let db = TestDb::new().await;
    let (a, b) = (db.open().await, db.open().await);
    let (hub_a, hub_b) = (Hub::new(), Hub::new());
    let (mut heard_a, mut heard_b) = (hub_a.subscribe_ops(), hub_b.subscribe_ops());
    let stop = CancellationToken::new();
    let listening = [
        tokio::spawn({
            let (a, hub, stop) = (a.clone(), hub_a.clone(), stop.clone());
            async move { a.listen(hub.remote_feed(), stop).await }
        }),
        tokio::spawn({
            let (b, hub, stop) = (b.clone(), hub_b.clone(), stop.clone());
            async move { b.listen(hub.remote_feed(), stop).await }
        }),
    ];
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let wake = |n| Wake {
        tenant_id: tenant,
        agent_id: agent,
        cursor_hint: n,
    };

    let tx = a.begin_write().await.expect("begin");
    a.commit(tx, &[wake(1)]).await.expect("commit");
    assert_eq!(next_wake(&mut heard_b, agent).await, 1);

    // Written, not committed: not delivered, however many polls pass. A later
    // transaction (a higher id) commits first and is delivered; the first one is
    // delivered when it commits.
    let mut held = a.begin_write().await.expect("begin");
    wakes::publish(&mut held, a.instance(), &[wake(2)])
        .await
        .expect("publish");
    tokio::time::sleep(wakes::POLL * 6).await;
    assert!(nothing_heard(&mut heard_b), "not before the commit");
    let tx = a.begin_write().await.expect("begin");
    a.commit(tx, &[wake(3)]).await.expect("commit");
    assert_eq!(next_wake(&mut heard_b, agent).await, 3);
    tokio::time::sleep(wakes::POLL * 4).await;
    assert!(nothing_heard(&mut heard_b), "still not before the commit");
    held.commit().await.expect("commit");
    assert_eq!(next_wake(&mut heard_b, agent).await, 2);

    // Rolled back: never delivered.
    let mut gone = a.begin_write().await.expect("begin");
    wakes::publish(&mut gone, a.instance(), &[wake(4)])
        .await
        .expect("publish");
    drop(gone);
    let tx = a.begin_write().await.expect("begin");
    a.commit(tx, &[wake(5), wake(6)]).await.expect("commit");
    assert_eq!(next_wake(&mut heard_b, agent).await, 5);
    assert_eq!(next_wake(&mut heard_b, agent).await, 6);

    // The other way round; an instance never hears its own.
    let tx = b.begin_write().await.expect("begin");
    b.commit(tx, &[wake(7)]).await.expect("commit");
    assert_eq!(next_wake(&mut heard_a, agent).await, 7);
    tokio::time::sleep(wakes::POLL * 4).await;
    assert!(nothing_heard(&mut heard_a), "a hears only b's");
    assert!(nothing_heard(&mut heard_b), "b hears only a's");

    stop.cancel();
    for l in listening {
        l.await.expect("the watcher ends");
    }
    a.close().await;
    b.close().await;
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn wake_up_delay_across_instances() {
    const WAKES: u64 = 300;
    let db = TestDb::new().await;
    let (a, b) = (db.open().await, db.open().await);
    let hub = Hub::new();
    let mut heard = hub.subscribe_ops();
    let stop = CancellationToken::new();
    let listening = tokio::spawn({
        let (b, hub, stop) = (b.clone(), hub.clone(), stop.clone());
        async move { b.listen(hub.remote_feed(), stop).await }
    });
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let mut delays = Vec::with_capacity(WAKES as usize);
    for n in 1..=WAKES {
        let tx = a.begin_write().await.expect("begin");
        a.commit(
            tx,
            &[Wake {
                tenant_id: tenant,
                agent_id: agent,
                cursor_hint: n,
            }],
        )
        .await
        .expect("commit");
        let committed = Instant::now();
        assert_eq!(next_wake(&mut heard, agent).await, n, "in order, none lost");
        delays.push(committed.elapsed());
        // Commits fall anywhere in the poll interval.
        let pause = rand::random_range(0..wakes::POLL.as_millis() as u64);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    delays.sort();
    let at = |q: f64| delays[((delays.len() as f64 * q) as usize).min(delays.len() - 1)];
    eprintln!(
        "wake-up delay after commit over {WAKES} wakes (poll every {:?}): p50 {:?}, p90 {:?}, \
         p99 {:?}, max {:?}",
        wakes::POLL,
        at(0.50),
        at(0.90),
        at(0.99),
        delays[delays.len() - 1],
    );
    stop.cancel();
    listening.await.expect("the watcher ends");
    a.close().await;
    b.close().await;
    db.drop().await;
}
