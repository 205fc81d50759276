//! Chaos, agents paused while they hold claims (issue 17, item 2): one `switchboard
//! agent run` process per agent consumes its inbox with a shell command as the
//! handler, while an operator sends numbered messages, and a fault loop freezes an
//! agent with SIGSTOP while the server shows it holding a claim, for longer than
//! the lease (2 s), then resumes it with SIGCONT. The scavenger gives the event back
//! meanwhile, so what the agent sends on waking (the ack of the handler it was
//! running, or an extension) carries a stale token: the server must refuse every such
//! write (`409 stale_claim`, counted as a stale-claim rejection), and the agent must
//! take it in its stride: claim again, recognise the event as handled (its local
//! dedup) and ack it without running the handler twice.
//!
//! The oracle, at the end: every answered send handled (0 lost), each agent's events
//! first handled in sequence order (0 reordered), no handler run twice for one event,
//! every event completed on the server with a single `acked` step in its history,
//! right after the `claimed` step of the claim in force (a stale ack that landed
//! would follow a `lease_expired` step),
//! stale writes refused (> 0 at CI size), and every `agent run` still running and
//! stopping cleanly (exit 0) on SIGTERM.
//!
//! CI size by default; `SWITCHBOARD_CHAOS=full` (`cargo xtask chaos`) runs 20 agents,
//! 3,000 events and 40 pauses. SQLite: what is under test is the agent, not the
//! database (the crash loop runs `agent run` against every backend).

mod common;

use common::{Serve, agent_run, handler_runs, serve_command, signal, sqlite_url};
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use switchboard_sdk::Client;
use switchboard_sdk::proto::{CreateAgent, SendMessage};
use switchboard_tests::Backend;
use switchboard_tests::chaos::{ChaosRow, Scale};

/// The lease each claim asks for; a pause is longer.
const LEASE_SECONDS: u64 = 2;

/// Each answered send's key (sender, number) → its agent and sequence number.
type Answered = HashMap<(u64, u64), (usize, u64)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agents_paused_holding_claims_are_fenced() {
    if Backend::current() != Backend::Sqlite {
        return; // the agent is under test; the server runs on SQLite
    }
    let scale = Scale::current();
    let agents: usize = scale.pick(4, 20);
    let senders: u64 = 2;
    let events: u64 = scale.pick(240, 3_000);
    let pauses: usize = scale.pick(6, 40);
    let per_sender = events / senders;

    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(
        serve_command(&sqlite_url(dir.path()), dir.path())
            .args(["--worker-interval-ms", "100"])
            .env("SWITCHBOARD_LOG", "warn")
            .stderr(Stdio::inherit()),
    );
    let token = std::fs::read_to_string(dir.path().join("operator-token"))
        .expect("token file")
        .trim()
        .to_owned();
    let op = Client::new(&serve.url, token.as_str()).expect("client");
    let out = dir.path().join("handled");
    std::fs::create_dir(&out).expect("mkdir");

    let names: Vec<String> = (0..agents).map(|a| format!("paused{a}")).collect();
    let mut processes = Vec::new();
    for name in &names {
        let created = op
            .create_agent(&CreateAgent { name: name.clone() })
            .await
            .expect("create agent");
        let state = dir.path().join(format!("{name}.db"));
        processes.push(agent_run(
            &serve.url,
            created.token.as_str(),
            name,
            &state,
            &out,
            LEASE_SECONDS,
            "0.2",
        ));
    }

    // Senders: each message with its own key, retried until answered.
    let answered: Arc<Mutex<Answered>> = Arc::default();
    let mut sender_tasks = Vec::new();
    for s in 0..senders {
        let (op, answered, names) = (op.clone(), answered.clone(), names.clone());
        sender_tasks.push(tokio::spawn(async move {
            for n in 0..per_sender {
                let agent = ((s * per_sender + n) % names.len() as u64) as usize;
                let message = SendMessage {
                    payload: serde_json::json!({ "s": s, "n": n }),
                    ..Default::default()
                };
                let key = format!("agents-{s}-{n}");
                let receipt = op
                    .send_message(&names[agent], &message, &key)
                    .await
                    .expect("send");
                answered
                    .lock()
                    .unwrap()
                    .insert((s, n), (agent, receipt.seq));
                // Spread the load over the run, so pauses meet claims.
                tokio::time::sleep(Duration::from_millis(scale.pick(60, 40))).await;
            }
        }));
    }

    // The fault loop: freeze an agent while it holds a claim, past its lease.
    let started = Instant::now();
    let mut rng = rand::rng();
    let mut paused_holding = 0;
    for _ in 0..pauses {
        tokio::time::sleep(Duration::from_millis(rng.random_range(300..1200))).await;
        let victim = rng.random_range(0..agents);
        // Wait (a little) for the server to show the victim holding a claim.
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut holding = false;
        while Instant::now() < deadline {
            let snap = op.snapshot(&names[victim]).await.expect("snapshot");
            if snap.counts.claimed > 0 {
                holding = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        signal(processes[victim].id(), "-STOP");
        paused_holding += u64::from(holding);
        let frozen = rng.random_range(LEASE_SECONDS * 1_000 + 1_000..LEASE_SECONDS * 1_000 + 2_500);
        tokio::time::sleep(Duration::from_millis(frozen)).await;
        signal(processes[victim].id(), "-CONT");
    }
    for t in sender_tasks {
        t.await.expect("sender");
    }
    let answered = std::mem::take(&mut *answered.lock().unwrap());

    // Drain: every event completed on the server.
    let drain_deadline = Instant::now() + Duration::from_secs(scale.pick(120, 600));
    loop {
        let totals = op.overview().await.expect("overview").totals;
        if totals.completed >= answered.len() as u64 || Instant::now() > drain_deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every agent survived its pauses and stops cleanly.
    let mut unclean = Vec::new();
    for (name, child) in names.iter().zip(processes.iter_mut()) {
        if let Some(status) = child.try_wait().expect("try_wait") {
            unclean.push(format!("{name} had exited: {status}"));
            continue;
        }
        signal(child.id(), "-TERM");
        let status = child.wait().expect("wait");
        if !status.success() {
            unclean.push(format!("{name} stopped with {status}"));
        }
    }
    let overview = op.overview().await.expect("overview");
    let fenced = overview
        .counters
        .as_ref()
        .map_or(0, |c| c.stale_claim_rejections_total);

    // The oracle.
    let runs = handler_runs(&out);
    let mut first: HashMap<(usize, u64), (u64, u64)> = HashMap::new();
    let mut times: HashMap<(String, u64), u64> = HashMap::new();
    let mut last_seq: HashMap<&str, u64> = HashMap::new();
    let mut reordered = 0;
    let mut seen_keys: HashSet<(u64, u64)> = HashSet::new();
    for r in &runs {
        let key = (
            r.payload["s"].as_u64().expect("s"),
            r.payload["n"].as_u64().expect("n"),
        );
        let count = times.entry((r.agent.clone(), r.seq)).or_default();
        *count += 1;
        if *count == 1 {
            let last = last_seq.entry(&r.agent).or_default();
            if r.seq < *last {
                reordered += 1;
            }
            *last = (*last).max(r.seq);
            let a = names.iter().position(|n| *n == r.agent).expect("agent");
            first.insert((a, r.seq), key);
        }
        seen_keys.insert(key);
    }
    let lost = answered
        .iter()
        .filter(|(key, (a, seq))| !seen_keys.contains(key) || first.get(&(*a, *seq)) != Some(key))
        .count() as u64;
    let handled_twice = times.values().filter(|&&c| c > 1).count() as u64;
    // Each event acked once, by the holder of its current claim.
    let mut acked_twice = 0;
    let mut acked_stale = 0;
    let mut page_after = None;
    loop {
        let page = op
            .events(&switchboard_sdk::proto::EventListQuery {
                after: page_after,
                limit: Some(500),
                ..Default::default()
            })
            .await
            .expect("list");
        for e in &page.events {
            let detail = op.event(e.event.event_id).await.expect("event");
            let acks = detail
                .history
                .iter()
                .filter(|h| h.action == "acked")
                .count();
            if acks != 1 {
                acked_twice += 1;
                eprintln!(
                    "{}: {acks} acked steps: {:?}",
                    e.event.event_id, detail.history
                );
            }
            // The ack that landed came from the claim in force: right after its
            // `claimed` step, with no `lease_expired` (or anything else) between.
            let steps: Vec<&str> = detail.history.iter().map(|h| h.action.as_str()).collect();
            if let Some(at) = steps.iter().position(|a| *a == "acked")
                && (at == 0 || steps[at - 1] != "claimed")
            {
                acked_stale += 1;
                eprintln!("{}: acked after {steps:?}", e.event.event_id);
            }
        }
        match page.next_cursor {
            Some(next) if !page.events.is_empty() => page_after = Some(next),
            _ => break,
        }
    }

    let mut row = ChaosRow::new("agents-paused", "sqlite");
    row.sent = answered.len() as u64;
    row.acknowledged = overview.totals.completed;
    row.lost = lost;
    row.reordered = reordered;
    row.duplicated = handled_twice;
    row.fenced = fenced;
    row.note = format!(
        "{pauses} SIGSTOPs of `agent run` ({paused_holding} while it held a claim), {} s frozen > {LEASE_SECONDS} s lease, {agents} agents over {} s; {acked_twice} events not acked exactly once, {acked_stale} acked by a claim no longer in force",
        LEASE_SECONDS + 1,
        started.elapsed().as_secs()
    );
    row.record();

    assert_eq!(answered.len() as u64, events, "every send answered");
    assert!(unclean.is_empty(), "agents: {unclean:?}");
    assert_eq!(lost, 0, "every answered send handled");
    assert_eq!(reordered, 0, "each agent's events first handled in order");
    assert_eq!(handled_twice, 0, "the agent's dedup runs no handler twice");
    assert_eq!(acked_twice, 0, "every event acked once");
    assert_eq!(acked_stale, 0, "I4: no ack but the current claim's lands");
    assert_eq!(
        overview.totals.completed, events,
        "every event completed: {:?}",
        overview.totals
    );
    assert!(
        paused_holding > 0 && fenced > 0,
        "agents were paused holding claims ({paused_holding}) and their stale writes refused ({fenced})"
    );
}
