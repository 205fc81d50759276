//! A server on PostgreSQL or MariaDB survives a restart of the database under
//! load: requests during the outage get a 503 problem document quickly (never a
//! hang), `/readyz` says so, and everything resumes by itself. Nothing committed is
//! lost, nothing is stored twice.
//!
//! Two outages: a restart (`pg_ctlcluster 15 main restart`, as an operator runs it;
//! PostgreSQL's takes well under a second, so requests mostly wait it out), then a
//! stop held for 7 s, during which requests and `/readyz` must answer 503.
//!
//! It stops the whole server, so it runs alone: `cargo xtask test` runs it after
//! each conformance suite with `SWITCHBOARD_TEST_DB_CTL` set to the control command
//! (`pg_ctlcluster 15 main`, or `…/xtask mariadb` for the MariaDB it started), and
//! the database URL of that step. Without it the test is ignored.

mod common;

use common::outage::{Outage, Worker};
use common::{Serve, serve_command};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use switchboard_sdk::proto::{CreateAgent, SendMessage};
use switchboard_sdk::{Client, RetryPolicy};
use switchboard_tests::TestDatabase;
use tokio::sync::Mutex;

/// No request may take longer than this, outage or not: the pool's acquire
/// timeout (5 s) or the statement timeout (15 s) answers first.
const LONGEST: Duration = Duration::from_secs(20);

fn client(url: &str, token: &str) -> Client {
    Client::builder()
        .retry(RetryPolicy::none())
        .request_timeout(Duration::from_secs(60))
        .build(url, token)
        .expect("client")
}

/// Runs `ctl action` (`pg_ctlcluster 15 main restart`), which returns when done.
async fn db_ctl(ctl: &str, action: &str) {
    let command = format!("{ctl} {action}");
    let status =
        tokio::task::spawn_blocking(move || Command::new("sh").args(["-c", &command]).status())
            .await
            .expect("join")
            .expect("run the database's control command");
    assert!(status.success(), "{ctl} {action} failed");
}

/// Waits (at most 30 s) until `/readyz` says ready again.
async fn recovered(op: &Client) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while op.readyz().await.is_err() {
        assert!(
            Instant::now() < deadline,
            "/readyz did not recover within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// On a failure, prints what `serve` wrote to stderr and starts the database
/// again, so that one failed run does not leave the next steps without it.
struct OnFailure {
    ctl: String,
    log: std::path::PathBuf,
}

impl Drop for OnFailure {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(200).collect();
        eprintln!("--- serve's stderr (last {} lines) ---", tail.len());
        for line in tail.iter().rev() {
            eprintln!("{line}");
        }
        let _ = Command::new("sh")
            .args(["-c", &format!("{} start", self.ctl)])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "restarts the database: set SWITCHBOARD_TEST_DB_CTL and SWITCHBOARD_TEST_POSTGRES or _MYSQL"]
async fn the_server_rides_out_a_database_restart_under_load() {
    let ctl = std::env::var("SWITCHBOARD_TEST_DB_CTL")
        .expect("SWITCHBOARD_TEST_DB_CTL is set (e.g. `pg_ctlcluster 15 main`)");
    let db = TestDatabase::create()
        .await
        .expect("SWITCHBOARD_TEST_POSTGRES or SWITCHBOARD_TEST_MYSQL is set");
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("serve.log");
    let _on_failure = OnFailure {
        ctl: ctl.clone(),
        log: log.clone(),
    };
    let stderr = std::fs::File::create(&log).expect("serve.log");
    let serve = Serve::start(serve_command(&db.url, dir.path()).stderr(Stdio::from(stderr)));
    let url = serve.url.clone();
    let token = std::fs::read_to_string(dir.path().join("operator-token")).expect("token");
    let op = client(&url, token.trim());
    let created = op
        .create_agent(&CreateAgent {
            name: "worker".to_owned(),
        })
        .await
        .expect("create agent");
    let agent = client(&url, created.token.as_str());

    let stop = Arc::new(AtomicBool::new(false));
    let sent: Arc<Mutex<Vec<u64>>> = Arc::default();
    let outage = Arc::new(Outage::default());

    // The sender: message n with key n until it is accepted, then n + 1.
    let sender = tokio::spawn({
        let (op, stop, sent, outage) = (op.clone(), stop.clone(), sent.clone(), outage.clone());
        async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let key = format!("restart-test-{n}");
                let message = SendMessage {
                    payload: serde_json::json!({ "n": n }),
                    ..Default::default()
                };
                let started = Instant::now();
                let result = op.send_message("worker", &message, &key).await;
                assert!(
                    started.elapsed() < LONGEST,
                    "a send hung {:?}",
                    started.elapsed()
                );
                match result {
                    Ok(_) => {
                        sent.lock().await.push(n);
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

    // The claimer. A claim whose answer was lost in the outage leaves its events
    // leased: they come back when the 10 s lease ends.
    let worker = Worker::start(agent.clone(), "worker", 10, LONGEST, outage.clone());

    // Readiness, sampled every 100 ms.
    let readiness: Arc<Mutex<Vec<bool>>> = Arc::default();
    let probe = tokio::spawn({
        let (op, stop, readiness) = (op.clone(), stop.clone(), readiness.clone());
        async move {
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let ok = op.readyz().await.is_ok();
                assert!(started.elapsed() < LONGEST, "/readyz hung");
                readiness.lock().await.push(ok);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = sent.lock().await.len();
    assert!(before > 0, "the load is running before the restart");
    db_ctl(&ctl, "restart").await;
    recovered(&op).await;
    let after_restart = sent.lock().await.len();
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert!(
        sent.lock().await.len() > after_restart,
        "sends resumed after the restart"
    );

    // A longer outage: everything answers 503, quickly, until the database is back.
    db_ctl(&ctl, "stop").await;
    let down = Instant::now();
    let failures_before = outage.failures();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let asked = Instant::now();
    let e = op
        .readyz()
        .await
        .expect_err("/readyz while the database is down");
    outage.failed(&e, "readyz");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "/readyz answered within its 1 s budget"
    );
    // A request waits for a connection at most 5 s (the pool's acquire timeout).
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(down.elapsed() < Duration::from_secs(12));
    assert!(
        outage.failures() > failures_before,
        "requests during the outage were answered (503), not held"
    );
    db_ctl(&ctl, "start").await;
    recovered(&op).await;
    let after_outage = sent.lock().await.len();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.store(true, Ordering::SeqCst);
    sender.await.expect("sender");
    probe.await.expect("probe");
    // Drain: until everything accepted is acked (at most a lease after the last
    // lost claim answer).
    let sent_count = sent.lock().await.len();
    let worked = worker.drain(sent_count, Duration::from_secs(40)).await;

    let sent = sent.lock().await.clone();
    assert!(
        sent.len() > after_outage,
        "sends resumed after the outage ({after_outage} before, {} in the end)",
        sent.len()
    );
    let readiness = readiness.lock().await.clone();
    assert!(
        readiness.iter().any(|ok| !ok),
        "/readyz reported the outage ({} probes)",
        readiness.len()
    );
    // Nothing lost, nothing twice: the inbox holds one event per accepted message
    // (a send retried with its key after a 503 was stored once), in a gapless
    // sequence.
    let mut seqs = Vec::new();
    let mut cursor = 0;
    loop {
        let page = agent.poll("worker", cursor, Some(500)).await.expect("poll");
        seqs.extend(page.events.iter().map(|e| e.seq));
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    assert_eq!(seqs, (1..=sent.len() as u64).collect::<Vec<_>>());
    let totals = op.overview().await.expect("overview").totals;
    assert_eq!(
        totals.completed as usize,
        sent.len(),
        "every accepted message was acked: {totals:?}"
    );
    assert_eq!(totals.pending + totals.claimed + totals.quarantined, 0);
    for n in &sent {
        assert_eq!(
            worked.acked.get(n),
            Some(&1),
            "message {n} acked exactly once"
        );
    }
    eprintln!(
        "restart under load: {} sent, {} failed attempts answered 503 or dropped ({} \
         dropped connections), {} readiness probes",
        sent.len(),
        outage.failures(),
        outage.dropped(),
        readiness.len()
    );
}
