//! Wake-ups across instances on a real server: each instance's commits reach its
//! own sink at the commit, and the others' sinks through their watchers, once and
//! only once committed (I1).

use super::*;
use crate::WakeSink;
use std::collections::VecDeque;

/// One instance's wake-up sink: what its own commits and its listener delivered,
/// in the order they came.
#[derive(Default)]
struct Heard {
    queued: std::sync::Mutex<VecDeque<Wake>>,
    more: tokio::sync::Notify,
}

impl WakeSink for Heard {
    fn wake(&self, wakes: &[Wake]) {
        self.queued.lock().unwrap().extend(wakes);
        self.more.notify_one();
    }
    fn wake_all(&self) {}
}

impl Heard {
    /// A sink for `store`, set as its one.
    fn of(store: &MySqlStore) -> Arc<Self> {
        let heard = Arc::new(Self::default());
        store.deliver_wakes_to(heard.clone());
        heard
    }

    /// The next wake-up for `agent`: its cursor hint.
    async fn next(&self, agent: AgentId) -> u64 {
        let wait = async {
            loop {
                {
                    let mut queued = self.queued.lock().unwrap();
                    while let Some(w) = queued.pop_front() {
                        if w.agent_id == agent {
                            return w.cursor_hint;
                        }
                    }
                }
                self.more.notified().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .expect("a wake-up within 10 s")
    }

    /// Whether no wake-up was delivered since.
    fn nothing(&self) -> bool {
        self.queued.lock().unwrap().is_empty()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: cargo xtask test runs it there"]
async fn wake_ups_reach_other_instances_after_their_commit_only() {
    let db = TestDb::new().await;
    let (a, b) = (db.open().await, db.open().await);
    let (heard_a, heard_b) = (Heard::of(&a), Heard::of(&b));
    let stop = CancellationToken::new();
    let listening = [
        tokio::spawn({
            let (a, stop) = (a.clone(), stop.clone());
            async move { a.listen(stop).await }
        }),
        tokio::spawn({
            let (b, stop) = (b.clone(), stop.clone());
            async move { b.listen(stop).await }
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
    assert_eq!(heard_b.next(agent).await, 1);

    // Written, not committed: not delivered, however many polls pass. A later
    // transaction (a higher id) commits first and is delivered; the first one is
    // delivered when it commits.
    let mut held = a.begin_write().await.expect("begin");
    wakes::publish(&mut held, a.instance(), &[wake(2)])
        .await
        .expect("publish");
    tokio::time::sleep(wakes::POLL * 6).await;
    assert!(heard_b.nothing(), "not before the commit");
    let tx = a.begin_write().await.expect("begin");
    a.commit(tx, &[wake(3)]).await.expect("commit");
    assert_eq!(heard_b.next(agent).await, 3);
    tokio::time::sleep(wakes::POLL * 4).await;
    assert!(heard_b.nothing(), "still not before the commit");
    held.commit().await.expect("commit");
    assert_eq!(heard_b.next(agent).await, 2);

    // Rolled back: never delivered.
    let mut gone = a.begin_write().await.expect("begin");
    wakes::publish(&mut gone, a.instance(), &[wake(4)])
        .await
        .expect("publish");
    drop(gone);
    let tx = a.begin_write().await.expect("begin");
    a.commit(tx, &[wake(5), wake(6)]).await.expect("commit");
    assert_eq!(heard_b.next(agent).await, 5);
    assert_eq!(heard_b.next(agent).await, 6);

    // Its own commits reached a's sink once each, at the commit (2 and 4 were
    // written around the store's commit); its listener skipped them.
    for n in [1, 3, 5, 6] {
        assert_eq!(heard_a.next(agent).await, n, "a's own, at its commit");
    }
    assert!(heard_a.nothing(), "a heard its own once");

    // The other way round: each instance hears each wake-up once.
    let tx = b.begin_write().await.expect("begin");
    b.commit(tx, &[wake(7)]).await.expect("commit");
    assert_eq!(heard_b.next(agent).await, 7, "b's own, at its commit");
    assert_eq!(heard_a.next(agent).await, 7, "b's, through a's listener");
    tokio::time::sleep(wakes::POLL * 4).await;
    assert!(heard_a.nothing(), "a hears b's once");
    assert!(heard_b.nothing(), "b never hears its own from the listener");

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
    let heard = Heard::of(&b);
    let stop = CancellationToken::new();
    let listening = tokio::spawn({
        let (b, stop) = (b.clone(), stop.clone());
        async move { b.listen(stop).await }
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
        assert_eq!(heard.next(agent).await, n, "in order, none lost");
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
