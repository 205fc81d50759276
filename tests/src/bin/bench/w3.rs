//! W3: wake-up latency with 1,000 subscribers. Every agent holds one SSE connection
//! on its `subscribe` stream (opened by this process, all SDK clients sharing one
//! connection pool); one sender agent sends at a fixed rate (200/s, `--rate`; open
//! loop: a send that is slow does not delay the next) to an agent picked at random
//! (fixed seed), for 10 s (2 s with `--quick`).
//! Each subscriber has two tasks: a reader that timestamps every `inbox_updated` the
//! moment it is parsed, and a worker that, woken by the reader, claims
//! (`limit` 16, until a claim comes back short) and acks what it claimed in one batch
//! (the ack is not timed). The server is the in-process [`BenchServer`] on a temp
//! SQLite file; agents and tokens are seeded into the file before it starts.
//!
//! What is measured, per send (monotonic clock, this process):
//! - `t_issue`: just before the send's request is issued; `t_201`: when its 201
//!   arrived. The commit happens somewhere between the two; the server notifies the
//!   subscribers right after the commit, before it writes the 201.
//! - *wake*: the first `inbox_updated` on the recipient's stream whose `cursor_hint`
//!   is at least the send's `seq` (a wake-up that covers it; one may cover several).
//! - *claimed*: when the claim response holding the event arrived.
//! - **commit → SSE** is reported as `wake − t_201`: a lower bound of the true
//!   commit → wake-up time (it leaves out the part of the 201's way back that the
//!   wake-up overlaps), and negative when the wake-up overtook the 201, which is
//!   common: both leave the server at about the same time. `wake − t_issue` (the
//!   whole send round trip included, so an upper bound) is reported next to it. The
//!   goal (p99 ≤ 3 ms) is checked on `wake − t_201`, as the issue defines it.
//! - **commit → claim** likewise: `claimed − t_201` (goal p99 ≤ 10 ms), and
//!   `claimed − t_issue` beside it.
//! - **missed**: sends whose agent got no covering wake-up within [`MISSED_AFTER`]
//!   of `t_201` (must be 0); **unclaimed**: events no claim returned within it.
//!
//! Server, sender and the 1,000 subscribers share this process and its CPUs (2 on
//! the reference machine), so scheduling delays of the client count too. Each send
//! costs the single SQLite writer three transactions (send, claim, ack), each with
//! its fsync: past the writer's capacity (W1's rate divided by about 3, less on a
//! busy machine) the sends queue and every latency grows with the queue.

use crate::Settings;
use crate::report::progress;
use crate::server::{BenchServer, DB_FILE, payload, temp_dir};
use crate::w2::seed;
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_sdk::proto::{AckEntry, ClaimRequest, SendMessage};
use switchboard_sdk::{Client, new_idempotency_key};
use switchboard_server::Hooks;
use switchboard_server::store::Store;
use switchboard_server::store::sqlite::SqliteStore;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Goals: p99 of commit → SSE and of commit → claim, in milliseconds.
const GOAL_SSE_P99_MS: f64 = 3.0;
const GOAL_CLAIM_P99_MS: f64 = 10.0;
/// A send without a covering wake-up this long after its 201 is missed.
const MISSED_AFTER: Duration = Duration::from_secs(5);
/// A claim takes at most this many events.
const CLAIM_LIMIT: u32 = 16;
const SENDER: &str = "w3-sender";

/// Percentiles of one latency, in milliseconds (signed: see the module docs).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Latency {
    pub(crate) count: usize,
    pub(crate) min_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p90_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl Latency {
    /// From samples in microseconds (sorted here); nearest-rank percentiles.
    fn of(mut us: Vec<i64>) -> Self {
        us.sort_unstable();
        let at = |q: f64| {
            if us.is_empty() {
                return f64::NAN;
            }
            let rank = ((q * us.len() as f64).ceil() as usize).clamp(1, us.len());
            us[rank - 1] as f64 / 1000.0
        };
        Self {
            count: us.len(),
            min_ms: at(0.0),
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }

    fn line(&self) -> String {
        format!(
            "p50 {:>7.2}  p90 {:>7.2}  p99 {:>7.2}  max {:>7.2}  (min {:.2}, n {})",
            self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms, self.min_ms, self.count
        )
    }
}

/// The result, written to `w3.json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct W3 {
    pub(crate) subscribers: usize,
    /// Sends per second asked for (open loop), and what was achieved.
    pub(crate) rate_per_sec: f64,
    pub(crate) achieved_per_sec: f64,
    pub(crate) seconds: f64,
    pub(crate) sends: usize,
    pub(crate) failed_sends: usize,
    /// `wake − t_201`: the commit → SSE figure the goal is checked on.
    pub(crate) commit_to_sse: Latency,
    /// `wake − t_issue`: upper bound (includes the whole send).
    pub(crate) issue_to_sse: Latency,
    /// `claimed − t_201`: the commit → claim figure the goal is checked on.
    pub(crate) commit_to_claim: Latency,
    /// `claimed − t_issue`.
    pub(crate) issue_to_claim: Latency,
    /// `t_201 − t_issue`: the send's round trip.
    pub(crate) send_round_trip: Latency,
    /// Sends without a covering wake-up within 5 s of the 201 (goal: 0).
    pub(crate) missed_wakeups: usize,
    /// Sent events no claim returned within 5 s of the 201.
    pub(crate) unclaimed: usize,
    /// Wake-ups received (one may cover several sends).
    pub(crate) wakeups: usize,
    pub(crate) claims: usize,
    pub(crate) goal_sse_p99_ms: f64,
    pub(crate) goal_claim_p99_ms: f64,
    pub(crate) goal_sse_met: bool,
    pub(crate) goal_claim_met: bool,
    pub(crate) goal_missed_met: bool,
    /// CPU time of this whole process (server, sender, subscribers) per send.
    pub(crate) cpu_us_per_send: f64,
    /// The machine's 1-minute load average before and after (other processes
    /// share the CPUs and spoil latencies).
    pub(crate) load_before: Option<f64>,
    pub(crate) load_after: Option<f64>,
    pub(crate) quick: bool,
}

impl W3 {
    pub(crate) fn print(&self) {
        let verdict = |met: bool| if met { "PASS" } else { "MISS" };
        println!(
            "\nW3 wake-ups: {} subscribers, {} sends at {:.0}/s asked ({:.0}/s achieved) \
             over {:.1} s, {} failed; {} wake-ups, {} claims; {:.0} µs CPU/send (whole process); \
             load average {} → {}",
            self.subscribers,
            self.sends,
            self.rate_per_sec,
            self.achieved_per_sec,
            self.seconds,
            self.failed_sends,
            self.wakeups,
            self.claims,
            self.cpu_us_per_send,
            load(self.load_before),
            load(self.load_after),
        );
        println!("  latency in ms                 {}", "-".repeat(60));
        println!(
            "  commit→SSE   (wake − 201)     {}  goal p99 ≤ {:.0} ms {}",
            self.commit_to_sse.line(),
            self.goal_sse_p99_ms,
            verdict(self.goal_sse_met)
        );
        println!(
            "  commit→claim (claimed − 201)  {}  goal p99 ≤ {:.0} ms {}",
            self.commit_to_claim.line(),
            self.goal_claim_p99_ms,
            verdict(self.goal_claim_met)
        );
        println!(
            "  wake − send issued            {}",
            self.issue_to_sse.line()
        );
        println!(
            "  claimed − send issued         {}",
            self.issue_to_claim.line()
        );
        println!(
            "  send round trip (201 − issue) {}",
            self.send_round_trip.line()
        );
        println!(
            "  missed wake-ups (none within {} s): {} (goal 0) {}; unclaimed: {}",
            MISSED_AFTER.as_secs(),
            self.missed_wakeups,
            verdict(self.goal_missed_met),
            self.unclaimed
        );
    }
}

/// What one subscriber saw: wake-ups `(cursor_hint, at)` in arrival order, and
/// `(seq, at)` for every event a claim returned.
#[derive(Default)]
struct Seen {
    wakes: Vec<(u64, Instant)>,
    claimed: Vec<(u64, Instant)>,
}

/// One send: recipient index, `seq` from the receipt, `t_issue`, `t_201`.
struct Sent {
    agent: usize,
    seq: u64,
    issued: Instant,
    answered: Instant,
}

pub(crate) async fn run(s: &Settings) -> Result<W3> {
    let subscribers = 1_000;
    let rate = s.w3_rate;
    let seconds = if s.quick { 2.0 } else { 10.0 };
    progress(format_args!(
        "W3: seeding {subscribers} agents, then {subscribers} SSE subscribers, \
         sends at {rate:.0}/s for {seconds:.0} s"
    ));
    let dir = temp_dir(&s.dir)?;
    let names: Vec<String> = (0..subscribers).map(|i| format!("w3-{i:05}")).collect();
    let seeded = {
        let url = format!("sqlite://{}", dir.path().join(DB_FILE).display());
        // Setup only: no fsync per agent; the server reopens with FULL.
        let store = SqliteStore::open(&url, "off", Hooks::default().store()).await?;
        let mut all = names.clone();
        all.push(SENDER.to_owned());
        let seeded = seed(&store, &all, 0, 1).await;
        store.close().await;
        seeded?
    };
    let server = BenchServer::start(dir).await?;
    let result = measure(s, &server, &seeded, subscribers, rate, seconds).await;
    server.stop().await?;
    result
}

async fn measure(
    s: &Settings,
    server: &BenchServer,
    seeded: &[crate::w2::Seeded],
    subscribers: usize,
    rate: f64,
    seconds: f64,
) -> Result<W3> {
    let (sender_seed, agents) = seeded.split_last().context("seeded agents")?;
    // One pool for all: `with_token` shares the operator client's connections.
    let sender = server.operator.with_token(sender_seed.token.as_str())?;
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let seen: Vec<Arc<Mutex<Seen>>> = (0..subscribers).map(|_| Arc::default()).collect();
    let opened = Instant::now();
    // Open the streams 32 at a time; each resolves after its first (initial) event.
    let mut opening = futures::stream::iter(agents.iter().enumerate())
        .map(|(i, agent)| {
            let client = server.operator.with_token(agent.token.as_str());
            let name = agent.name.clone();
            async move {
                let client = client?;
                let mut stream = client.subscribe(&name).await?;
                match stream.next().await {
                    Some(Ok(first)) if first.inbox_updated().is_some() => {}
                    other => bail!("{name}: no initial inbox_updated: {other:?}"),
                }
                anyhow::Ok((i, name, client, stream))
            }
        })
        .buffer_unordered(32);
    while let Some(open) = opening.next().await {
        let (i, name, client, mut stream) = open?;
        let wake = Arc::new(Notify::new());
        let (reader_seen, reader_wake, reader_cancel) =
            (seen[i].clone(), wake.clone(), cancel.clone());
        tasks.spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = reader_cancel.cancelled() => return Ok(()),
                    event = stream.next() => event,
                };
                let event = match event {
                    Some(event) => event?,
                    None => bail!("a subscriber's stream ended"),
                };
                if let Some(updated) = event.inbox_updated() {
                    let at = Instant::now();
                    lock(&reader_seen).wakes.push((updated.cursor_hint, at));
                    reader_wake.notify_one();
                }
            }
        });
        let (worker_seen, worker_cancel) = (seen[i].clone(), cancel.clone());
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = worker_cancel.cancelled() => return Ok(()),
                    () = wake.notified() => {}
                }
                claim_all(&client, &name, &worker_seen).await?;
            }
        });
    }
    drop(opening);
    progress(format_args!(
        "  {subscribers} streams open in {:.1} s",
        opened.elapsed().as_secs_f64()
    ));

    // The open-loop sender: one task per send, started on a fixed schedule.
    let message = Arc::new(SendMessage {
        payload: payload(0),
        ..SendMessage::default()
    });
    let total = (rate * seconds).round() as usize;
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut rng = SplitMix(SEED);
    let mut sends = JoinSet::new();
    let load_before = crate::report::load_average().map(|l| l[0]);
    let cpu0 = crate::report::cpu_seconds();
    let started = Instant::now();
    for _ in 0..total {
        ticks.tick().await;
        let agent = (rng.next() % subscribers as u64) as usize;
        let (sender, message, name) = (sender.clone(), message.clone(), agents[agent].name.clone());
        sends.spawn(async move {
            let issued = Instant::now();
            let receipt = sender
                .send_message(&name, &message, &new_idempotency_key())
                .await;
            let answered = Instant::now();
            receipt.map(|r| Sent {
                agent,
                seq: r.seq,
                issued,
                answered,
            })
        });
    }
    let (mut sent, mut failed) = (Vec::with_capacity(total), 0);
    while let Some(done) = sends.join_next().await {
        match done? {
            Ok(s) => sent.push(s),
            Err(e) => {
                failed += 1;
                if failed <= 3 {
                    progress(format_args!("  a send failed: {e}"));
                }
            }
        }
    }
    let send_secs = started.elapsed().as_secs_f64();
    // Wait until every send is covered and claimed, or MISSED_AFTER past the last 201.
    let last = sent
        .iter()
        .map(|s| s.answered)
        .max()
        .unwrap_or_else(Instant::now);
    loop {
        let pending = sent.iter().any(|s| {
            let seen = lock(&seen[s.agent]);
            !seen.claimed.iter().any(|&(seq, _)| seq == s.seq)
        });
        if !pending || last.elapsed() > MISSED_AFTER {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu = crate::report::cpu_seconds() - cpu0;
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done??;
    }

    let us = |later: Instant, earlier: Instant| -> i64 {
        match later.checked_duration_since(earlier) {
            Some(d) => d.as_micros() as i64,
            None => -(earlier.duration_since(later).as_micros() as i64),
        }
    };
    let (mut sse, mut issue_sse, mut claim, mut issue_claim, mut round) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut missed, mut unclaimed) = (0, 0);
    let claimed: Vec<HashMap<u64, Instant>> = seen
        .iter()
        .map(|s| lock(s).claimed.iter().copied().collect())
        .collect();
    for s in &sent {
        round.push(us(s.answered, s.issued));
        let seen = lock(&seen[s.agent]);
        let wake = seen.wakes.iter().find(|(hint, _)| *hint >= s.seq);
        match wake {
            Some(&(_, at)) if us(at, s.answered) <= MISSED_AFTER.as_micros() as i64 => {
                sse.push(us(at, s.answered));
                issue_sse.push(us(at, s.issued));
            }
            _ => missed += 1,
        }
        match claimed[s.agent].get(&s.seq) {
            Some(&at) if us(at, s.answered) <= MISSED_AFTER.as_micros() as i64 => {
                claim.push(us(at, s.answered));
                issue_claim.push(us(at, s.issued));
            }
            _ => unclaimed += 1,
        }
    }
    let wakeups = seen.iter().map(|s| lock(s).wakes.len()).sum();
    let claims = claimed.iter().map(HashMap::len).sum();
    let (commit_to_sse, commit_to_claim) = (Latency::of(sse), Latency::of(claim));
    let w3 = W3 {
        subscribers,
        rate_per_sec: rate,
        achieved_per_sec: sent.len() as f64 / send_secs,
        seconds: send_secs,
        sends: sent.len(),
        failed_sends: failed,
        goal_sse_met: commit_to_sse.p99_ms <= GOAL_SSE_P99_MS,
        goal_claim_met: commit_to_claim.p99_ms <= GOAL_CLAIM_P99_MS,
        goal_missed_met: missed == 0 && failed == 0,
        commit_to_sse,
        issue_to_sse: Latency::of(issue_sse),
        commit_to_claim,
        issue_to_claim: Latency::of(issue_claim),
        send_round_trip: Latency::of(round),
        missed_wakeups: missed,
        unclaimed,
        wakeups,
        claims,
        goal_sse_p99_ms: GOAL_SSE_P99_MS,
        goal_claim_p99_ms: GOAL_CLAIM_P99_MS,
        cpu_us_per_send: cpu * 1e6 / sent.len().max(1) as f64,
        load_before,
        load_after: crate::report::load_average().map(|l| l[0]),
        quick: s.quick,
    };
    progress(format_args!(
        "  commit→SSE p99 {:.2} ms, commit→claim p99 {:.2} ms, missed {}",
        w3.commit_to_sse.p99_ms, w3.commit_to_claim.p99_ms, w3.missed_wakeups
    ));
    Ok(w3)
}

/// Claims until a claim comes back short, acking each batch; records when each
/// event's claim answer arrived.
async fn claim_all(client: &Client, agent: &str, seen: &Mutex<Seen>) -> Result<()> {
    let request = ClaimRequest {
        limit: Some(CLAIM_LIMIT),
        ..ClaimRequest::default()
    };
    loop {
        let claimed = client.claim(agent, &request).await?;
        let at = Instant::now();
        lock(seen)
            .claimed
            .extend(claimed.events.iter().map(|e| (e.event.seq, at)));
        let acks: Vec<AckEntry> = claimed
            .events
            .iter()
            .map(|e| AckEntry {
                event_id: e.event.event_id,
                claim_token: e.claim_token,
            })
            .collect();
        if !acks.is_empty() {
            client.ack_batch(agent, &acks).await?;
        }
        if claimed.events.len() < CLAIM_LIMIT as usize {
            return Ok(());
        }
    }
}

/// A load average for the printout.
pub(crate) fn load(value: Option<f64>) -> String {
    value.map_or("?".to_owned(), |v| format!("{v:.2}"))
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fixed seed, so every run picks the same recipients.
const SEED: u64 = 0x5eed_0003;

/// SplitMix64: enough randomness to pick recipients (the `rand` crate is only a
/// dev-dependency here).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
