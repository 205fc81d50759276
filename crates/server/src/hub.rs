//! Wake-ups after commit. A [`Hub`] fans [`Wake`]s out to the SSE subscribers of each
//! agent and to the console's operator stream. It carries no payloads: subscribers
//! pull the events themselves.

use crate::store::{RemoteWake, RemoteWakes, Wake};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use switchboard_proto::{AgentId, Job, TenantId};

/// What the operator stream hears.
#[derive(Debug, Clone)]
pub enum OpsSignal {
    /// An inbox changed.
    Changed(Wake),
    /// A bulk job of `TenantId` progressed or ended.
    Job(TenantId, Box<Job>),
    /// The overview's history took a sample (charts may redraw).
    Sampled,
    /// A lease of the tenant changed, or the fence refused a call.
    Leases(TenantId),
    /// A webhook callback of the tenant was registered, changed, or attempted.
    Callbacks(TenantId),
    /// The tenant's remote client settings changed.
    ClientSettings(TenantId),
}
use tokio::sync::broadcast;

/// Capacity of each channel. A subscriber that falls this far behind gets one
/// catch-up wake-up instead of every missed one.
const CAPACITY: usize = 256;

#[derive(Clone)]
pub struct Hub {
    inner: Arc<HubInner>,
}

struct HubInner {
    /// Per-agent channels, created on first subscription. `count` is the number of
    /// live SSE subscriptions (shown in the overview).
    agents: Mutex<HashMap<AgentId, AgentChannel>>,
    /// Every wake-up and job progress, for the console's operator stream.
    ops: broadcast::Sender<OpsSignal>,
}

struct AgentChannel {
    tx: broadcast::Sender<u64>,
    count: u64,
}

/// Decrements the subscriber count when an SSE stream ends.
pub struct Subscription {
    pub rx: broadcast::Receiver<u64>,
    hub: Hub,
    agent: AgentId,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut agents = self
            .hub
            .inner
            .agents
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(ch) = agents.get_mut(&self.agent) {
            ch.count = ch.count.saturating_sub(1);
            if ch.count == 0 {
                agents.remove(&self.agent);
            }
        }
    }
}

impl Default for Hub {
    fn default() -> Self {
        Self::new()
    }
}

impl Hub {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(HubInner {
                agents: Mutex::new(HashMap::new()),
                ops: broadcast::channel(CAPACITY).0,
            }),
        }
    }

    /// Sends the wake-ups. Call only after the transaction that made them committed.
    pub fn notify(&self, wakes: &[Wake]) {
        if wakes.is_empty() {
            return;
        }
        let agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        for wake in wakes {
            if let Some(ch) = agents.get(&wake.agent_id) {
                let _ = ch.tx.send(wake.cursor_hint);
            }
            let _ = self.inner.ops.send(OpsSignal::Changed(*wake));
        }
    }

    /// Wakes every subscriber of this instance (hint 0: "look again"), after
    /// wake-ups from other instances may have been missed (a lost connection).
    pub fn wake_all(&self) {
        let agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        for ch in agents.values() {
            let _ = ch.tx.send(0);
        }
    }

    /// A channel for [`Store::listen`](crate::store::Store::listen): what other
    /// instances committed is delivered here until every sender is dropped.
    pub fn remote_feed(&self) -> RemoteWakes {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let hub = self.clone();
        tokio::spawn(async move {
            while let Some(remote) = rx.recv().await {
                match remote {
                    RemoteWake::Wakes(wakes) => hub.notify(&wakes),
                    RemoteWake::All => hub.wake_all(),
                }
            }
        });
        tx
    }

    /// Tells only the console: something changed that gives agents no new work
    /// (an ack, a claim).
    pub fn changed(&self, wake: Wake) {
        let _ = self.inner.ops.send(OpsSignal::Changed(wake));
    }

    /// Tells the console a lease changed (or the fence refused a call).
    pub fn leases(&self, tenant: TenantId) {
        let _ = self.inner.ops.send(OpsSignal::Leases(tenant));
    }

    /// Tells the console the history has a new sample.
    /// Tells the console that a callback of `tenant` changed.
    pub fn callbacks(&self, tenant: TenantId) {
        let _ = self.inner.ops.send(OpsSignal::Callbacks(tenant));
    }

    /// Tells the console that `tenant`'s client settings changed.
    pub fn client_settings(&self, tenant: TenantId) {
        let _ = self.inner.ops.send(OpsSignal::ClientSettings(tenant));
    }

    pub fn sampled(&self) {
        let _ = self.inner.ops.send(OpsSignal::Sampled);
    }

    /// Tells the console how a bulk job is doing.
    pub fn job(&self, tenant: TenantId, job: &Job) {
        let _ = self
            .inner
            .ops
            .send(OpsSignal::Job(tenant, Box::new(job.clone())));
    }

    pub fn subscribe(&self, agent: AgentId) -> Subscription {
        let mut agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        let ch = agents.entry(agent).or_insert_with(|| AgentChannel {
            tx: broadcast::channel(CAPACITY).0,
            count: 0,
        });
        ch.count += 1;
        Subscription {
            rx: ch.tx.subscribe(),
            hub: self.clone(),
            agent,
        }
    }

    pub fn subscribe_ops(&self) -> broadcast::Receiver<OpsSignal> {
        self.inner.ops.subscribe()
    }

    /// Live SSE subscriptions of `agent` on this server.
    pub fn subscribers(&self, agent: AgentId) -> u64 {
        let agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        agents.get(&agent).map_or(0, |c| c.count)
    }
}
