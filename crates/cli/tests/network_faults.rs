//! Network faults (issue 17): a TCP fault proxy (`switchboard_tests::faultproxy`)
//! between the agents and the server, and between the server and PostgreSQL or
//! MariaDB, where the database also ends the server's sessions (`pg_terminate_backend`,
//! `KILL CONNECTION`). Faults at random (delay, blackhole, reset, half-open, slow read), then healing:
//! the outbox drains, SSE falls back to polling and recovers, nothing is lost,
//! nothing reordered, and the server's pool recovers without a restart.
//!
//! Sizes: `SWITCHBOARD_CHAOS=full` for `cargo xtask chaos` (minutes of faults),
//! else the CI subset (~25 s). `SWITCHBOARD_FAULT_SEED` repeats a run's fault
//! choices (each run prints its seed).

mod common;

use common::outage::{Outage, Worker};
use common::{Serve, serve_command, sqlite_url};
use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_sdk::consumer::Mode;
use switchboard_sdk::outbox::OutboxCounts;
use switchboard_sdk::privacy::{FieldKind, Gate, Schema};
use switchboard_sdk::proto::{CreateAgent, SendMessage};
use switchboard_sdk::{
    Client, Consumer, ConsumerConfig, Delivery, LocalDb, Outbox, OutboxConfig, Outcome,
    RetryPolicy, Target,
};
use switchboard_tests::TestDatabase;
use switchboard_tests::chaos::{ChaosRow, Scale};
use switchboard_tests::faultproxy::{Fault, FaultProxy, Mix};
use tokio_util::sync::CancellationToken;

const RECEIVERS: [&str; 3] = ["r0", "r1", "r2"];
const SENDERS: usize = 2;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The faults drawn at random in the agents' episodes.
fn agent_mix() -> Mix {
    Mix(vec![
        (Fault::Pass, 4),
        (Fault::Delay(Duration::from_millis(150)), 2),
        (Fault::Blackhole, 1),
        (Fault::Reset(Duration::from_millis(800)), 2),
        (Fault::HalfOpen, 1),
        (Fault::SlowRead(64), 1),
    ])
}

/// A client of the server through the proxy: short timeouts, so a blackholed
/// request is given up soon and retried.
fn proxied(url: &str, token: &str) -> Client {
    Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .request_timeout(Duration::from_secs(3))
        .build(url, token)
        .expect("client")
}

/// One handler run: which receiver, sender, number, delivery attempt, when.
#[derive(Debug, Clone)]
struct Handled {
    sender: u64,
    n: u64,
    seq: u64,
    attempts: u32,
    at: Instant,
}

fn gate() -> Gate {
    Gate::new().schema(
        Schema::new("note")
            .field("sender", FieldKind::Integer)
            .field("n", FieldKind::Integer),
    )
}

/// Waits until every consumer reports `mode` (at most `limit`); `false` if not.
async fn all_in_mode(
    statuses: &[tokio::sync::watch::Receiver<switchboard_sdk::consumer::ConsumerStatus>],
    want: fn(&Mode) -> bool,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if statuses.iter().all(|s| want(&s.borrow().mode)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Agents ↔ server on SQLite: senders with durable outboxes and consumers (SSE and
/// polling) reach the server only through the fault proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_ride_out_network_faults_losing_nothing() {
    let scale = Scale::current();
    let window = scale.duration(Duration::from_secs(20), Duration::from_secs(240));
    let per_sender: u64 = scale.pick(150, 1_500);
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(
        serve_command(&sqlite_url(dir.path()), dir.path())
            .args(["--heartbeat-seconds", "1", "--worker-interval-ms", "100"])
            .env("SWITCHBOARD_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let token = std::fs::read_to_string(dir.path().join("operator-token")).expect("token");
    // The operator talks to the server directly: it sets up and checks.
    let op = Client::new(&serve.url, token.trim()).expect("client");
    let target = serve
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("serve's address");
    let proxy = FaultProxy::start(target).await.expect("proxy");
    eprintln!("fault proxy seed {}", proxy.seed());
    let url = proxy.http_url();

    let mut tokens = HashMap::new();
    for name in RECEIVERS
        .iter()
        .map(|r| (*r).to_owned())
        .chain((0..SENDERS).map(|s| format!("s{s}")))
    {
        let created = op
            .create_agent(&CreateAgent { name: name.clone() })
            .await
            .expect("create agent");
        tokens.insert(name, created.token.as_str().to_owned());
    }

    let stop = CancellationToken::new();
    // Consumers: the SDK's, with SSE, through the proxy.
    let handled: Arc<Mutex<HashMap<&'static str, Vec<Handled>>>> = Arc::default();
    let mut consumers = Vec::new();
    let mut statuses = Vec::new();
    for receiver in RECEIVERS {
        let db = LocalDb::open(dir.path().join(format!("{receiver}.db")))
            .await
            .expect("local db");
        let mut config = ConsumerConfig::default();
        config.lease = Duration::from_secs(4);
        config.batch = 10;
        config.heartbeat_timeout = Duration::from_secs(3);
        config.min_poll = Duration::from_millis(200);
        config.max_poll = Duration::from_secs(2);
        config.retry_base = Duration::from_millis(200);
        config.retry_cap = Duration::from_secs(2);
        let consumer = Consumer::new(proxied(&url, &tokens[receiver]), receiver, db, config);
        statuses.push(consumer.status());
        let handled = handled.clone();
        let handler = move |d: Delivery| {
            let handled = handled.clone();
            async move {
                let payload = d.event.payload.clone().unwrap_or_default();
                handled
                    .lock()
                    .expect("handled")
                    .entry(receiver)
                    .or_default()
                    .push(Handled {
                        sender: payload["sender"].as_u64().expect("sender"),
                        n: payload["n"].as_u64().expect("n"),
                        seq: d.event.seq,
                        attempts: d.event.attempts,
                        at: Instant::now(),
                    });
                Outcome::Ack
            }
        };
        let stop = stop.clone();
        consumers.push(tokio::spawn(
            async move { consumer.run(handler, stop).await },
        ));
    }
    assert!(
        all_in_mode(&statuses, |m| *m == Mode::Sse, Duration::from_secs(10)).await,
        "the consumers subscribed"
    );

    // Senders: each its own outbox file, through the proxy.
    let mut outboxes = Vec::new();
    let mut runs = Vec::new();
    let mut feeders = Vec::new();
    let mut outbox_config = OutboxConfig::default();
    outbox_config.base_delay = Duration::from_millis(100);
    outbox_config.max_delay = Duration::from_secs(2);
    for s in 0..SENDERS {
        let db = LocalDb::open(dir.path().join(format!("s{s}.db")))
            .await
            .expect("local db");
        let client = proxied(&url, &tokens[&format!("s{s}")]);
        let outbox = Outbox::open(db, &client, gate(), outbox_config.clone())
            .await
            .expect("outbox");
        outboxes.push(outbox.clone());
        runs.push(tokio::spawn({
            let (outbox, stop) = (outbox.clone(), stop.clone());
            async move { outbox.run(stop).await }
        }));
        // Spread over the fault window, in order: message i to receiver i mod 3.
        let pace = window / u32::try_from(per_sender).expect("fits");
        feeders.push(tokio::spawn(async move {
            for n in 0..per_sender {
                let receiver = RECEIVERS[(n as usize) % RECEIVERS.len()];
                let message = SendMessage {
                    payload: serde_json::json!({ "sender": s, "n": n }),
                    ..Default::default()
                };
                outbox
                    .enqueue(Target::Agent(receiver.to_owned()), "note", message)
                    .await
                    .expect("enqueue");
                tokio::time::sleep(pace).await;
            }
        }));
    }

    // Episodes of random faults, each ended by a heal; one with the SSE subscribe
    // blackholed (claims pass), ended by a silent heal (no RST).
    let started = Instant::now();
    let mut heals: Vec<Instant> = Vec::new();
    let mut episodes = 0u32;
    let mut sse_checked = false;
    while started.elapsed() < window {
        episodes += 1;
        if episodes == 2 {
            // SSE blackholed: new subscribes hang, claims pass.
            proxy.swallow(Some(b"/subscribe"));
            proxy.cut_all();
            assert!(
                all_in_mode(
                    &statuses,
                    |m| matches!(m, Mode::Polling { .. }),
                    Duration::from_secs(15)
                )
                .await,
                "the consumers fell back to polling while SSE was blackholed"
            );
            let before: usize = handled
                .lock()
                .expect("handled")
                .values()
                .map(Vec::len)
                .sum();
            tokio::time::sleep(Duration::from_secs(3)).await;
            let after: usize = handled
                .lock()
                .expect("handled")
                .values()
                .map(Vec::len)
                .sum();
            assert!(
                after > before,
                "events still arrived while SSE was blackholed ({before} → {after})"
            );
            assert!(proxy.swallowed() > 0, "subscribes were swallowed");
            // The network heals silently: the hung subscribes get no RST.
            proxy.swallow(None);
            heals.push(Instant::now());
            assert!(
                all_in_mode(&statuses, |m| *m == Mode::Sse, Duration::from_secs(20)).await,
                "SSE recovered by itself after a silent heal: {:?}",
                statuses.iter().map(|s| s.borrow().mode).collect::<Vec<_>>()
            );
            sse_checked = true;
            continue;
        }
        proxy.set_mix(agent_mix());
        // Cut what is open every second, so the clients' pooled connections are
        // made again and meet the faults.
        for _ in 0..3 {
            proxy.cut_all();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        proxy.heal();
        heals.push(Instant::now());
        tokio::time::sleep(Duration::from_millis(1_500)).await;
    }
    proxy.heal();
    let healed = Instant::now();
    heals.push(healed);
    for f in feeders {
        f.await.expect("feeder");
    }
    let total = per_sender * SENDERS as u64;

    // Drain: every outbox empty, every message handled, the inbox settled.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut open = 0;
        for o in &outboxes {
            let OutboxCounts {
                queued,
                sending,
                retryable,
                ..
            } = o.counts().await.expect("counts");
            open += queued + sending + retryable;
        }
        let distinct = {
            let h = handled.lock().expect("handled");
            h.values()
                .flatten()
                .map(|x| (x.sender, x.n))
                .collect::<std::collections::HashSet<_>>()
                .len() as u64
        };
        let totals = op.overview().await.expect("overview").totals;
        if open == 0 && distinct == total && totals.pending + totals.claimed == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not drained 90 s after healing: {open} open in the outboxes, {distinct} of \
             {total} handled, {totals:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drain = healed.elapsed();
    stop.cancel();
    for c in consumers {
        c.await.expect("consumer").expect("consumer ran");
    }
    for r in runs {
        r.await.expect("outbox run").expect("outbox ran");
    }

    // The oracle.
    let handled = handled.lock().expect("handled").clone();
    let mut row = ChaosRow::new("net-agents", "sqlite");
    row.sent = total;
    let mut seen: HashMap<(u64, u64), u32> = HashMap::new();
    let mut reordered = 0u64;
    let mut redelivered_out_of_order = 0u64;
    for (receiver, runs) in &handled {
        let mut highest: BTreeMap<u64, u64> = BTreeMap::new();
        for h in runs {
            *seen.entry((h.sender, h.n)).or_default() += 1;
            let top = highest.entry(h.sender).or_insert(0);
            if h.n < *top && *top > 0 {
                // Handled after a later message of the same sender. Legitimate only
                // for a redelivery (its first claim's answer was lost, its lease ran
                // out meanwhile); a first delivery out of order is a reorder.
                if h.attempts > 1 {
                    redelivered_out_of_order += 1;
                } else {
                    eprintln!("{receiver}: sender {} n {} after n {top}", h.sender, h.n);
                    reordered += 1;
                }
            }
            *top = (*top).max(h.n);
        }
    }
    // The stored order: each receiver's inbox (sequence numbers as handed out),
    // per sender, in send order; and one event per message (terminal events carry
    // no payload, so the inbox is read for its count only).
    let mut stored = 0u64;
    for receiver in RECEIVERS {
        let by_seq: BTreeMap<u64, (u64, u64)> = handled
            .get(receiver)
            .into_iter()
            .flatten()
            .map(|h| (h.seq, (h.sender, h.n)))
            .collect();
        let mut last: HashMap<u64, u64> = HashMap::new();
        for (seq, (s, n)) in &by_seq {
            if last.get(s).is_some_and(|prev| prev >= n) {
                eprintln!(
                    "{receiver}: seq {seq} holds sender {s} n {n} after n {}",
                    last[s]
                );
                reordered += 1;
            }
            last.insert(*s, *n);
        }
        let agent = Client::new(&serve.url, tokens[receiver].as_str()).expect("client");
        let mut cursor = 0;
        loop {
            let page = agent.poll(receiver, cursor, Some(500)).await.expect("poll");
            stored += page.events.len() as u64;
            cursor = page.next_cursor;
            if !page.has_more {
                break;
            }
        }
    }
    let stored_twice = seen.values().filter(|&&c| c > 1).count() as u64;
    let dedup: u64 = statuses.iter().map(|s| s.borrow().deduplicated).sum();
    row.acknowledged = op.overview().await.expect("overview").totals.completed;
    row.lost = total.saturating_sub(seen.len() as u64);
    row.reordered = reordered;
    row.duplicated = dedup + stored_twice;
    row.server_5xx = proxy.http_5xx();
    let all: Vec<&Handled> = handled.values().flatten().collect();
    row.recovery_ms = heals
        .iter()
        .filter_map(|h| all.iter().filter(|x| x.at > *h).map(|x| x.at - *h).min())
        .max()
        .map(ms);
    row.note = format!(
        "{episodes} episodes in {:.0} s, connections: {}; {} subscribes swallowed; \
         {redelivered_out_of_order} redelivered after a lost claim; drained {:.1} s after heal; seed {}",
        window.as_secs_f64(),
        proxy.summary(),
        proxy.swallowed(),
        drain.as_secs_f64(),
        proxy.seed()
    );
    row.record();
    assert_eq!(row.lost, 0, "lost");
    assert_eq!(row.reordered, 0, "reordered");
    assert_eq!(stored_twice, 0, "a message handled twice: stored twice");
    assert_eq!(row.acknowledged, total, "every message acked");
    assert_eq!(stored, total, "one event stored per message");
    assert!(sse_checked, "the SSE episode ran");
}

/// No request may take longer than this: the pool's acquire timeout (5 s), the
/// statement timeout (15 s), or the server's request deadline on a networked
/// database (20 s) answers first.
const LONGEST: Duration = Duration::from_secs(22);

/// `url` (`postgres://user:pw@host:port/db…`) with its host and port replaced.
fn via(url: &str, addr: std::net::SocketAddr) -> (String, std::net::SocketAddr) {
    let at = url.find('@').expect("user info") + 1;
    let end = url[at..].find('/').map_or(url.len(), |i| at + i);
    let target = url[at..end]
        .replace("localhost", "127.0.0.1")
        .parse()
        .expect("host:port");
    (format!("{}{addr}{}", &url[..at], &url[end..]), target)
}

/// Server ↔ PostgreSQL: serve's database URL points at the fault proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs PostgreSQL: cargo xtask test runs it"]
async fn the_server_rides_out_database_network_faults_without_a_restart() {
    let scale = Scale::current();
    let db = TestDatabase::create()
        .await
        .expect("SWITCHBOARD_TEST_POSTGRES (or _MYSQL) is set");
    let backend = db.backend.name();
    // Start with a healthy proxy: the proxy's target is the database server.
    let (_, target) = via(&db.url, "127.0.0.1:1".parse().expect("addr"));
    let proxy = FaultProxy::start(target).await.expect("proxy");
    eprintln!("fault proxy seed {}", proxy.seed());
    let (proxied_url, _) = via(&db.url, proxy.addr());
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(
        serve_command(&proxied_url, dir.path())
            .args(["--worker-interval-ms", "200"])
            .env("SWITCHBOARD_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let token = std::fs::read_to_string(dir.path().join("operator-token")).expect("token");
    let client = |token: &str| {
        Client::builder()
            .retry(RetryPolicy::none())
            .request_timeout(Duration::from_secs(60))
            .build(&serve.url, token)
            .expect("client")
    };
    let op = client(token.trim());
    let created = op
        .create_agent(&CreateAgent {
            name: "worker".to_owned(),
        })
        .await
        .expect("create agent");
    let agent = client(created.token.as_str());

    let stop = Arc::new(AtomicBool::new(false));
    let outage = Arc::new(Outage::default());
    let sent: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let slowest = Arc::new(Mutex::new(Duration::ZERO));

    // The sender: message n with key n until it is accepted, then n + 1.
    let sender = tokio::spawn({
        let (op, stop, sent, outage, slowest) = (
            op.clone(),
            stop.clone(),
            sent.clone(),
            outage.clone(),
            slowest.clone(),
        );
        async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let message = SendMessage {
                    payload: serde_json::json!({ "n": n }),
                    ..Default::default()
                };
                let began = Instant::now();
                let result = op
                    .send_message("worker", &message, &format!("netfault-{n}"))
                    .await;
                let took = began.elapsed();
                {
                    let mut s = slowest.lock().expect("slowest");
                    *s = (*s).max(took);
                }
                assert!(took < LONGEST, "a send hung {took:?}");
                match result {
                    Ok(_) => {
                        sent.lock().expect("sent").push((n, Instant::now()));
                        n += 1;
                    }
                    Err(e) => {
                        outage.failed(&e, "send");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
    });

    // The claimer (a 5 s lease: what an outage strands comes back soon).
    let worker = Worker::start(agent.clone(), "worker", 5, LONGEST, outage.clone());

    let episodes: Vec<(&str, Mix, Duration)> = vec![
        (
            "reset",
            Mix::only(Fault::Reset(Duration::from_millis(300))),
            Duration::from_secs(3),
        ),
        (
            "blackhole",
            Mix::only(Fault::Blackhole),
            // Past the 5 s acquire timeout with room for a busy machine (8 s was
            // once too short on MariaDB in a full `cargo xtask test`).
            Duration::from_secs(12),
        ),
        (
            "delay",
            Mix::only(Fault::Delay(Duration::from_millis(100))),
            Duration::from_secs(3),
        ),
        (
            "half-open",
            Mix::only(Fault::HalfOpen),
            // Past the 5 s acquire timeout with room for a busy machine (8 s was
            // once too short on MariaDB in a full `cargo xtask test`).
            Duration::from_secs(12),
        ),
        // The pool's connections go silent under it (no RST), new ones blackholed.
        (
            "freeze",
            Mix::only(Fault::Blackhole),
            // Past LONGEST: a request held by a dead connection would show.
            Duration::from_secs(24),
        ),
        // The database ends the server's sessions (an operator's
        // pg_terminate_backend, MariaDB's KILL CONNECTION) again and again.
        ("terminate", Mix::only(Fault::Pass), Duration::from_secs(4)),
        (
            "random",
            Mix(vec![
                (Fault::Pass, 3),
                (Fault::Delay(Duration::from_millis(50)), 2),
                (Fault::Reset(Duration::from_millis(500)), 2),
                (Fault::Blackhole, 1),
                (Fault::HalfOpen, 1),
            ]),
            scale.duration(Duration::from_secs(6), Duration::from_secs(120)),
        ),
    ];
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(!sent.lock().expect("sent").is_empty(), "the load runs");
    let mut recovery = Duration::ZERO;
    let mut terminated = 0;
    let mut names = Vec::new();
    for (name, mix, hold) in episodes {
        names.push(name);
        let failures_before = outage.failures();
        proxy.set_mix(mix);
        if name == "freeze" {
            // Slow first, so statements are in flight when the path dies.
            proxy.set_mix(Mix::only(Fault::Delay(Duration::from_millis(200))));
            proxy.cut_all();
            tokio::time::sleep(Duration::from_millis(1_500)).await;
            proxy.set_mix(Mix::only(Fault::Blackhole));
            proxy.freeze_all();
        } else if name != "terminate" {
            // The pool's connections meet the fault too.
            proxy.cut_all();
        }
        if name == "terminate" {
            let until = Instant::now() + hold;
            while Instant::now() < until {
                terminated += db.kill_sessions().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            assert!(terminated > 0, "terminate: the server had sessions to end");
        } else if name == "random" {
            // Pooled connections are made again every 2 s and meet the mix.
            let until = Instant::now() + hold;
            while Instant::now() < until {
                tokio::time::sleep(
                    Duration::from_secs(2).min(until.saturating_duration_since(Instant::now())),
                )
                .await;
                proxy.cut_all();
            }
        } else {
            tokio::time::sleep(hold).await;
        }
        if matches!(name, "blackhole" | "half-open" | "freeze") {
            assert!(
                outage.failures() > failures_before,
                "{name}: requests were answered (503), not held"
            );
        }
        proxy.heal();
        let healed = Instant::now();
        let deadline = healed + Duration::from_secs(30);
        // Recovery: the first send accepted after the heal.
        loop {
            let first = sent
                .lock()
                .expect("sent")
                .iter()
                .find(|(_, at)| *at > healed)
                .map(|(_, at)| *at - healed);
            if let Some(took) = first {
                eprintln!("{name}: recovered in {took:?}");
                recovery = recovery.max(took);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: the same server did not recover within 30 s of healing"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
    stop.store(true, Ordering::SeqCst);
    sender.await.expect("sender");
    let sent: Vec<u64> = sent.lock().expect("sent").iter().map(|(n, _)| *n).collect();
    let worked = worker.drain(sent.len(), Duration::from_secs(40)).await;

    // Nothing lost, nothing twice, in order: the inbox holds one event per accepted
    // message, numbered as sent.
    let mut ns = Vec::new();
    let mut cursor = 0;
    loop {
        let page = agent.poll("worker", cursor, Some(500)).await.expect("poll");
        ns.extend(page.events.iter().map(|e| {
            *worked
                .numbers
                .get(&e.seq)
                .unwrap_or_else(|| panic!("seq {} was never claimed", e.seq))
        }));
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    let totals = op.overview().await.expect("overview").totals;
    let mut row = ChaosRow::new("net-database", backend);
    row.sent = sent.len() as u64;
    row.acknowledged = totals.completed;
    row.lost = sent.iter().filter(|n| !ns.contains(n)).count() as u64;
    row.reordered = ns.windows(2).filter(|w| w[0] >= w[1]).count() as u64;
    row.duplicated = worked
        .acked
        .values()
        .map(|&c| u64::from(c.saturating_sub(1)))
        .sum::<u64>()
        + (ns.len() as u64).saturating_sub(sent.len() as u64);
    row.server_5xx = outage.answered();
    row.recovery_ms = Some(ms(recovery));
    row.note = format!(
        "episodes {}; {terminated} sessions ended by the database; connections: {}; slowest request {:.1} s; {} keep-alive drops; seed {}",
        names.join(", "),
        proxy.summary(),
        slowest.lock().expect("slowest").as_secs_f64(),
        outage.dropped(),
        proxy.seed()
    );
    row.record();
    assert_eq!(row.lost, 0, "lost");
    assert_eq!(row.reordered, 0, "reordered");
    assert_eq!(ns.len(), sent.len(), "each accepted message stored once");
    assert_eq!(
        totals.completed as usize,
        sent.len(),
        "every message acked: {totals:?}"
    );
    assert_eq!(totals.pending + totals.claimed + totals.quarantined, 0);
}
