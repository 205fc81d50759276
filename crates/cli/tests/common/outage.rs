//! Shared by the tests that take the database away from a running `serve` under load
//! (`db_restart.rs`, `network_faults.rs`): what a failed request may be during the
//! outage, and the worker that claims and acks through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchboard_sdk::proto::{ClaimRequest, ErrorCode};
use switchboard_sdk::{Client, Error};
use tokio::task::JoinHandle;

/// The requests that failed while the database was away.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    failures: AtomicU64,
    dropped: AtomicU64,
}

impl Outage {
    /// Counts a failed request. It must be a 503 problem document, or a keep-alive
    /// connection closed under the request (hyper's `IncompleteMessage`: the request
    /// never ran, and a real client retries it), counted apart. Anything else fails
    /// the test.
    ///
    /// Open finding (issue 17): a few fresh-clone runs saw the server close a
    /// connection right after it answered a request 503 when the pool timed out, and
    /// the next request on it failed. Every 503 now says `connection: close`; until
    /// runs have shown no drop since, they are tolerated and reported.
    pub(crate) fn failed(&self, e: &Error, what: &str) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        if let Error::Transport(t) = e
            && format!("{t:?}").contains("IncompleteMessage")
        {
            self.dropped.fetch_add(1, Ordering::SeqCst);
            eprintln!("{what}: a keep-alive connection was closed under the request: {t:?}");
            return;
        }
        assert_eq!(e.status(), Some(503), "{what}: {e} ({e:?})");
        assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{what}: {e}");
    }

    /// Every failed request so far.
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// The failed requests whose keep-alive connection was closed under them.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }

    /// The failed requests the server answered (503).
    pub(crate) fn answered(&self) -> u64 {
        self.failures() - self.dropped()
    }
}

/// What a [`Worker`] saw.
#[derive(Debug, Default, Clone)]
pub(crate) struct Worked {
    /// Acks that landed, by the message's `n` (its payload's `"n"`).
    pub(crate) acked: HashMap<u64, u32>,
    /// Each claimed event's sequence number → its `n` (terminal events lose their
    /// payload, so this is how the inbox's order is read back afterwards).
    pub(crate) numbers: HashMap<u64, u64>,
}

/// Claims an agent's events, ten at a time, and acks each (an ack retried with its
/// token until it lands), through whatever the database does meanwhile. A claim
/// whose answer was lost in the outage leaves its events leased: they come back
/// when the lease ends. An ack refused `409` (the lease ran out during the outage)
/// is fenced, and its event comes back too.
pub(crate) struct Worker {
    worked: Arc<Mutex<Worked>>,
    running: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Worker {
    /// Starts claiming `name`'s inbox as `agent` under leases of `lease_seconds`.
    /// Failures go to `outage`; any request that takes `longest` fails the test.
    pub(crate) fn start(
        agent: Client,
        name: &str,
        lease_seconds: u32,
        longest: Duration,
        outage: Arc<Outage>,
    ) -> Self {
        let worked: Arc<Mutex<Worked>> = Arc::default();
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn({
            let (name, worked, running) = (name.to_owned(), worked.clone(), running.clone());
            async move {
                let request = ClaimRequest {
                    limit: Some(10),
                    lease_seconds: Some(lease_seconds),
                    attempt_id: None,
                };
                while running.load(Ordering::SeqCst) {
                    let began = Instant::now();
                    let got = agent.claim(&name, &request).await;
                    let took = began.elapsed();
                    assert!(took < longest, "a claim hung {took:?}");
                    let events = match got {
                        Ok(r) => r.events,
                        Err(e) => {
                            outage.failed(&e, "claim");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    if events.is_empty() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                    for e in events {
                        let n = e
                            .event
                            .payload
                            .as_ref()
                            .and_then(|p| p["n"].as_u64())
                            .expect("n");
                        worked
                            .lock()
                            .expect("worked")
                            .numbers
                            .insert(e.event.seq, n);
                        let mut tries = 0;
                        loop {
                            let began = Instant::now();
                            let r = agent.ack(&name, e.event.event_id, e.claim_token).await;
                            assert!(began.elapsed() < longest, "an ack hung");
                            match r {
                                Ok(_) => {
                                    let mut worked = worked.lock().expect("worked");
                                    *worked.acked.entry(n).or_default() += 1;
                                    break;
                                }
                                Err(err) if err.status() == Some(409) => break,
                                Err(err) => {
                                    outage.failed(&err, "ack");
                                    tries += 1;
                                    assert!(tries < 400, "an ack never landed");
                                    tokio::time::sleep(Duration::from_millis(50)).await;
                                }
                            }
                        }
                    }
                }
            }
        });
        Self {
            worked,
            running,
            task,
        }
    }

    /// Waits until `count` distinct messages are acked (failing after `within`),
    /// stops the worker and returns what it saw.
    pub(crate) async fn drain(self, count: usize, within: Duration) -> Worked {
        let deadline = Instant::now() + within;
        loop {
            let acked = self.worked.lock().expect("worked").acked.len();
            if acked >= count {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{acked} of {count} acked {within:?} after the load stopped"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.running.store(false, Ordering::SeqCst);
        self.task.await.expect("worker");
        self.worked.lock().expect("worked").clone()
    }
}
