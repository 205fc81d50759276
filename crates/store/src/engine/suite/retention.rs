//! Retention over the maintenance statements `maintenance.rs` checks: in batches,
//! with an archive that refuses or keeps what it takes, and with the archive written
//! outside the write transaction while a send and a purge race it.

use super::{message, message_with, send};
use crate::dialect::Dialect;
use crate::engine::inbox::Marks;
use crate::engine::maintenance::MaintenanceDriver;
use crate::*;
use switchboard_proto::EventStatus;

/// Every retention check, on `tenant`.
pub(super) async fn check<D: MaintenanceDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    check_retention(d, tenant).await;
    check_retention_locks_only_its_prefix(d, tenant).await;
    check_archived_retention(d, tenant).await;
    check_retention_in_batches(d, tenant).await;
    check_archive_outside_the_write(d, tenant).await;
}

/// `n` events of a new agent `name`, all expired (terminal) at 30.
async fn expired_prefix<D: MaintenanceDriver>(
    d: &Engine<D>,
    tenant: TenantId,
    name: &str,
    key: u8,
    n: u64,
) -> AgentRecord
where
    Engine<D>: Store,
{
    let agent = d
        .create_agent(tenant, name, &[key; 32], &[], None, 0)
        .await
        .expect("agent");
    for _ in 0..n {
        send(d, tenant, agent.id, &message_with(0, 5, 0, Some(20)), 10).await;
    }
    while d.reap(30).await.expect("reap").expired > 0 {}
    agent
}

/// A long prefix without an archive goes in transactions of at most
/// [`RETAIN_BATCH`] events (a long-offline agent's first pass never holds the writer
/// or the agent's row for one huge delete), and all of it goes.
async fn check_retention_in_batches<D: MaintenanceDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    use crate::engine::maintenance::RETAIN_BATCH;
    let n = 2 * u64::from(RETAIN_BATCH) + 500;
    let agent = expired_prefix(d, tenant, "offline-long", 26, n).await;
    let mut removed = 0;
    let mut batches = 0;
    // Other agents of earlier checks may have some too: count this agent's.
    loop {
        let stats = d.retain(1_000, 1_000, None).await.expect("retain");
        if stats.events_removed == 0 {
            break;
        }
        removed += stats.events_removed;
        batches += stats.batches;
    }
    assert!(removed >= n, "all of it goes: {removed}");
    assert!(
        batches >= 3,
        "{n} events in batches of at most {RETAIN_BATCH}: {batches} transactions"
    );
    assert!(matches!(
        d.poll(agent.id, 0, 1).await,
        Err(StoreError::CursorGone { oldest, .. }) if oldest == n
    ));
}

/// An archive sink that holds each batch until the test lets it go.
struct Held {
    taken: tokio::sync::mpsc::UnboundedSender<Vec<crate::ArchivedEvent>>,
    go: tokio::sync::Semaphore,
}

#[async_trait::async_trait]
impl ArchiveSink for Held {
    async fn archive(&self, batch: Vec<crate::ArchivedEvent>) -> Result<(), String> {
        let _ = self.taken.send(batch);
        self.go.acquire().await.map_err(|e| e.to_string())?.forget();
        Ok(())
    }
}

/// The archive is written outside retention's write transaction: while a batch is
/// being written (held here), a send to the same agent commits (it needs the agent's
/// row, and on SQLite the one writer) and an operator purges an event of the batch.
/// The pass then removes only what is still exactly as the archive took it; the
/// purged event and what follows stay for the next pass, which archives them again.
async fn check_archive_outside_the_write<D: MaintenanceDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    let agent = expired_prefix(d, tenant, "archived-held", 27, 6).await;
    let (taken, mut batches) = tokio::sync::mpsc::unbounded_channel();
    let sink = Held {
        taken,
        go: tokio::sync::Semaphore::new(0),
    };
    let pass = d.retain(1_000, 1_000, Some(&sink));
    let meanwhile = async {
        // Other agents' batches may come first: wait for this agent's.
        let batch = loop {
            let batch = batches.recv().await.expect("a batch");
            if batch.iter().all(|e| e.event.agent_id == agent.id) {
                break batch;
            }
            sink.go.add_permits(1);
        };
        assert_eq!(batch.len(), 6);
        let sent = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            d.send_direct(tenant, agent.id, &Actor::Operator, &message(7), None, 40),
        )
        .await
        .expect("a send commits while the archive is written")
        .expect("send");
        let purge = crate::Scope {
            action: switchboard_proto::BulkAction::Purge,
            ids: Some(&[batch[3].event.event_id]),
            filter: None,
        };
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            d.bulk(tenant, &purge, 10, &Actor::Operator, 1_000),
        )
        .await
        .expect("an operator's purge commits while the archive is written")
        .expect("purge");
        sink.go.add_permits(1_000);
        sent.value.event_id
    };
    let (stats, sent) = tokio::join!(pass, meanwhile);
    stats.expect("retain");
    // The pass removed 1..=3 as taken; the purged 4th had changed since it was
    // copied, so it was copied again (as purged) with what follows before it went.
    let ours: Vec<Vec<(u64, EventStatus)>> = std::iter::from_fn(|| batches.try_recv().ok())
        .filter(|b| b.iter().all(|e| e.event.agent_id == agent.id))
        .map(|b| b.iter().map(|e| (e.event.seq, e.event.status)).collect())
        .collect();
    assert_eq!(
        ours,
        [vec![
            (4, EventStatus::Purged),
            (5, EventStatus::Expired),
            (6, EventStatus::Expired)
        ]],
        "the changed event and what follows are archived again, as they are now"
    );
    assert!(matches!(
        d.poll(agent.id, 5, 1).await,
        Err(StoreError::CursorGone { oldest: 6, .. })
    ));
    let left = d.poll(agent.id, 6, 10).await.expect("poll").events;
    assert_eq!(
        left.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        [sent],
        "the pending send stays"
    );
}

/// An archive sink that keeps the batches it took, or refuses them.
#[derive(Default)]
struct Collect {
    batches: std::sync::Mutex<Vec<Vec<crate::ArchivedEvent>>>,
    refuse: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ArchiveSink for Collect {
    async fn archive(&self, batch: Vec<crate::ArchivedEvent>) -> Result<(), String> {
        if self.refuse.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("the disk is full".into());
        }
        self.batches.lock().unwrap().push(batch);
        Ok(())
    }
}

/// Retention with an archive: a refused batch removes nothing; a long prefix goes in
/// batches of [`ARCHIVE_BATCH`], each event archived once, in order, before it goes.
async fn check_archived_retention<D: MaintenanceDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    use crate::engine::maintenance::ARCHIVE_BATCH;
    let agent = d
        .create_agent(tenant, "archived", &[23; 32], &[], None, 0)
        .await
        .expect("agent");
    let n = u64::from(ARCHIVE_BATCH) + 1;
    for _ in 0..n {
        send(d, tenant, agent.id, &message_with(0, 5, 0, Some(20)), 10).await;
    }
    // All expire unclaimed at 30: terminal, and older than a cutoff of 1,000.
    while d.reap(30).await.expect("reap").expired > 0 {}
    let ours = |sink: &Collect| -> Vec<Vec<u64>> {
        sink.batches
            .lock()
            .unwrap()
            .iter()
            .filter(|b| b.iter().all(|e| e.event.agent_id == agent.id))
            .map(|b| b.iter().map(|e| e.event.seq).collect())
            .collect()
    };

    let refusing = Collect::default();
    refusing
        .refuse
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let stats = d
        .retain(1_000, 1_000, Some(&refusing))
        .await
        .expect("retain");
    assert_eq!(stats.held_back.as_deref(), Some("the disk is full"));
    assert_eq!(
        d.poll(agent.id, 0, 1)
            .await
            .expect("nothing gone")
            .events
            .len(),
        1
    );

    let sink = Collect::default();
    let stats = d.retain(1_000, 1_000, Some(&sink)).await.expect("retain");
    assert_eq!(stats.held_back, None);
    assert!(
        stats.events_removed >= n && stats.archived >= n,
        "{stats:?}"
    );
    let batches = ours(&sink);
    assert_eq!(
        batches.iter().map(Vec::len).collect::<Vec<_>>(),
        [ARCHIVE_BATCH as usize, 1]
    );
    assert_eq!(batches.concat(), (1..=n).collect::<Vec<_>>());
    let archived = sink.batches.lock().unwrap().concat();
    let last = archived
        .iter()
        .find(|e| e.event.seq == n)
        .expect("the last");
    assert_eq!(
        (last.tenant_id, last.agent.as_str(), last.event.status),
        (tenant, "archived", EventStatus::Expired)
    );
    assert_eq!(
        last.history
            .iter()
            .map(|h| h.action.as_str())
            .collect::<Vec<_>>(),
        ["created", "expired"]
    );
    assert!(matches!(
        d.poll(agent.id, 0, 1).await,
        Err(StoreError::CursorGone { oldest, .. }) if oldest == n
    ));
}

/// Retention's statements: the candidates, the marks under the row lock, the kept
/// prefix, the deletes and the low-water mark; idempotency records.
async fn check_retention<D: MaintenanceDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    let agent = d
        .create_agent(tenant, "retained", &[22; 32], &[], None, 0)
        .await
        .expect("agent");
    let r = agent.id;
    let mut events = Vec::new();
    for _ in 0..3 {
        events.push(send(d, tenant, r, &message_with(0, 5, 0, None), 10).await);
    }
    // The first two completed at 100; the third stays pending.
    for c in d
        .claim(&agent, 2, 1_000, None, 90)
        .await
        .expect("claim")
        .events
    {
        d.ack(&agent, c.event.event_id, c.claim_token, 100)
            .await
            .expect("ack");
    }

    assert!(!candidate(d, 99, r).await);
    assert!(candidate(d, 100, r).await);
    let named = d.retention_candidates(100).await.unwrap();
    let named = named.iter().find(|c| c.agent == r).expect("a candidate");
    assert_eq!(
        (named.tenant, named.name.as_str()),
        (tenant, agent.name.as_str())
    );

    let mut tx = d.begin_write().await.expect("begin");
    // What an archive takes: the events' history, in order, by sequence range.
    let steps = d.history_between(&mut tx, r, 0, 2).await.unwrap();
    let actions = |event| {
        steps
            .iter()
            .filter(|(e, _)| *e == event)
            .map(|(_, s)| s.action.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        actions(events[0]),
        ["created", "claimed", "acked"],
        "{steps:?}"
    );
    assert_eq!(actions(events[1]), ["created", "claimed", "acked"]);
    assert!(actions(events[2]).is_empty(), "after the range");
    assert!(
        d.history_between(&mut tx, r, 1, 1)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        d.marks(&mut tx, r, true).await.unwrap(),
        Marks {
            head: 3,
            low_water: 0
        }
    );
    assert_eq!(d.first_kept_seq(&mut tx, r, 99).await.unwrap(), Some(1));
    assert_eq!(d.first_kept_seq(&mut tx, r, 100).await.unwrap(), Some(3));
    d.delete_history_through(&mut tx, r, 2).await.unwrap();
    assert_eq!(d.delete_events_through(&mut tx, r, 2).await.unwrap(), 2);
    assert_eq!(d.delete_events_through(&mut tx, r, 2).await.unwrap(), 0);
    d.raise_low_water(&mut tx, r, 2).await.unwrap();
    d.raise_low_water(&mut tx, r, 1).await.unwrap();
    assert_eq!(
        d.marks(&mut tx, r, true).await.unwrap(),
        Marks {
            head: 3,
            low_water: 2
        },
        "never lowered"
    );
    d.commit(tx, &[]).await.expect("commit");
    assert!(matches!(
        d.event_detail(tenant, events[0]).await,
        Err(StoreError::NotFound)
    ));
    assert!(!candidate(d, 100, r).await);
    let page = d.poll(r, 2, 10).await.expect("poll");
    assert_eq!(page.events.iter().map(|e| e.seq).collect::<Vec<_>>(), [3]);
    assert!(matches!(
        d.poll(r, 1, 10).await,
        Err(StoreError::CursorGone { oldest: 2, .. })
    ));
    // With no event left open, the prefix would reach the head.
    let mut tx = d.begin_write().await.expect("begin");
    assert_eq!(
        d.first_kept_seq(&mut tx, AgentId::new(), 0).await.unwrap(),
        None
    );
    d.commit(tx, &[]).await.expect("commit");

    // Idempotency records go once expired.
    let key = IdemKey {
        tenant_id: tenant,
        principal: "operator".into(),
        key_hash: vec![7; 32],
        fingerprint: vec![8; 32],
        owner: vec![9; 16],
    };
    assert_eq!(
        d.idem_begin(&key, 0, 1_000, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    use crate::engine::trim::{IDEMPOTENCY_KEYS, trim};
    assert_eq!(trim(&d.0, &IDEMPOTENCY_KEYS, 1).await.unwrap(), 0);
    assert!(trim(&d.0, &IDEMPOTENCY_KEYS, i64::MAX).await.unwrap() >= 1);
    assert_eq!(
        d.idem_begin(&key, 0, 1_000, 1_000).await.unwrap(),
        IdemBegin::Fresh,
        "forgotten"
    );
}

/// While a retention pass of one agent is open, another agent's claim finds its
/// pending work. On MariaDB the history DELETE once read every event of every agent
/// (a single-table DELETE's `IN (SELECT …)` runs as a lookup per history row, the
/// plan MariaDB picks once an agent has some ten events) and locked them until the
/// pass committed, so claims `SKIP LOCKED` came back empty. SQLite has one writer:
/// the claim would wait for the pass, so the check is for the server backends.
async fn check_retention_locks_only_its_prefix<D: MaintenanceDriver>(
    d: &Engine<D>,
    tenant: TenantId,
) where
    Engine<D>: Store,
{
    if D::DIALECT == Dialect::Sqlite {
        return;
    }
    const DONE: u64 = 16;
    let agent = d
        .create_agent(tenant, "retained-long", &[24; 32], &[], None, 0)
        .await
        .expect("agent");
    let bystander = d
        .create_agent(tenant, "bystander", &[25; 32], &[], None, 0)
        .await
        .expect("agent");
    let waiting = send(d, tenant, bystander.id, &message_with(0, 5, 0, None), 10).await;
    for _ in 0..DONE {
        send(d, tenant, agent.id, &message_with(0, 5, 0, None), 10).await;
    }
    for c in d
        .claim(&agent, DONE as u32, 1_000, None, 90)
        .await
        .expect("claim")
        .events
    {
        d.ack(&agent, c.event.event_id, c.claim_token, 100)
            .await
            .expect("ack");
    }

    // The pass, held open after its deletes.
    let mut tx = d.begin_write().await.expect("begin");
    d.marks(&mut tx, agent.id, true).await.expect("marks");
    d.delete_history_through(&mut tx, agent.id, DONE)
        .await
        .expect("history");
    assert_eq!(
        d.delete_events_through(&mut tx, agent.id, DONE)
            .await
            .expect("events"),
        DONE
    );
    let claimed = d
        .claim(&bystander, 1, 1_000, None, 150)
        .await
        .expect("claim")
        .events;
    assert_eq!(
        claimed.iter().map(|c| c.event.event_id).collect::<Vec<_>>(),
        [waiting],
        "retention of one agent hides no other agent's pending event"
    );
    d.raise_low_water(&mut tx, agent.id, DONE)
        .await
        .expect("low water");
    d.commit(tx, &[]).await.expect("commit");
    // Done with, so later checks do not meet its lease.
    for c in claimed {
        d.ack(&bystander, c.event.event_id, c.claim_token, 160)
            .await
            .expect("ack");
    }
}

/// Whether retention at `cutoff` would look at `agent`.
async fn candidate<D: MaintenanceDriver>(d: &Engine<D>, cutoff: i64, agent: AgentId) -> bool
where
    Engine<D>: Store,
{
    d.retention_candidates(cutoff)
        .await
        .unwrap()
        .iter()
        .any(|c| c.agent == agent)
}
