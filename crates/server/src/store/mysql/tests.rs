//! The MySQL backend on a real server: `SWITCHBOARD_TEST_MYSQL` is an admin URL
//! (`cargo xtask test` starts Debian's MariaDB and sets it). Each test makes its own
//! database `sb_t_…`. Until the backend has the whole store, the driver suite's
//! record checks run here on rows seeded with SQL.

use super::*;
use crate::hub::{Hub, OpsSignal};
use crate::store::engine::Driver;
use crate::store::engine::suite::records::{Seeded, check_seeded};
use crate::store::{Actor, RecordCall, RecordDone, RecordOp, RecordStore};
use sqlx::AssertSqlSafe;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;
use switchboard_proto::{AgentId, MemoryId, TenantId};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// A database of its own on the test server.
struct TestDb {
    admin: MySqlPool,
    name: String,
    url: String,
}

impl TestDb {
    async fn new() -> Self {
        let admin_url = std::env::var("SWITCHBOARD_TEST_MYSQL")
            .expect("set SWITCHBOARD_TEST_MYSQL to an admin URL (cargo xtask mariadb prints one)");
        let name = format!("sb_t_my_{}", uuid::Uuid::new_v4().simple());
        let admin = MySqlPool::connect(&admin_url).await.expect("connect");
        sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await
            .expect("create the database");
        let (base, _) = admin_url
            .rsplit_once('/')
            .expect("an admin URL ends in /database");
        let url = format!("{base}/{name}");
        Self { admin, name, url }
    }

    async fn open(&self) -> MySqlStore {
        MySqlStore::open(&self.url, 8, Hooks::default())
            .await
            .expect("open")
    }

    async fn drop(self) {
        sqlx::query(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {}",
            self.name
        )))
        .execute(&self.admin)
        .await
        .expect("drop the database");
        self.admin.close().await;
    }
}

/// The rows the record checks need ([`Seeded`]), written with SQL.
async fn seed(store: &MySqlStore) -> Seeded {
    let s = Seeded {
        tenant: TenantId::new(),
        other: TenantId::new(),
        a1: AgentId::new(),
        a2: AgentId::new(),
        memory: MemoryId::new(),
        token: 1,
    };
    let p = store.pool();
    for (id, name) in [(s.tenant, "suite"), (s.other, "other")] {
        sqlx::query("INSERT INTO tenants (id, name, created_at) VALUES (?, ?, 0)")
            .bind(id.to_string())
            .bind(name)
            .execute(p)
            .await
            .expect("tenant");
    }
    for (id, name) in [(s.a1, "w1"), (s.a2, "w2")] {
        sqlx::query("INSERT INTO agents (id, tenant_id, name, created_at) VALUES (?, ?, ?, 0)")
            .bind(id.to_string())
            .bind(s.tenant.to_string())
            .bind(name)
            .execute(p)
            .await
            .expect("agent");
    }
    sqlx::query("INSERT INTO memories (id, tenant_id, fence, created_at) VALUES (?, ?, 1, 0)")
        .bind(s.memory.to_string())
        .bind(s.tenant.to_string())
        .execute(p)
        .await
        .expect("memory");
    let lease = uuid::Uuid::now_v7().to_string();
    sqlx::query(
        "INSERT INTO leases (id, tenant_id, name, skeleton, memory_id, fence, holder, \
         owner_client, ttl_ms, lock_delay_ms, acquired_at, expires_at) \
         VALUES (?, ?, 'writer', 'writer', ?, 1, 'agent:w1', 'host', 10000, 0, 0, 10000)",
    )
    .bind(&lease)
    .bind(s.tenant.to_string())
    .bind(s.memory.to_string())
    .execute(p)
    .await
    .expect("lease");
    sqlx::query(
        "INSERT INTO issued_tokens (memory_id, fence, lease_id, owner_client, holder, issued_at) \
         VALUES (?, 1, ?, 'host', 'agent:w1', 0)",
    )
    .bind(s.memory.to_string())
    .bind(&lease)
    .execute(p)
    .await
    .expect("issued token");
    s
}

#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn the_shared_statements_and_the_data_plane_run_on_mariadb() {
    let db = TestDb::new().await;
    let store = db.open().await;
    let s = seed(&store).await;
    // Every record, event and lease-audit statement (the driver suite's checks).
    check_seeded(&store, &s).await;

    // And the engine over them: create, update with the ETag, read, refuse.
    let who = Actor::Agent {
        id: s.a1,
        name: "w1".into(),
    };
    let call = |op, token| RecordCall {
        tenant: s.tenant,
        memory: s.memory,
        key: "cfg",
        token,
        who: &who,
        op,
    };
    let put = |value: &str, if_match| RecordOp::Put {
        value: value.into(),
        if_match,
        if_none_match: false,
    };
    let done = store
        .record(&call(put("{\"a\":1}", None), 1), 10)
        .await
        .expect("created");
    let RecordDone::Written { record, created } = &done.value else {
        panic!("{done:?}")
    };
    assert!(*created);
    assert_eq!(record.version, 1);
    // `a1` is subscribed (the checks left it so): its next event, and a wake-up.
    assert_eq!(done.wakes.len(), 1, "{:?}", done.wakes);
    assert_eq!(done.wakes[0].agent_id, s.a1);
    let done = store
        .record(&call(put("{\"a\":2}", Some(1)), 1), 11)
        .await
        .expect("updated");
    assert!(matches!(
        done.value,
        RecordDone::Written { ref record, created: false } if record.version == 2
    ));
    let done = store
        .record(&call(RecordOp::Get, 1), 12)
        .await
        .expect("read");
    let RecordDone::Read(record) = done.value else {
        panic!("{:?}", done.value)
    };
    assert_eq!(record.value, serde_json::json!({"a": 2}));
    let stale = store.record(&call(RecordOp::Get, 0), 13).await;
    assert!(stale.is_err(), "{stale:?}");
    let rejections = RecordStore::fencing_rejections(&store, s.tenant, 10)
        .await
        .expect("rejections");
    assert_eq!(rejections[0].presented_token, 0, "{rejections:?}");

    store.close().await;
    db.drop().await;
}

#[tokio::test]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn the_server_is_checked_for_skip_locked_and_row_based_binary_logging() {
    let db = TestDb::new().await;
    let mut conn = MySqlConnection::connect(&db.url).await.expect("connect");
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
        futures::future::join_all((0..3).map(|_| MySqlStore::open(&db.url, 2, Hooks::default())))
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
    assert_eq!(applied, [(1, true)]);
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
    let s = seed(&store).await;
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
    let mut waiter = MySqlConnection::connect(&db.url).await.expect("connect");
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
