//! The consumer loop every W2 drain runs, whatever serves the queues: Switchboard
//! over HTTP (on SQLite or PostgreSQL), a raw sqlx loop, or pgmq.
//!
//! `consumers` tasks each claim up to `batch` messages from one queue (an agent's
//! inbox), ack them, and claim again (where the side can, the ack and the next
//! claim are one request and one transaction, as the SDK's consumer does); when a
//! claim comes back empty the task moves to the next queue nobody has taken yet. Consumer `c` starts on queue
//! `c mod queues`, so with one queue every consumer drains it together, and with
//! many each mostly drains a queue of its own.

use crate::report::cpu_seconds;
use anyhow::{Result, ensure};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use switchboard_sdk::Client;
use switchboard_sdk::proto::{AckEntry, ClaimRequest, ClaimToken, EventId};
use tokio::task::JoinSet;

/// One drain: messages acked, wall time, and this process's CPU time meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drain {
    pub(crate) messages: u64,
    pub(crate) seconds: f64,
    pub(crate) cpu_seconds: f64,
}

impl Drain {
    pub(crate) fn per_sec(&self) -> f64 {
        self.messages as f64 / self.seconds
    }

    pub(crate) fn cpu_us_per_msg(&self) -> Option<f64> {
        (self.cpu_seconds > 0.0).then(|| self.cpu_seconds * 1e6 / self.messages as f64)
    }
}

/// The best of several repetitions by msgs/s (noise only slows).
pub(crate) fn best<T: Copy>(runs: &[T], per_sec: impl Fn(&T) -> f64) -> T {
    runs.iter()
        .copied()
        .max_by(|a, b| per_sec(a).total_cmp(&per_sec(b)))
        .expect("at least one repetition")
}

/// What a drain runs against: numbered queues with claim and ack.
pub(crate) trait Queues: Send + Sync + 'static {
    /// What acking one claimed message needs.
    type Claimed: Send + 'static;
    fn count(&self) -> usize;
    fn claim(
        &self,
        queue: usize,
        batch: u32,
    ) -> impl Future<Output = Result<Vec<Self::Claimed>>> + Send;
    /// Acks what one claim returned: in one request or statement where the side
    /// has a batch ack (Switchboard's `POST …/inbox/ack`, pgmq's `delete` of an id
    /// array), one by one otherwise.
    fn ack(
        &self,
        queue: usize,
        claimed: Vec<Self::Claimed>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Acks `claimed`, then claims up to `batch` more from the same queue: in one
    /// request and transaction where the side has that (Switchboard's ack with a
    /// `claim`), else [`ack`](Self::ack) then [`claim`](Self::claim).
    fn ack_and_claim(
        &self,
        queue: usize,
        claimed: Vec<Self::Claimed>,
        batch: u32,
    ) -> impl Future<Output = Result<Vec<Self::Claimed>>> + Send {
        async move {
            self.ack(queue, claimed).await?;
            self.claim(queue, batch).await
        }
    }
}

/// Drains every queue with `consumers` concurrent tasks; fails unless exactly
/// `expected` messages were acked.
pub(crate) async fn run<Q: Queues>(
    queues: Arc<Q>,
    consumers: usize,
    batch: u32,
    expected: usize,
) -> Result<Drain> {
    let count = queues.count();
    let next = Arc::new(AtomicUsize::new(consumers.min(count)));
    let cpu = cpu_seconds();
    let start = Instant::now();
    let mut set = JoinSet::new();
    for c in 0..consumers {
        let (queues, next) = (queues.clone(), next.clone());
        set.spawn(async move {
            let (mut queue, mut done) = (c % count, 0u64);
            let mut claimed = queues.claim(queue, batch).await?;
            loop {
                if claimed.is_empty() {
                    queue = next.fetch_add(1, Ordering::Relaxed);
                    if queue >= count {
                        return anyhow::Ok(done);
                    }
                    claimed = queues.claim(queue, batch).await?;
                    continue;
                }
                done += claimed.len() as u64;
                claimed = queues.ack_and_claim(queue, claimed, batch).await?;
            }
        });
    }
    let mut messages = 0;
    while let Some(done) = set.join_next().await {
        messages += done??;
    }
    let drain = Drain {
        messages,
        seconds: start.elapsed().as_secs_f64(),
        cpu_seconds: cpu_seconds() - cpu,
    };
    ensure!(
        messages == expected as u64,
        "the consumers acked {messages} of {expected} messages"
    );
    Ok(drain)
}

/// Switchboard over HTTP: queue `i` is agent `i`'s inbox, claimed and acked with
/// that agent's own token (default lease, 60 s).
pub(crate) struct Http {
    agents: Vec<(String, Client)>,
    /// Acks ride with the next claim (`POST …/inbox/ack` with `claim`); off: an ack
    /// request, then a claim request (before issue 16).
    with_claim: bool,
}

impl Http {
    /// `agents`: (name, bearer token) of each agent, in queue order.
    pub(crate) fn new(url: &str, agents: &[(String, String)]) -> Result<Arc<Self>> {
        let agents = agents
            .iter()
            .map(|(name, token)| Ok((name.clone(), Client::new(url, token.as_str())?)))
            .collect::<Result<_>>()?;
        Ok(Arc::new(Self {
            agents,
            with_claim: true,
        }))
    }

    /// Queues over clients made by the caller (one that signs, say): (name,
    /// client), each ack and each claim its own request.
    pub(crate) fn with_clients(agents: Vec<(String, Client)>) -> Arc<Self> {
        Arc::new(Self {
            agents,
            with_claim: false,
        })
    }

    /// [`new`](Self::new) with acks and claims as separate requests.
    pub(crate) fn separate(url: &str, agents: &[(String, String)]) -> Result<Arc<Self>> {
        let mut http = Arc::into_inner(Self::new(url, agents)?).expect("just made");
        http.with_claim = false;
        Ok(Arc::new(http))
    }
}

fn entries(claimed: &[(EventId, ClaimToken)]) -> Vec<AckEntry> {
    claimed
        .iter()
        .map(|&(event_id, claim_token)| AckEntry {
            event_id,
            claim_token,
        })
        .collect()
}

fn request(batch: u32) -> ClaimRequest {
    ClaimRequest {
        limit: Some(batch),
        lease_seconds: None,
        attempt_id: None,
    }
}

impl Queues for Http {
    type Claimed = (EventId, ClaimToken);

    fn count(&self) -> usize {
        self.agents.len()
    }

    async fn claim(&self, queue: usize, batch: u32) -> Result<Vec<Self::Claimed>> {
        let (name, client) = &self.agents[queue];
        let claimed = client.claim(name, &request(batch)).await?;
        Ok(claimed
            .events
            .into_iter()
            .map(|e| (e.event.event_id, e.claim_token))
            .collect())
    }

    async fn ack(&self, queue: usize, claimed: Vec<Self::Claimed>) -> Result<()> {
        let (name, client) = &self.agents[queue];
        if let [(event, token)] = claimed[..] {
            client.ack(name, event, token).await?;
            return Ok(());
        }
        let entries = entries(&claimed);
        let result = client.ack_batch(name, &entries).await?;
        refused(&result.results)
    }

    async fn ack_and_claim(
        &self,
        queue: usize,
        claimed: Vec<Self::Claimed>,
        batch: u32,
    ) -> Result<Vec<Self::Claimed>> {
        if !self.with_claim {
            self.ack(queue, claimed).await?;
            return self.claim(queue, batch).await;
        }
        let (name, client) = &self.agents[queue];
        let answer = client
            .ack_and_claim(name, &entries(&claimed), &request(batch))
            .await?;
        refused(&answer.results)?;
        Ok(answer
            .claimed
            .map(|c| c.events)
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.event.event_id, e.claim_token))
            .collect())
    }
}

fn refused(results: &[switchboard_sdk::proto::AckResult]) -> Result<()> {
    let failed = results.iter().filter(|r| r.state.is_none()).count();
    ensure!(
        failed == 0,
        "{failed} of {} acks were refused",
        results.len()
    );
    Ok(())
}
