//! W4: name + memory leases.
//!
//! - *renew*: 1,000 leases held by 16 renewers over HTTP, each renewing its share
//!   round-robin for a fixed time. Baseline: the same renewals through the store
//!   (the same SQL through the same sqlx driver, no HTTP, auth or JSON), 16 tasks.
//! - *contend*: 16 contenders over HTTP try to take one name, each with its own
//!   memory, under a 200 ms TTL and no lock delay; a winner holds until its lease
//!   expires and the next attempt after that takes over. Every holding interval
//!   `[acquired_at, expires_at]` comes from the server's answers; the run checks
//!   that no two overlap. Baseline: the same attempts through the store.
//!
//! Both sides run on their own fresh SQLite file (WAL, synchronous FULL).

use crate::Settings;
use crate::report::{Row, cpu_seconds, progress};
use crate::server::{BenchServer, DB_FILE, now_ms, temp_dir};
use anyhow::{Result, bail, ensure};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_sdk::new_idempotency_key;
use switchboard_sdk::proto::{AcquireLease, Lease, LeaseId, MemoryId, RegisterMemory, RenewLease};
use switchboard_server::Hooks;
use switchboard_server::store::sqlite::SqliteStore;
use switchboard_server::store::{Actor, DirectoryStore, LeaseStore, NewLease, Store};
use tokio::task::JoinSet;

const KEYS: usize = 1_000;
/// The holder of the store-level renewals: an operator (no agent row needed).
const W4: Actor = Actor::Operator;
const WORKERS: usize = 16;
const HOT_TTL: f64 = 0.2;

/// One side's work: operations over a span, and the process CPU meanwhile.
struct Span {
    ops: u64,
    seconds: f64,
    cpu: f64,
}

pub(crate) async fn run(s: &Settings) -> Result<Vec<Row>> {
    let secs = if s.quick { 1.0 } else { 5.0 };
    let measure = Duration::from_secs_f64(secs);
    progress(format_args!(
        "W4 renew: {KEYS} leases, {WORKERS} renewers, {secs:.0} s"
    ));
    let base = store_renew(s, measure).await?;
    let srv = http_renew(s, measure).await?;
    let renew = row(
        s,
        "renew",
        &srv,
        &base,
        format!(
            "{KEYS} leases renewed round-robin by {WORKERS} concurrent renewers over HTTP for {secs:.0} s"
        ),
        "the store's renew (same SQL, same sqlx driver), 16 tasks, no HTTP",
    );

    progress(format_args!(
        "W4 contend: 1 name, {WORKERS} contenders, TTL 200 ms, {secs:.0} s"
    ));
    let base = store_contend(s, measure).await?;
    let (srv, takeovers) = http_contend(s, measure).await?;
    let mut contend = row(
        s,
        "contend",
        &srv,
        &base,
        format!(
            "{WORKERS} contenders try one name (own memories) under a 200 ms TTL for {secs:.0} s; \
         {takeovers} holders, no two holding intervals overlap (checked from the server's \
         acquired_at/expires_at); ops are attempts"
        ),
        "the store's acquire (same SQL), 16 tasks, no HTTP",
    );
    contend.goal = None;
    Ok(vec![renew, contend])
}

fn row(
    s: &Settings,
    variant: &str,
    srv: &Span,
    base: &Span,
    description: String,
    baseline: &str,
) -> Row {
    let per = |x: &Span| x.ops as f64 / x.seconds;
    let us = |x: &Span| (x.cpu > 0.0 && x.ops > 0).then(|| x.cpu * 1e6 / x.ops as f64);
    Row {
        workload: "W4",
        variant: variant.to_owned(),
        description,
        baseline: baseline.to_owned(),
        messages: srv.ops,
        seconds: srv.seconds,
        msgs_per_sec: per(srv),
        baseline_messages: base.ops,
        baseline_seconds: base.seconds,
        baseline_msgs_per_sec: per(base),
        ratio: per(srv) / per(base),
        goal: None,
        goal_met: None,
        cpu_us_per_msg: us(srv),
        baseline_cpu_us_per_msg: us(base),
        samples: vec![per(srv)],
        baseline_samples: vec![per(base)],
        quick: s.quick,
        latency: None,
    }
}

/// Runs `work(worker)` in `WORKERS` tasks until `measure` has passed; each returns
/// how many operations it completed.
async fn timed<F, Fut>(measure: Duration, work: F) -> Result<Span>
where
    F: Fn(usize, Instant) -> Fut,
    Fut: std::future::Future<Output = Result<u64>> + Send + 'static,
{
    let cpu = cpu_seconds();
    let start = Instant::now();
    let deadline = start + measure;
    let mut set = JoinSet::new();
    for w in 0..WORKERS {
        set.spawn(work(w, deadline));
    }
    let mut ops = 0;
    while let Some(done) = set.join_next().await {
        ops += done??;
    }
    Ok(Span {
        ops,
        seconds: start.elapsed().as_secs_f64(),
        cpu: cpu_seconds() - cpu,
    })
}

async fn store(s: &Settings) -> Result<(tempfile::TempDir, Arc<SqliteStore>)> {
    let dir = temp_dir(&s.dir)?;
    let url = format!("sqlite://{}", dir.path().join(DB_FILE).display());
    let store = SqliteStore::open(&url, "full", Hooks::default().store()).await?;
    Ok((dir, Arc::new(store)))
}

fn lease(
    tenant: switchboard_sdk::proto::TenantId,
    name: &str,
    memory: MemoryId,
    ttl_ms: i64,
) -> NewLease {
    let c = switchboard_names::canonicalize(name).expect("a valid name");
    NewLease {
        tenant,
        name: c.canonical,
        skeleton: c.skeleton,
        display_name: None,
        memory,
        ttl_ms,
        lock_delay_ms: 0,
        owner_client: None,
        holder: W4.to_string(),
        holder_key: W4.key(),
    }
}

async fn store_renew(s: &Settings, measure: Duration) -> Result<Span> {
    let (_dir, store) = store(s).await?;
    let tenant = store.ensure_tenant("default", now_ms()).await?;
    let mut held: Vec<(LeaseId, u64)> = Vec::with_capacity(KEYS);
    for i in 0..KEYS {
        let m = store
            .register_memory(tenant, None, now_ms())
            .await?
            .memory_instance_id;
        let l = store
            .acquire_lease(
                &lease(tenant, &format!("w4-{i}"), m, 300_000),
                None,
                now_ms(),
            )
            .await?;
        held.push((l.lease_id, l.fencing_token));
    }
    let held = Arc::new(held);
    let span = timed(measure, |w, deadline| {
        let (store, held) = (store.clone(), held.clone());
        async move {
            let mut n = 0u64;
            let mine: Vec<_> = held.iter().skip(w).step_by(WORKERS).copied().collect();
            while Instant::now() < deadline {
                let (id, token) = mine[n as usize % mine.len()];
                store
                    .renew_lease(tenant, id, token, None, &W4, now_ms())
                    .await?;
                n += 1;
            }
            Ok(n)
        }
    })
    .await?;
    store.close().await;
    progress(format_args!(
        "  store:       {:>7.0} renews/s",
        span.ops as f64 / span.seconds
    ));
    Ok(span)
}

async fn http_renew(s: &Settings, measure: Duration) -> Result<Span> {
    let server = BenchServer::start(temp_dir(&s.dir)?).await?;
    let (_, agent) = server.agent("w4").await?;
    let mut held: Vec<Lease> = Vec::with_capacity(KEYS);
    for i in 0..KEYS {
        let m = agent
            .register_memory(&RegisterMemory::default())
            .await?
            .memory_instance_id;
        let ask = AcquireLease {
            name: format!("w4-{i}"),
            display_name: None,
            memory_instance_id: m,
            ttl_seconds: 300.0,
            owner_client: None,
            lock_delay_seconds: None,
        };
        held.push(agent.acquire_lease(&ask, &new_idempotency_key()).await?.0);
    }
    let held = Arc::new(held);
    let span = timed(measure, |w, deadline| {
        let (agent, held) = (agent.clone(), held.clone());
        async move {
            let mut n = 0u64;
            let mine: Vec<&Lease> = held.iter().skip(w).step_by(WORKERS).collect();
            while Instant::now() < deadline {
                let l = mine[n as usize % mine.len()];
                let renew = RenewLease::of(l);
                agent.renew_lease(&renew).await?;
                n += 1;
            }
            Ok(n)
        }
    })
    .await?;
    server.stop().await?;
    progress(format_args!(
        "  switchboard: {:>7.0} renews/s",
        span.ops as f64 / span.seconds
    ));
    Ok(span)
}

async fn store_contend(s: &Settings, measure: Duration) -> Result<Span> {
    let (_dir, store) = store(s).await?;
    let tenant = store.ensure_tenant("default", now_ms()).await?;
    let mut memories = Vec::new();
    for _ in 0..WORKERS {
        memories.push(
            store
                .register_memory(tenant, None, now_ms())
                .await?
                .memory_instance_id,
        );
    }
    let memories = Arc::new(memories);
    let span = timed(measure, |w, deadline| {
        let (store, memories) = (store.clone(), memories.clone());
        async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let ask = lease(tenant, "w4-hot", memories[w], (HOT_TTL * 1000.0) as i64);
                let _ = store.acquire_lease(&ask, None, now_ms()).await;
                n += 1;
            }
            Ok(n)
        }
    })
    .await?;
    store.close().await;
    progress(format_args!(
        "  store:       {:>7.0} attempts/s",
        span.ops as f64 / span.seconds
    ));
    Ok(span)
}

async fn http_contend(s: &Settings, measure: Duration) -> Result<(Span, usize)> {
    let server = BenchServer::start(temp_dir(&s.dir)?).await?;
    let (_, agent) = server.agent("w4").await?;
    let mut memories = Vec::new();
    for _ in 0..WORKERS {
        memories.push(
            agent
                .register_memory(&RegisterMemory::default())
                .await?
                .memory_instance_id,
        );
    }
    let won = Arc::new(std::sync::Mutex::new(Vec::<Lease>::new()));
    let span = timed(measure, |w, deadline| {
        let (agent, memory, won) = (agent.clone(), memories[w], won.clone());
        async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let ask = AcquireLease {
                    name: "w4-hot".into(),
                    display_name: None,
                    memory_instance_id: memory,
                    ttl_seconds: HOT_TTL,
                    owner_client: Some(format!("contender-{w}")),
                    lock_delay_seconds: Some(0.0),
                };
                n += 1;
                match agent.acquire_lease(&ask, &new_idempotency_key()).await {
                    Ok((lease, _)) => won.lock().unwrap_or_else(|e| e.into_inner()).push(lease),
                    Err(e) if e.problem().is_some_and(|p| p.status == 423) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(n)
        }
    })
    .await?;
    server.stop().await?;
    let mut won = std::mem::take(&mut *won.lock().unwrap_or_else(|e| e.into_inner()));
    won.sort_by_key(|l| l.acquired_at);
    ensure!(!won.is_empty(), "nobody ever held the name");
    for pair in won.windows(2) {
        if pair[1].acquired_at < pair[0].expires_at {
            bail!(
                "two holders overlap: token {} held until {}, token {} from {}",
                pair[0].fencing_token,
                pair[0].expires_at,
                pair[1].fencing_token,
                pair[1].acquired_at
            );
        }
        ensure!(
            pair[1].fencing_token > pair[0].fencing_token,
            "tokens only grow"
        );
    }
    progress(format_args!(
        "  switchboard: {:>7.0} attempts/s, {} holders, no overlap",
        span.ops as f64 / span.seconds,
        won.len()
    ));
    Ok((span, won.len()))
}
