//! Wake-ups after commit. A [`Hub`] fans [`Wake`]s out to the SSE subscribers of each
//! agent and to the console's operator stream. It carries no payloads: subscribers
//! pull the events themselves.

use crate::store::Wake;
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
use tokio::sync::{broadcast, watch};

/// Capacity of the operator stream's channel. A console that falls this far behind
/// gets one catch-up signal instead of every missed one.
const CAPACITY: usize = 256;

/// What an agent's subscribers watch: one value per agent, not a queue per
/// subscriber (an idle SSE connection costs a receiver, 16 bytes, instead of a share
/// of a 256-slot ring). Wake-ups that come faster than a subscriber writes them
/// coalesce into one carrying the highest hint, as a subscriber that fell behind
/// the ring got before: they carry no payload, and the subscriber reads from its own
/// cursor or claims.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Latest {
    /// The last wake-up's cursor hint (a release's is its event's, below the head).
    hint: u64,
    /// The highest cursor hint notified.
    max: u64,
    /// How many wake-ups there were.
    notified: u64,
    /// How many "look again" wake-ups ([`Hub::wake_all`]) there were: a subscriber
    /// that sees this change answers with hint 0, as the wake-up that changed it.
    look_again: u64,
}

impl Latest {
    /// The hint to send a subscriber that last saw `seen`: 0 ("look again") if a
    /// look-again wake-up came since; the wake-up's own hint if one came; the
    /// highest if several did.
    fn hint_since(&self, seen: &Latest) -> u64 {
        if self.look_again != seen.look_again {
            0
        } else if self.notified == seen.notified + 1 {
            self.hint
        } else {
            self.max
        }
    }

    fn notify(&mut self, hint: u64) {
        self.hint = hint;
        self.max = self.max.max(hint);
        self.notified += 1;
    }
}

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
    /// New work for the webhook deliverer: counts that move with each wake-up and
    /// each change of a callback (a `watch`, so a burst is one look).
    work: watch::Sender<Work>,
}

/// What the webhook deliverer watches ([`Hub::subscribe_work`]): the wake-ups the
/// store committed (here or on another instance, or a look-again), and the changes
/// of callbacks on this instance, each counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    pub wakes: u64,
    pub callbacks: u64,
}

struct AgentChannel {
    tx: watch::Sender<Latest>,
    count: u64,
}

/// An SSE stream's registration: its wake-ups, and the subscriber count, which
/// drops when it does.
pub struct Subscription {
    rx: watch::Receiver<Latest>,
    /// What this subscriber has written, from the moment it subscribed: a wake-up
    /// that comes before its stream starts is still one it has not written.
    seen: Latest,
    hub: Hub,
    agent: AgentId,
}

impl Subscription {
    /// Waits for the next wake-up and returns its hint: the wake-up's own if one
    /// came since the last, the highest if several did, 0 after a look-again.
    /// `None` once the hub is gone. Cancel-safe (for `select!`).
    pub async fn next(&mut self) -> Option<u64> {
        self.rx.changed().await.ok()?;
        let latest = *self.rx.borrow_and_update();
        let hint = latest.hint_since(&self.seen);
        self.seen = latest;
        Some(hint)
    }
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
                work: watch::Sender::new(Work::default()),
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
                ch.tx.send_modify(|latest| latest.notify(wake.cursor_hint));
            }
            let _ = self.inner.ops.send(OpsSignal::Changed(*wake));
        }
        drop(agents);
        self.inner.work.send_modify(|w| w.wakes += 1);
    }

    /// Wakes every subscriber of this instance (hint 0: "look again"), after
    /// wake-ups from other instances may have been missed (a lost connection).
    pub fn wake_all(&self) {
        let agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        for ch in agents.values() {
            ch.tx.send_modify(|latest| latest.look_again += 1);
        }
        drop(agents);
        self.inner.work.send_modify(|w| w.wakes += 1);
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

    /// Tells the console and the deliverer that a callback of `tenant` changed.
    pub fn callbacks(&self, tenant: TenantId) {
        let _ = self.inner.ops.send(OpsSignal::Callbacks(tenant));
        self.inner.work.send_modify(|w| w.callbacks += 1);
    }

    /// Tells the console that `tenant`'s client settings changed.
    pub fn client_settings(&self, tenant: TenantId) {
        let _ = self.inner.ops.send(OpsSignal::ClientSettings(tenant));
    }

    /// Tells the console the history has a new sample.
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
            tx: watch::Sender::new(Latest::default()),
            count: 0,
        });
        ch.count += 1;
        let rx = ch.tx.subscribe();
        let seen = *rx.borrow();
        Subscription {
            rx,
            seen,
            hub: self.clone(),
            agent,
        }
    }

    pub fn subscribe_ops(&self) -> broadcast::Receiver<OpsSignal> {
        self.inner.ops.subscribe()
    }

    /// The deliverer's wake-ups: the same the store hands this hub (its sink) for
    /// SSE, plus the changes of callbacks; not the console's own signals.
    pub fn subscribe_work(&self) -> watch::Receiver<Work> {
        self.inner.work.subscribe()
    }

    /// Live SSE subscriptions of `agent` on this server.
    pub fn subscribers(&self, agent: AgentId) -> u64 {
        let agents = self.inner.agents.lock().unwrap_or_else(|e| e.into_inner());
        agents.get(&agent).map_or(0, |c| c.count)
    }
}

/// The store's one road for wake-ups: its commits' and the other instances'.
impl crate::store::WakeSink for Hub {
    fn wake(&self, wakes: &[Wake]) {
        self.notify(wakes);
    }

    fn wake_all(&self) {
        Hub::wake_all(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn wake(agent: AgentId, cursor_hint: u64) -> Wake {
        Wake {
            tenant_id: TenantId::new(),
            agent_id: agent,
            cursor_hint,
        }
    }

    /// A hub, an agent, and a subscription to it.
    fn subscribed() -> (Hub, AgentId, Subscription) {
        let hub = Hub::new();
        let agent = AgentId::new();
        let sub = hub.subscribe(agent);
        (hub, agent, sub)
    }

    async fn next(sub: &mut Subscription) -> u64 {
        tokio::time::timeout(Duration::from_secs(10), sub.next())
            .await
            .expect("a wake-up")
            .expect("the hub is alive")
    }

    #[test]
    fn the_deliverer_sees_the_stores_wakeups_and_callback_changes_not_console_signals() {
        let hub = Hub::new();
        let mut work = hub.subscribe_work();
        let tenant = TenantId::new();
        let seen = *work.borrow_and_update();
        // The console's own signals are no work.
        hub.changed(wake(AgentId::new(), 1));
        hub.leases(tenant);
        hub.sampled();
        assert!(!work.has_changed().expect("the hub is alive"));
        // A wake-up the store committed (through its sink), and a look-again.
        crate::store::WakeSink::wake(&hub, &[wake(AgentId::new(), 3)]);
        assert!(work.has_changed().expect("alive"));
        let now = *work.borrow_and_update();
        assert_eq!((now.wakes, now.callbacks), (seen.wakes + 1, seen.callbacks));
        hub.wake_all();
        assert_eq!(work.borrow_and_update().wakes, seen.wakes + 2);
        // A callback changed: the deliverer counts its callbacks again.
        hub.callbacks(tenant);
        assert_eq!(work.borrow_and_update().callbacks, seen.callbacks + 1);
        // Nothing to send, no wake-up.
        hub.notify(&[]);
        assert!(!work.has_changed().expect("alive"));
    }

    #[tokio::test]
    async fn wakeups_a_subscriber_has_not_written_coalesce_into_the_highest_hint() {
        let (hub, agent, mut sub) = subscribed();
        // Two commits whose wake-ups arrive out of order (or a send, then a
        // release of an older event), and another agent's.
        hub.notify(&[wake(agent, 10)]);
        hub.notify(&[wake(agent, 5), wake(AgentId::new(), 99)]);
        assert_eq!(next(&mut sub).await, 10);
        // One write covered both: nothing else is pending.
        assert!(!sub.rx.has_changed().expect("the hub is alive"));
        // One wake-up alone keeps its own hint, even below the highest.
        hub.notify(&[wake(agent, 3)]);
        assert_eq!(next(&mut sub).await, 3);
    }

    #[tokio::test]
    async fn a_wakeup_between_subscribing_and_the_first_wait_is_not_lost() {
        // The SSE handler subscribes, reads the head, answers, and only then does its
        // stream first wait: a send that commits after the head was read must still
        // wake it.
        let (hub, agent, mut sub) = subscribed();
        hub.notify(&[wake(agent, 7)]);
        tokio::task::yield_now().await;
        assert_eq!(next(&mut sub).await, 7);
    }

    #[tokio::test]
    async fn a_look_again_wakeup_is_not_hidden_by_later_hints() {
        let (hub, agent, mut sub) = subscribed();
        hub.notify(&[wake(agent, 4)]);
        hub.wake_all();
        hub.notify(&[wake(agent, 9)]);
        assert_eq!(next(&mut sub).await, 0, "look again");
        hub.notify(&[wake(agent, 12)]);
        assert_eq!(next(&mut sub).await, 12);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscriber_writing_while_commits_notify_ends_on_the_last_hint() {
        let (hub, agent, mut sub) = subscribed();
        const LAST: u64 = 20_000;
        let notifier = {
            let hub = hub.clone();
            tokio::spawn(async move {
                for hint in 1..=LAST {
                    hub.notify(&[wake(agent, hint)]);
                    if hint % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        };
        let (mut writes, mut last) = (0u64, 0u64);
        while last < LAST {
            let hint = next(&mut sub).await;
            assert!(hint > last, "hints only grow: {hint} after {last}");
            (writes, last) = (writes + 1, hint);
        }
        notifier.await.expect("the notifier ends");
        assert_eq!(last, LAST);
        assert!(writes <= LAST);
        assert_eq!(hub.subscribers(agent), 1);
        drop(sub);
        assert_eq!(hub.subscribers(agent), 0);
    }
}
