//! Load (issue 17, item 8): many agents on one `switchboard serve` process, each a
//! real SDK [`Consumer`] with its SSE wake-up stream and its claim/ack loop, while
//! operators send to them at random for a while. The server's resident memory is
//! sampled all along (`VmRSS` from `/proc`).
//!
//! The oracle, at the end: every send answered without an error, every event
//! handled once and acked (0 lost, 0 reordered per agent), no consumer left with an
//! error, the SSE streams open (the server counted its subscribers mid-run), idle
//! consumers quiet (claim requests bounded by the events and agents), and
//! memory bounded: the peak of the last quarter of the run no higher than 1.5 times
//! the peak of the second quarter plus 64 MiB (a leak per request or per connection
//! grows without end; caches level off).
//!
//! CI size: 200 agents for 20 s. `SWITCHBOARD_CHAOS=full` (`cargo xtask chaos`):
//! 1,000 agents for 10 minutes (`SWITCHBOARD_CHAOS_SECONDS` sets the length).

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_sdk::consumer::{ConsumerConfig, Delivery, Outcome};
use switchboard_sdk::local::LocalDb;
use switchboard_sdk::proto::{CreateAgent, SendMessage};
use switchboard_sdk::{Client, Consumer};
use switchboard_tests::Backend;
use switchboard_tests::chaos::{ChaosRow, Scale};
use tokio_util::sync::CancellationToken;

/// Agents that share one local state file (a file per agent would be 1,000 SQLite
/// pools in the test process; the consumers key their state by agent).
const AGENTS_PER_STATE: usize = 25;

/// The process's resident set, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_agents_for_minutes_in_bounded_memory() {
    if Backend::current() != Backend::Sqlite {
        return; // one process on its embedded database is what is measured
    }
    let scale = Scale::current();
    let agents: usize = scale.pick(200, 1_000);
    let run_for = scale.duration(Duration::from_secs(20), Duration::from_secs(600));
    let sample_every = scale.pick(Duration::from_secs(1), Duration::from_secs(10));
    let senders: u64 = 4;

    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(
        serve_command(&sqlite_url(dir.path()), dir.path())
            .env("SWITCHBOARD_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let pid = serve.child.id();
    let token = std::fs::read_to_string(dir.path().join("operator-token"))
        .expect("token file")
        .trim()
        .to_owned();
    let op = Client::new(&serve.url, token.as_str()).expect("client");

    let names: Vec<String> = (0..agents).map(|a| format!("load{a}")).collect();
    let handled: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let cancel = CancellationToken::new();
    let mut consumers = Vec::new();
    let mut statuses = Vec::new();
    let mut states = Vec::new();
    for (a, name) in names.iter().enumerate() {
        let created = op
            .create_agent(&CreateAgent { name: name.clone() })
            .await
            .expect("create agent");
        if a % AGENTS_PER_STATE == 0 {
            states.push(
                LocalDb::open(dir.path().join(format!("state{}.db", states.len())))
                    .await
                    .expect("local state"),
            );
        }
        let client = Client::new(&serve.url, created.token.as_str()).expect("client");
        let mut config = ConsumerConfig::default();
        config.lease = Duration::from_secs(30);
        let consumer = Consumer::new(
            client,
            name.as_str(),
            states.last().expect("a state").clone(),
            config,
        );
        statuses.push(consumer.status());
        let handled = handled.clone();
        let handler = move |d: Delivery| {
            handled.lock().unwrap().push((a, d.event.seq));
            std::future::ready(Outcome::Ack)
        };
        let cancel = cancel.clone();
        consumers.push(tokio::spawn(
            async move { consumer.run(handler, cancel).await },
        ));
    }

    // Senders, each message with its own key.
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let sent: Arc<Mutex<HashMap<usize, Vec<u64>>>> = Arc::default();
    let mut sender_tasks = Vec::new();
    for s in 0..senders {
        let (op, stop, errors, sent) = (op.clone(), stop.clone(), errors.clone(), sent.clone());
        let agents = names.clone();
        sender_tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let a = rand::random_range(0..agents.len());
                let message = SendMessage {
                    payload: serde_json::json!({ "s": s, "n": n }),
                    ..Default::default()
                };
                let r = op
                    .send_message(&agents[a], &message, &format!("load-{s}-{n}"))
                    .await;
                match r {
                    Ok(r) => sent.lock().unwrap().entry(a).or_default().push(r.seq),
                    Err(e) => {
                        eprintln!("send: {e}");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }));
    }

    // Sample the server's memory while the load runs.
    let started = Instant::now();
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    let mut subscribers_seen = 0;
    while started.elapsed() < run_for {
        tokio::time::sleep(sample_every).await;
        samples.push((started.elapsed(), rss_kib(pid)));
        if samples.len() == 3 {
            subscribers_seen = op.overview().await.expect("overview").subscribers;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in sender_tasks {
        t.await.expect("sender");
    }
    let sent = std::mem::take(&mut *sent.lock().unwrap());
    let total: usize = sent.values().map(Vec::len).sum();

    // Drain: every sent event handled.
    let deadline = Instant::now() + Duration::from_secs(scale.pick(60, 300));
    while handled.lock().unwrap().len() < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let claims: u64 = statuses.iter().map(|s| s.borrow().claims).sum();
    let consumer_errors: Vec<String> = statuses
        .iter()
        .filter_map(|s| s.borrow().last_error.clone())
        .collect();
    cancel.cancel();
    for c in consumers {
        let _ = c.await;
    }
    let end_rss = rss_kib(pid);
    let totals = op.overview().await.expect("overview").totals;

    // The oracle.
    let handled = handled.lock().unwrap().clone();
    let mut runs: HashMap<(usize, u64), u64> = HashMap::new();
    let mut last: HashMap<usize, u64> = HashMap::new();
    let mut reordered = 0;
    for (a, seq) in &handled {
        let count = runs.entry((*a, *seq)).or_default();
        *count += 1;
        if *count == 1 {
            let l = last.entry(*a).or_default();
            if seq < l {
                reordered += 1;
            }
            *l = (*l).max(*seq);
        }
    }
    let lost = sent
        .iter()
        .flat_map(|(a, seqs)| seqs.iter().map(move |s| (*a, *s)))
        .filter(|k| !runs.contains_key(k))
        .count() as u64;
    let twice = runs.values().filter(|&&c| c > 1).count() as u64;
    let quarter = samples.len() / 4;
    let peak = |part: &[(Duration, u64)]| part.iter().map(|(_, r)| *r).max().unwrap_or(0);
    let (second, last_quarter) = (
        peak(&samples[quarter..2 * quarter]),
        peak(&samples[3 * quarter..]),
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    let curve: Vec<String> = samples
        .iter()
        .step_by((samples.len() / 10).max(1))
        .map(|(t, r)| format!("{}s {:.0}", t.as_secs(), mib(*r)))
        .collect();

    let mut row = ChaosRow::new("load", "sqlite");
    row.sent = total as u64;
    row.acknowledged = totals.completed;
    row.lost = lost;
    row.reordered = reordered;
    row.duplicated = twice;
    row.server_5xx = errors.load(Ordering::Relaxed);
    row.note = format!(
        "{agents} agents (SSE + claim/ack) for {} s, {subscribers_seen} SSE subscribers mid-run, {claims} claim requests; server RSS MiB: 2nd-quarter peak {:.0}, last-quarter peak {:.0}, after {:.0}; over time: {}",
        run_for.as_secs(),
        mib(second),
        mib(last_quarter),
        mib(end_rss),
        curve.join(", ")
    );
    row.record();

    assert_eq!(errors.load(Ordering::Relaxed), 0, "every send answered");
    assert!(total > agents, "the load ran ({total} sends)");
    assert_eq!(lost, 0, "every event handled");
    assert_eq!(reordered, 0, "each agent's events handled in order");
    assert_eq!(twice, 0, "no event handled twice");
    assert_eq!(
        totals.completed, total as u64,
        "every event acked: {totals:?}"
    );
    assert!(consumer_errors.is_empty(), "consumers: {consumer_errors:?}");
    // Woken by SSE, a consumer claims two or three times per event (the event, an
    // empty answer, once more for a wake-up that came meanwhile), plus a few times
    // per (re)connection: never in a loop (busy, it claimed 300 times per event).
    let claim_bound = 3 * total as u64 + 4 * agents as u64;
    assert!(
        claims <= claim_bound,
        "{claims} claim requests for {total} events and {agents} agents (at most {claim_bound}): idle consumers poll"
    );
    assert!(
        subscribers_seen as usize >= agents * 9 / 10,
        "the agents' SSE streams are open ({subscribers_seen} of {agents})"
    );
    assert!(
        last_quarter <= second * 3 / 2 + 64 * 1024,
        "memory levels off: last-quarter peak {:.0} MiB against {:.0} MiB in the second quarter",
        mib(last_quarter),
        mib(second)
    );
}
