//! A memory's records by pages ([`RecordStore::records_page`]): key order, the
//! tenant's memory only, and a walk that stays exact while the records change under
//! it. The walk resumes strictly after the last key it saw; an offset, or `>=`,
//! fails here (the second check).

use crate::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use switchboard_proto::{AgentId, MemoryId, TenantId};

/// Records present before the walk and never deleted, the rest deleted as it goes.
const KEYS: usize = 60;
/// A small page, so the walk takes many.
const PAGE: u32 = 7;

struct Seeded {
    tenant: TenantId,
    other: TenantId,
    who: Actor,
    memory: MemoryId,
    token: u64,
}

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let s = seed(d).await;
    pages(d, &s).await;
    stable_walk(d, &s).await;
}

async fn seed<D>(d: &Engine<D>) -> Seeded
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("pages", 0).await.expect("tenant");
    let other = d.ensure_tenant("pages-other", 0).await.expect("tenant");
    let agent: AgentId = d
        .create_agent(tenant, "pager", &[7; 32], &[], None, 0)
        .await
        .expect("agent")
        .id;
    let memory = d
        .register_memory(tenant, None, 0)
        .await
        .expect("memory")
        .memory_instance_id;
    let who = Actor::Agent {
        id: agent,
        name: "pager".into(),
    };
    let lease = d
        .acquire_lease(
            &NewLease {
                tenant,
                name: "pager".into(),
                skeleton: "pager".into(),
                display_name: None,
                memory,
                ttl_ms: 3_600_000,
                lock_delay_ms: 0,
                owner_client: None,
                holder: who.to_string(),
                holder_key: who.key(),
            },
            None,
            0,
        )
        .await
        .expect("lease");
    Seeded {
        tenant,
        other,
        who,
        memory,
        token: lease.fencing_token,
    }
}

/// Puts (a new record) or deletes `key` with the holder's token.
async fn change<D>(d: &Engine<D>, s: &Seeded, key: &str, put: bool)
where
    Engine<D>: Store,
{
    let op = if put {
        RecordOp::Put {
            value: format!("{{\"key\":{key:?}}}"),
            if_match: None,
            if_none_match: true,
        }
    } else {
        RecordOp::Delete { if_match: None }
    };
    let call = RecordCall {
        tenant: s.tenant,
        memory: s.memory,
        key,
        token: s.token,
        who: &s.who,
        op,
    };
    d.record(&call, 1).await.expect("record call");
}

/// Every key of a walk with pages of `PAGE`, in the order the pages gave them; after
/// each page, `between` runs (and is awaited) before the next is read.
async fn walk<D, F, Fut>(d: &Engine<D>, s: &Seeded, mut between: F) -> Vec<String>
where
    Engine<D>: Store,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = d
            .records_page(s.tenant, s.memory, after.as_deref(), PAGE)
            .await
            .expect("page");
        seen.extend(page.iter().map(|r| r.key.clone()));
        if page.len() < PAGE as usize {
            return seen;
        }
        after = page.last().map(|r| r.key.clone());
        between().await;
    }
}

/// Pages in key order with each record's value, version and token; another tenant
/// and an unknown memory are `NotFound`; an empty memory has an empty page.
async fn pages<D>(d: &Engine<D>, s: &Seeded)
where
    Engine<D>: Store,
{
    let empty = d
        .records_page(s.tenant, s.memory, None, PAGE)
        .await
        .expect("page");
    assert!(empty.is_empty(), "a memory without records: {empty:?}");
    for key in ["b", "a", "c/1", "c"] {
        change(d, s, key, true).await;
    }
    let first = d
        .records_page(s.tenant, s.memory, None, 3)
        .await
        .expect("page");
    let keys: Vec<&str> = first.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"], "key order, `limit` of them");
    let a = &first[0];
    assert_eq!(
        (a.memory_instance_id, a.version, a.fencing_token),
        (s.memory, 1, s.token)
    );
    assert_eq!(a.value, serde_json::json!({"key": "a"}));
    let rest = d
        .records_page(s.tenant, s.memory, Some("c"), 3)
        .await
        .expect("page");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].key, "c/1", "strictly after the key given");
    // A key that is not stored (deleted since) is a place in the order all the same.
    let after_gone = d
        .records_page(s.tenant, s.memory, Some("bb"), 3)
        .await
        .expect("page");
    let keys: Vec<&str> = after_gone.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["c", "c/1"]);
    for (tenant, memory) in [(s.other, s.memory), (s.tenant, MemoryId::new())] {
        let refused = d.records_page(tenant, memory, None, PAGE).await;
        assert!(
            matches!(refused, Err(StoreError::NotFound)),
            "another tenant's or nobody's memory: {refused:?}"
        );
    }
    for key in ["a", "b", "c", "c/1"] {
        change(d, s, key, false).await;
    }
}

/// A walk with pages of `PAGE` while another task inserts keys before, among and
/// after the ones present, and deletes keys on both sides of the walk's position:
/// every key present for the whole walk appears exactly once, no key twice, all in
/// key order. Between two pages at least one round of changes lands, so each page
/// boundary sees records appear and vanish behind and ahead of it.
async fn stable_walk<D>(d: &Engine<D>, s: &Seeded)
where
    Engine<D>: Store,
{
    let key = |n: usize| format!("k{n:03}");
    for n in 0..KEYS {
        change(d, s, &key(n), true).await;
    }
    let stable: BTreeSet<String> = (0..KEYS).filter(|n| n % 2 == 0).map(key).collect();
    // The odd keys go, alternately from the front and from the back.
    let mut doomed: std::collections::VecDeque<String> =
        (0..KEYS).filter(|n| n % 2 == 1).map(key).collect();
    let rounds = AtomicU64::new(0);
    let done = AtomicBool::new(false);

    let changer = async {
        let mut round = 0usize;
        while !done.load(Ordering::SeqCst) {
            let gone = match round % 2 {
                0 => doomed.pop_front(),
                _ => doomed.pop_back(),
            };
            if let Some(gone) = gone {
                change(d, s, &gone, false).await;
            }
            // New keys: before every key, among them, after every key.
            for new in [
                format!("a{round:03}"),
                format!("k{:03}+{round}", (round * 7) % KEYS),
                format!("z{round:03}"),
            ] {
                change(d, s, &new, true).await;
            }
            round += 1;
            rounds.store(round as u64, Ordering::SeqCst);
        }
    };
    let walker = async {
        let seen = walk(d, s, || async {
            // At least one more round of changes before the next page.
            let at = rounds.load(Ordering::SeqCst);
            while rounds.load(Ordering::SeqCst) <= at {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        })
        .await;
        done.store(true, Ordering::SeqCst);
        seen
    };
    let (seen, ()) = tokio::join!(walker, changer);

    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for k in &seen {
        *counts.entry(k).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys seen more than once: {twice:?}");
    let missed: Vec<_> = stable
        .iter()
        .filter(|k| !counts.contains_key(k.as_str()))
        .collect();
    assert!(
        missed.is_empty(),
        "keys present for the whole walk but not seen: {missed:?} (seen {seen:?})"
    );
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "the walk is in key order: {seen:?}"
    );
    assert!(
        rounds.load(Ordering::SeqCst) as usize >= KEYS / PAGE as usize,
        "changes landed between the pages"
    );
}
