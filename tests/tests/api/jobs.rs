//! Bulk jobs: "all N matching" runs server-side in batches with progress on the
//! operator stream, can be paced and cancelled, survives as an audit row, and is
//! marked interrupted when its server stops. Also the overview's sample history and
//! per-minute rates.

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_tests::sdk::proto::{
    BulkAction, BulkRequest, ClaimRequest, EventFilter, EventStatus, Job, JobState, StartJob,
};
use switchboard_tests::sdk::{Client, SseStream};
use switchboard_tests::{Options, TestServer};

use crate::support::{Reply, send};

fn quarantined_of(agent: &str) -> EventFilter {
    EventFilter {
        agent: Some(agent.to_owned()),
        status: Some(EventStatus::Quarantined),
        ..EventFilter::default()
    }
}

fn replay(filter: EventFilter, rate: Option<u32>) -> StartJob {
    StartJob {
        action: BulkAction::Replay,
        ids: None,
        filter: Some(filter),
        rate_per_second: rate,
    }
}

/// The `job` events of `stream` for `job_id` until it is no longer live.
async fn follow(stream: &mut SseStream, job_id: i64) -> Vec<Job> {
    let mut seen = Vec::new();
    use futures::StreamExt;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("a job event within 30 s")
            .expect("stream stays open")
            .expect("stream event");
        if event.event != "job" {
            continue;
        }
        let job: Job = event.json().expect("job event data is a Job");
        if job.job_id != job_id {
            continue;
        }
        let live = job.state.is_live();
        seen.push(job);
        if !live {
            return seen;
        }
    }
}

async fn depth(op: &Client, agent: &str) -> (u64, u64) {
    let agents = op.agents().await.unwrap();
    let a = agents.iter().find(|a| a.name == agent).expect("agent");
    (a.counts.pending, a.counts.quarantined)
}

#[tokio::test]
async fn a_replay_job_covers_every_match_in_batches_with_progress_and_an_audit_row() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    server.fill_quarantine("build-bot", 1_200).await;
    let op = server.operator();

    // More than an immediate action may change: the answer points at jobs.
    let refused = op
        .bulk(
            BulkAction::Replay,
            &BulkRequest {
                ids: None,
                filter: Some(quarantined_of("build-bot")),
            },
        )
        .await
        .unwrap_err();
    let problem = refused.problem().expect("a problem document");
    assert_eq!(problem.status, 422);
    let detail = problem.detail.clone().unwrap_or_default();
    assert!(detail.contains("1200 events match"), "{detail}");
    assert!(detail.contains("/api/v1/ops/jobs"), "{detail}");
    assert_eq!(depth(&op, "build-bot").await, (0, 1_200), "nothing changed");

    let mut stream = op.ops_stream().await.unwrap();
    let job = op
        .start_job(&replay(quarantined_of("build-bot"), None))
        .await
        .unwrap();
    assert_eq!(job.total, 1_200);
    assert!(job.state.is_live() || job.done == 1_200, "{job:?}");
    let progress = follow(&mut stream, job.job_id).await;
    let done: Vec<u64> = progress.iter().map(|j| j.done).collect();
    assert!(
        done.windows(2).all(|w| w[0] <= w[1]),
        "progress only grows: {done:?}"
    );
    assert!(
        done.iter().any(|&d| d > 0 && d < 1_200),
        "progress was reported between batches: {done:?}"
    );
    let last = progress.last().unwrap();
    assert_eq!(
        (last.state, last.done, last.total),
        (JobState::Completed, 1_200, 1_200)
    );
    assert!(last.finished_at.is_some());

    assert_eq!(depth(&op, "build-bot").await, (1_200, 0));
    let stored = op.job(job.job_id).await.unwrap();
    assert_eq!(&stored, last);
    let audit = op.audit(None).await.unwrap();
    let row = audit
        .entries
        .iter()
        .find(|e| e.id == job.job_id)
        .expect("the job is an audit row");
    assert_eq!(row.action, "replay");
    assert_eq!(row.count, 1_200);
    assert_eq!(row.job_state, Some(JobState::Completed));
    assert_eq!(row.job_total, Some(1_200));
    assert_eq!(row.filter, Some(quarantined_of("build-bot")));
    assert_eq!(op.jobs().await.unwrap().jobs[0].job_id, job.job_id);

    // A replayed event's history says who replayed it, and its attempts are reset.
    let page = op
        .events(&switchboard_tests::sdk::proto::EventListQuery {
            agent: Some("build-bot".into()),
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    let detail = op.event(page.events[0].event.event_id).await.unwrap();
    assert_eq!(detail.event.event.attempts, 0);
    assert_eq!(detail.history.last().unwrap().action, "replayed");
    assert_eq!(detail.history.last().unwrap().actor, "operator");
}

#[tokio::test]
async fn a_paced_job_keeps_its_rate_and_a_cancel_stops_it_keeping_what_it_did() {
    let server = TestServer::start().await;
    server.fill_quarantine("slow", 300).await;
    let other = server.fill_quarantine("paced", 200).await;
    let op = server.operator();

    // 200 events at 100/s: "done" may not run ahead of 100 per second elapsed, so the
    // last of them cannot land before about 1 s (batches go at 0, 0.64, 1.28, 1.92 s).
    let mut stream = op.ops_stream().await.unwrap();
    let began = Instant::now();
    let paced = op
        .start_job(&replay(quarantined_of("paced"), Some(100)))
        .await
        .unwrap();
    assert_eq!(paced.rate_per_second, Some(100));
    let progress = follow(&mut stream, paced.job_id).await;
    assert_eq!(progress.last().unwrap().state, JobState::Completed);
    assert!(
        began.elapsed() >= Duration::from_millis(950),
        "200 events at 100/s took only {:?}",
        began.elapsed()
    );
    drop(other);

    // 300 events at 20/s would take 15 s: cancel after the first batch.
    let job = op
        .start_job(&replay(quarantined_of("slow"), Some(20)))
        .await
        .unwrap();
    loop {
        let now = op.job(job.job_id).await.unwrap();
        if now.done > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let asked = op.cancel_job(job.job_id).await.unwrap();
    assert!(
        matches!(asked.state, JobState::Cancelling | JobState::Cancelled),
        "{asked:?}"
    );
    let ended = follow(&mut stream, job.job_id).await;
    let last = ended.last().unwrap();
    assert_eq!(last.state, JobState::Cancelled);
    assert!(last.done > 0 && last.done < 300, "{last:?}");
    let (pending, quarantined) = depth(&op, "slow").await;
    assert_eq!(pending, last.done, "what it did stays done");
    assert_eq!(quarantined, 300 - last.done, "the rest stays quarantined");
    // Cancelling an ended job changes nothing.
    assert_eq!(
        op.cancel_job(job.job_id).await.unwrap().state,
        JobState::Cancelled
    );
    let audit = op.audit(None).await.unwrap();
    let row = audit.entries.iter().find(|e| e.id == job.job_id).unwrap();
    assert_eq!(
        (row.count, row.job_state),
        (last.done, Some(JobState::Cancelled))
    );
}

#[tokio::test]
async fn a_job_left_running_by_a_stopped_server_is_marked_interrupted() {
    let mut server = TestServer::start().await;
    server.fill_quarantine("a", 50).await;
    let op = server.operator();
    let job = op
        .start_job(&replay(quarantined_of("a"), Some(5)))
        .await
        .unwrap();
    server.outage(Duration::from_millis(50)).await;
    let after = op.job(job.job_id).await.unwrap();
    assert_eq!(after.state, JobState::Interrupted, "{after:?}");
    assert!(after.done < 50 && after.finished_at.is_some(), "{after:?}");
    let (pending, quarantined) = depth(&op, "a").await;
    assert_eq!((pending, quarantined), (after.done, 50 - after.done));
}

/// On PostgreSQL, a job whose instance died without ending it (its heartbeat
/// stopped) is marked interrupted by the next background pass of any live instance
/// once the beat is 30 s old, and the consoles hear of it. On SQLite the one
/// process's live jobs are its own: passes leave them, and the start-up cleanup
/// above handles a process that died.
#[tokio::test]
async fn a_job_whose_instance_stopped_beating_is_marked_interrupted_by_a_live_one() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let clock = server.clock.clone().expect("manual clock");
    let op = server.operator();
    let tenant = server.stored_rows("SELECT id FROM tenants").await[0][0]
        .clone()
        .expect("tenant id");
    let now = switchboard_tests::server::Clock::now_ms(&clock);
    // Several instances share the database (PostgreSQL, MariaDB): jobs have owners.
    let shared = switchboard_tests::Backend::current().shared();
    // Replayed 3 of 10 events, then its instance died: last beat at `now`.
    let (owner_cols, owner_values) = if shared {
        (
            ", job_owner, job_heartbeat_at",
            format!(", 'instance-that-died', {now}"),
        )
    } else {
        ("", String::new())
    };
    server
        .seed(&format!(
            "INSERT INTO audit_log (tenant_id, actor, action, filter, count, at, job_state, \
             job_total{owner_cols}) VALUES ('{tenant}', 'operator', 'replay', '{{}}', 3, {now}, \
             'running', 10{owner_values})"
        ))
        .await;
    let job_id = op.jobs().await.unwrap().jobs[0].job_id;
    let mut stream = op.ops_stream().await.unwrap();

    clock.advance_secs(29);
    assert_eq!(
        server.tick().await.jobs_interrupted,
        0,
        "29 s: still beating"
    );
    assert_eq!(op.job(job_id).await.unwrap().state, JobState::Running);
    clock.advance_secs(2);
    let report = server.tick().await;
    let job = op.job(job_id).await.unwrap();
    if !shared {
        assert_eq!(report.jobs_interrupted, 0, "SQLite's jobs are its own");
        assert_eq!(job.state, JobState::Running);
        return;
    }
    assert_eq!(
        report.jobs_interrupted, 1,
        "31 s without a beat: its instance died"
    );
    assert_eq!(job.state, JobState::Interrupted, "{job:?}");
    assert_eq!(job.done, 3, "what it did stays counted");
    assert!(job.finished_at.is_some(), "{job:?}");
    let heard = follow(&mut stream, job_id).await;
    assert_eq!(heard.last().map(|j| j.state), Some(JobState::Interrupted));
    assert_eq!(server.tick().await.jobs_interrupted, 0, "marked once");
}

#[tokio::test]
async fn jobs_refuse_bad_requests_with_problems_and_read_only_sessions() {
    let server = TestServer::start().await;
    let (_, agent) = server.agent("a").await;
    let op = server.operator();
    let post = |body: serde_json::Value| {
        let op = op.clone();
        async move {
            Reply::read(
                op.request(switchboard_tests::sdk::reqwest::Method::POST, "ops/jobs")
                    .json(&body)
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        }
    };
    let p = post(json!({"action": "replay"}))
        .await
        .problem(422, "validation_failed");
    assert!(p["detail"].as_str().unwrap().contains("filter"), "{p}");
    let p = post(json!({"action": "replay", "filter": {}, "rate_per_second": 0}))
        .await
        .problem(422, "validation_failed");
    assert!(
        p["detail"].as_str().unwrap().contains("rate_per_second"),
        "{p}"
    );
    post(json!({"action": "explode", "filter": {}}))
        .await
        .problem(422, "validation_failed");
    post(json!({"action": "purge", "filter": {"colour": "red"}}))
        .await
        .problem(422, "validation_failed");
    let ids: Vec<String> = (0..1001)
        .map(|_| uuid::Uuid::now_v7().to_string())
        .collect();
    post(json!({"action": "purge", "ids": ids}))
        .await
        .problem(422, "validation_failed");

    let missing = Reply::read(
        op.request(switchboard_tests::sdk::reqwest::Method::GET, "ops/jobs/999")
            .send()
            .await
            .unwrap(),
    )
    .await;
    missing.problem(404, "not_found");

    // An agent token is no operator.
    let refused = Reply::read(
        agent
            .request(switchboard_tests::sdk::reqwest::Method::POST, "ops/jobs")
            .json(&json!({"action": "purge", "filter": {}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    refused.problem(403, "forbidden");

    // Nothing matches: done at once, and still audited.
    let job = op
        .start_job(&replay(quarantined_of("a"), None))
        .await
        .unwrap();
    assert_eq!(
        (job.state, job.total, job.done),
        (JobState::Completed, 0, 0)
    );
}

#[tokio::test]
async fn history_samples_depth_and_counters_and_the_overview_rates_a_minute() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, agent) = server.agent("a").await;
    server.tick().await;
    for n in 0..3 {
        send(&op, "a", json!(n)).await;
    }
    server.advance(Duration::from_secs(2));
    server.tick().await;
    assert_eq!(
        op.history().await.unwrap().samples.len(),
        1,
        "not due before 5 s"
    );
    let claim = ClaimRequest {
        limit: Some(1),
        lease_seconds: Some(60),
        attempt_id: None,
    };
    let claimed = agent.claim("a", &claim).await.unwrap().events.remove(0);
    server.advance(Duration::from_millis(300));
    agent
        .ack("a", claimed.event.event_id, claimed.claim_token)
        .await
        .unwrap();
    server.advance(Duration::from_secs(3));
    server.tick().await;

    let history = op.history().await.unwrap();
    assert_eq!(history.interval_seconds, 5.0);
    let depth: Vec<(u64, u64)> = history
        .samples
        .iter()
        .map(|s| (s.pending, s.claimed))
        .collect();
    assert_eq!(depth, vec![(0, 0), (2, 0)], "one acked, two pending");
    assert_eq!(history.samples[1].delivered_total, 1);
    let acked: u64 = history.latency.iter().map(|b| b.count).sum();
    assert_eq!(acked, 1, "one ack in the window: {:?}", history.latency);
    let bucket = history.latency.iter().find(|b| b.count == 1).unwrap();
    assert!(
        bucket
            .le_seconds
            .is_some_and(|le| (2.3..=5.0).contains(&le)),
        "2.3 s from available to ack: {bucket:?}"
    );

    let rates = op
        .overview()
        .await
        .unwrap()
        .counters
        .unwrap()
        .per_minute
        .unwrap();
    assert_eq!(rates.delivered_per_minute, 1.0);
    assert_eq!(rates.lease_expirations_per_minute, 0.0);
}
