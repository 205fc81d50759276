//! The inbox's statements and driver methods (on PostgreSQL, its CTE overrides).

use super::{last_step, message_with, send};
use crate::engine::inbox::{ClaimHold, Marks, ReleaseRow};
use crate::engine::inbox_transactions::InboxDriver;
use crate::*;
use switchboard_proto::EventStatus;

/// The ids of the events a claim took, in its order.
fn claimed_ids(c: &Claimed) -> Vec<EventId> {
    c.events.iter().map(|c| c.event.event_id).collect()
}

fn seqs(events: &[switchboard_proto::InboxEvent]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

/// Every [`InboxStatements`](crate::engine::inbox::InboxStatements) and
/// [`InboxDriver`] method against a fresh database of `d`'s backend.
pub(super) async fn check<D: InboxDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("inbox", 0).await.expect("tenant");
    let agent = d
        .create_agent(tenant, "reader", &[11; 32], &[], None, 0)
        .await
        .expect("agent");
    let other = d
        .create_agent(tenant, "other", &[12; 32], &[], None, 0)
        .await
        .expect("agent");
    let late = d
        .create_agent(tenant, "late", &[13; 32], &[], None, 0)
        .await
        .expect("agent");
    let a = agent.id;
    let e1 = send(d, tenant, a, &message_with(0, 5, 0, None), 100).await;
    let e2 = send(d, tenant, a, &message_with(0, 1, 0, None), 100).await;
    let e3 = send(d, tenant, a, &message_with(5, 5, 0, None), 100).await;
    // Not claimable: not yet available, and already expired.
    send(d, tenant, a, &message_with(9, 5, 10_000, None), 100).await;
    send(d, tenant, a, &message_with(9, 5, 0, Some(150)), 100).await;

    // Cursor reads, in one snapshot.
    let mut tx = d.begin_read().await.expect("begin read");
    assert_eq!(
        d.marks(&mut tx, a, false).await.unwrap(),
        Marks {
            head: 5,
            low_water: 0
        }
    );
    assert!(matches!(
        d.marks(&mut tx, AgentId::new(), false).await,
        Err(StoreError::NotFound)
    ));
    let all = d.events_after(&mut tx, a, 0, 5, 10).await.unwrap();
    assert_eq!(seqs(&all), [1, 2, 3, 4, 5]);
    assert_eq!(all[0].event_id, e1);
    assert_eq!(
        seqs(&d.events_after(&mut tx, a, 1, 3, 10).await.unwrap()),
        [2, 3]
    );
    assert_eq!(
        seqs(&d.events_after(&mut tx, a, 0, 5, 2).await.unwrap()),
        [1, 2]
    );
    assert!(
        d.events_after(&mut tx, other.id, 0, 5, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let counts = d.status_counts(&mut tx, a).await.unwrap();
    assert_eq!((counts.pending, counts.claimed), (5, 0));
    assert_eq!(d.first_open_seq(&mut tx, a).await.unwrap(), Some(1));
    assert_eq!(d.first_open_seq(&mut tx, other.id).await.unwrap(), None);
    // A send that commits while the read is open is not in its snapshot.
    send(d, tenant, late.id, &message_with(0, 5, 0, None), 100).await;
    assert_eq!(d.marks(&mut tx, late.id, false).await.unwrap().head, 0);
    assert!(
        d.events_after(&mut tx, late.id, 0, 1, 10)
            .await
            .unwrap()
            .is_empty()
    );
    d.commit(tx, &[]).await.expect("end read");

    // The portable claim's statements: by priority, then sequence; only what is
    // available and unexpired.
    let mut tx = d.begin_write().await.expect("begin");
    assert_eq!(
        d.claimable(&mut tx, a, 200, 10).await.unwrap(),
        [(e3, 0), (e1, 0), (e2, 0)],
        "with their attempts so far"
    );
    assert_eq!(d.claimable(&mut tx, a, 200, 1).await.unwrap(), [(e3, 0)]);
    assert!(
        d.claimable(&mut tx, other.id, 200, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let t3 = ClaimToken::new();
    let claimed = d
        .take_claim(&mut tx, e3, "agent:reader", t3, 1_200, 200)
        .await
        .unwrap();
    assert_eq!(
        (claimed.event_id, claimed.status, claimed.attempts),
        (e3, EventStatus::Claimed, 1)
    );
    assert_eq!(
        d.claimable(&mut tx, a, 200, 10).await.unwrap(),
        [(e1, 0), (e2, 0)]
    );
    // Last seen: set when older than the bound, kept otherwise.
    d.note_seen(Some(&mut tx), a, 200, i64::MAX).await.unwrap();
    d.note_seen(Some(&mut tx), a, 250, 150).await.unwrap();
    d.commit(tx, &[]).await.expect("commit");
    let seen = d.agent(tenant, "reader").await.unwrap().last_seen_at;
    assert_eq!(seen, Some(200));

    // An ack's statements: only the current token within its lease completes; the
    // token stays, so a repeat is recognised; a refusal can be explained.
    let mut tx = d.begin_write().await.expect("begin");
    let stale = ClaimToken::new();
    assert_eq!(
        d.complete_claim(&mut tx, a, e3, stale, 300).await.unwrap(),
        None
    );
    assert_eq!(
        d.complete_claim(&mut tx, other.id, e3, t3, 300)
            .await
            .unwrap(),
        None
    );
    let done = d
        .complete_claim(&mut tx, a, e3, t3, 300)
        .await
        .unwrap()
        .expect("completed");
    assert_eq!(
        (done.event_id, done.status, done.lease_expires_at),
        (e3, EventStatus::Completed, None)
    );
    // A lease that ends at `now` no longer holds.
    let t1 = ClaimToken::new();
    d.take_claim(&mut tx, e1, "agent:reader", t1, 400, 300)
        .await
        .unwrap();
    assert_eq!(
        d.complete_claim(&mut tx, a, e1, t1, 400).await.unwrap(),
        None
    );
    d.commit(tx, &[]).await.expect("commit");
    let repeat = d.completed_by(a, e3, t3).await.unwrap().expect("a repeat");
    assert_eq!(repeat.status, EventStatus::Completed);
    assert_eq!(d.completed_by(a, e3, stale).await.unwrap(), None);
    assert_eq!(d.completed_by(a, e1, t1).await.unwrap(), None);
    assert_eq!(
        d.claim_hold(a, e3).await.unwrap(),
        Some(ClaimHold {
            status: "completed".into(),
            claim_token: Some(t3.to_string()),
            lease_expires_at: None,
        })
    );
    assert_eq!(
        d.claim_hold(a, e1).await.unwrap(),
        Some(ClaimHold {
            status: "claimed".into(),
            claim_token: Some(t1.to_string()),
            lease_expires_at: Some(400),
        })
    );
    assert_eq!(d.claim_hold(other.id, e1).await.unwrap(), None);

    // Renewal: one statement of its own, only while the claim holds.
    assert_eq!(d.extend_claim(a, e1, stale, 900, 350).await.unwrap(), None);
    let extended = d
        .extend_claim(a, e1, t1, 900, 350)
        .await
        .unwrap()
        .expect("extended");
    assert_eq!(
        extended.lease_expires_at.map(crate::clock::from_timestamp),
        Some(900)
    );
    assert_eq!(d.extend_claim(a, e1, t1, 1_000, 900).await.unwrap(), None);

    // Release: back to pending with the error kept, or to the quarantine when
    // terminal or at the attempt limit (I5).
    let release = |event, token, terminal, error: Option<&'static str>, now| ReleaseRow {
        agent: &agent,
        event,
        token,
        terminal,
        available_at: now + 10,
        error,
        detail: error.map(str::to_owned),
        now,
    };
    let mut tx = d.begin_write().await.expect("begin");
    let r = release(e1, stale, false, None, 400);
    assert!(d.release_claim_row(&mut tx, &r).await.unwrap().is_none());
    let r = release(e1, t1, false, Some("boom"), 400);
    let (state, seq) = d
        .release_claim_row(&mut tx, &r)
        .await
        .unwrap()
        .expect("released");
    assert_eq!(
        (state.status, state.attempts, seq),
        (EventStatus::Pending, 1, 1)
    );
    let t1 = ClaimToken::new();
    d.take_claim(&mut tx, e1, "agent:reader", t1, 1_000, 500)
        .await
        .unwrap();
    let r = release(e1, t1, true, None, 500);
    let (state, _) = d.release_claim_row(&mut tx, &r).await.unwrap().unwrap();
    assert_eq!(
        (state.status, state.attempts),
        (EventStatus::Quarantined, 2)
    );
    let t2 = ClaimToken::new();
    d.take_claim(&mut tx, e2, "agent:reader", t2, 1_000, 500)
        .await
        .unwrap();
    let r = release(e2, t2, false, None, 500);
    let (state, _) = d.release_claim_row(&mut tx, &r).await.unwrap().unwrap();
    assert_eq!(state.status, EventStatus::Quarantined, "attempts used up");
    d.commit(tx, &[]).await.expect("commit");
    let (status, error, _) = last_step(d, tenant, e1).await;
    assert_eq!(
        (status, error.as_deref()),
        (EventStatus::Quarantined, Some("boom"))
    );

    check_driver(d, tenant, &agent).await;
    check_claims_in_order(d, tenant).await;
    check_returned_lease_keeps_its_place(d, tenant).await;
    check_claim_waits_for_a_pass_returning_its_lease(d, tenant).await;
    check_immediate_events_are_claimed_in_order(d, tenant).await;
}

/// An event sent without a delay is available from its commit, whatever the clocks
/// say. Two sends read their clocks before they take the agent's row, so the later
/// sequence number can carry the earlier `available_at` (the crash loop on PostgreSQL:
/// seq 77 stamped 178 ms before seq 76); a claim whose clock fell between the two
/// took 77 first. A delayed event still waits for its time.
async fn check_immediate_events_are_claimed_in_order<D: InboxDriver>(
    d: &Engine<D>,
    tenant: TenantId,
) where
    Engine<D>: Store,
{
    let agent = d
        .create_agent(tenant, "immediate", &[0xAB; 32], &[], None, 0)
        .await
        .expect("agent");
    // Each sent at once (available_at no later than created_at), clocks inverted.
    let first = send(d, tenant, agent.id, &message_with(0, 5, 1_200, None), 1_300).await;
    let second = send(d, tenant, agent.id, &message_with(0, 5, 1_100, None), 1_400).await;
    let delayed = send(d, tenant, agent.id, &message_with(0, 5, 5_000, None), 1_500).await;
    let claimed = d
        .claim(&agent, 1, 60_000, None, 1_150)
        .await
        .expect("claim");
    assert_eq!(claimed_ids(&claimed), [first], "the first sent goes first");
    let claimed = d
        .claim(&agent, 5, 60_000, None, 1_150)
        .await
        .expect("claim");
    assert_eq!(claimed_ids(&claimed), [second]);
    assert_eq!(
        claimed.next_available,
        Some(5_000),
        "only the delayed one is ahead"
    );
    let claimed = d
        .claim(&agent, 5, 60_000, None, 4_999)
        .await
        .expect("claim");
    assert!(
        claimed.events.is_empty(),
        "a delayed event waits for its time"
    );
    assert_eq!(claimed.next_available, Some(5_000));
    let claimed = d
        .claim(&agent, 5, 60_000, None, 5_000)
        .await
        .expect("claim");
    assert_eq!(claimed_ids(&claimed), [delayed]);
}

/// A claim that finds its agent's expired lease locked by a scavenger pass (on
/// another instance) returning it waits for that pass, and then takes the returned
/// event first. Skipping the locked row, the claim saw the event still claimed and
/// handed out the next one (the crash loop on PostgreSQL: seq 177 before 176, a
/// lease lost with a killed instance's answer running out as the consumer's retry
/// came). SQLite has one writer: the pass and the claim cannot overlap.
async fn check_claim_waits_for_a_pass_returning_its_lease<D: InboxDriver>(
    d: &Engine<D>,
    tenant: TenantId,
) where
    Engine<D>: Store,
{
    if D::DIALECT == crate::dialect::Dialect::Sqlite {
        return;
    }
    let agent = d
        .create_agent(tenant, "waits-for-the-pass", &[0xAA; 32], &[], None, 0)
        .await
        .expect("agent");
    let first = send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    let lost = d.claim(&agent, 1, 1_000, None, 2_000).await.expect("claim");
    assert_eq!(lost.events[0].event.event_id, first);

    // The pass has returned the lease and not committed yet.
    let mut pass = d.begin_write().await.expect("begin");
    let returned = d
        .return_expired_leases(&mut pass, 5_000, None, 1_000)
        .await
        .expect("return");
    assert!(returned.iter().any(|r| r.agent == agent.id));

    let claim = d.claim(&agent, 1, 1_000, None, 4_000);
    tokio::pin!(claim);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), &mut claim)
            .await
            .is_err(),
        "the claim waits for the pass that holds its agent's expired lease"
    );
    d.commit(pass, &[]).await.expect("commit");
    let claimed = claim.await.expect("claim");
    assert_eq!(
        claimed_ids(&claimed),
        [first],
        "then takes the returned event first"
    );
}

/// A lease the scavenger returns is available from the moment it expired, not from
/// the scavenger's pass. A claim reads its clock when its request starts and may then
/// wait (behind another claim of its agent, or for the writer); a scavenger pass on
/// another instance that runs meanwhile reads a later clock. Were the returned event
/// available only from that later time, the claim would pass it over and hand out
/// the next event first (the crash loop on PostgreSQL saw one: seq 90 after 91).
async fn check_returned_lease_keeps_its_place<D: InboxDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    let agent = d
        .create_agent(tenant, "keeps-place", &[0xA9; 32], &[], None, 0)
        .await
        .expect("agent");
    let first = send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    let second = send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    // Claimed at 2,000 under a 1,000 ms lease, and lost with its consumer.
    let lost = d.claim(&agent, 1, 1_000, None, 2_000).await.expect("claim");
    assert_eq!(lost.events[0].event.event_id, first);
    // The scavenger's pass reads 5,000; the waiting claim read 4,000 before it.
    let reaped = d.reap(5_000).await.expect("reap");
    assert!(reaped.lease_expirations >= 1);
    let retaken = d.claim(&agent, 1, 1_000, None, 4_000).await.expect("claim");
    assert_eq!(
        claimed_ids(&retaken),
        [first],
        "the returned event comes before {second}, which was never claimed"
    );
}

/// A claim behind an unfinished claim of the same agent (a dead server's, whose
/// session the database has not ended yet) waits for it, and then takes the earlier
/// event, instead of skipping its locked row and handing out the next one first.
/// SQLite has one writer: the second claim could not even begin.
async fn check_claims_in_order<D: InboxDriver>(d: &Engine<D>, tenant: TenantId)
where
    Engine<D>: Store,
{
    if D::DIALECT == crate::dialect::Dialect::Sqlite {
        return;
    }
    let agent = d
        .create_agent(tenant, "in-order", &[0xA7; 32], &[], None, 0)
        .await
        .expect("agent");
    let first = send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    send(d, tenant, agent.id, &message_with(0, 5, 0, None), 1_000).await;
    // Another agent's claims are not held up.
    let other = d
        .create_agent(tenant, "in-order-too", &[0xA8; 32], &[], None, 0)
        .await
        .expect("agent");
    let others = send(d, tenant, other.id, &message_with(0, 5, 0, None), 1_000).await;

    let mut dying = d.begin_write().await.expect("begin");
    d.order_claims(&mut dying, agent.id).await.expect("order");
    let held = d
        .claim_batch(&mut dying, &agent, 1, 60_000, None, 2_000)
        .await
        .expect("claim");
    assert_eq!(held[0].event.event_id, first);

    let elsewhere = d
        .claim(&other, 1, 60_000, None, 2_000)
        .await
        .expect("claim");
    assert_eq!(elsewhere.events[0].event.event_id, others);
    let retry = d.claim(&agent, 1, 60_000, None, 2_000);
    tokio::pin!(retry);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(300), &mut retry)
            .await
            .is_err(),
        "a claim behind an unfinished claim of its agent waits"
    );
    // The dead claim's session ends: dropped, its transaction rolls back.
    drop(dying);
    let retried = retry.await.expect("claim");
    assert_eq!(
        claimed_ids(&retried),
        [first],
        "then takes the earlier event"
    );
}

/// The [`InboxDriver`] methods: the portable shapes, or PostgreSQL's CTEs. Both
/// write the same rows and history steps.
async fn check_driver<D: InboxDriver>(d: &Engine<D>, tenant: TenantId, agent: &AgentRecord)
where
    Engine<D>: Store,
{
    let a = agent.id;
    let f1 = send(d, tenant, a, &message_with(0, 5, 0, None), 1_000).await;
    let f2 = send(d, tenant, a, &message_with(0, 5, 0, None), 1_000).await;
    let f3 = send(d, tenant, a, &message_with(1, 1, 0, None), 1_000).await;

    let mut tx = d.begin_write().await.expect("begin");
    let claimed = d
        .claim_batch(&mut tx, agent, 2, 3_000, None, 2_000)
        .await
        .unwrap();
    d.commit(tx, &[]).await.expect("commit");
    let ids: Vec<EventId> = claimed.iter().map(|c| c.event.event_id).collect();
    assert_eq!(ids, [f3, f1], "by priority, then sequence");
    for c in &claimed {
        assert_eq!(
            (c.event.status, c.event.attempts),
            (EventStatus::Claimed, 1)
        );
        assert_eq!(crate::clock::from_timestamp(c.lease_expires_at), 3_000);
    }
    assert_ne!(claimed[0].claim_token, claimed[1].claim_token);
    let (_, _, step) = last_step(d, tenant, f1).await;
    assert_eq!(
        step,
        (
            "claimed".into(),
            "agent:reader".into(),
            Some("attempt 1 of 5".into())
        )
    );
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        d.claim_batch(&mut tx, agent, 0, 3_000, None, 2_000)
            .await
            .unwrap()
            .is_empty()
    );
    d.commit(tx, &[]).await.expect("commit");

    // One batch: the entries that hold complete, the others are left to explain.
    let entries = [
        (f1, claimed[1].claim_token),
        (f2, ClaimToken::new()),
        (f3, ClaimToken::new()),
    ];
    let done = d.complete_claims(agent, &entries, 2_500).await.unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].event_id, done[0].status),
        (f1, EventStatus::Completed)
    );
    let (_, _, step) = last_step(d, tenant, f1).await;
    assert_eq!(step, ("acked".into(), "agent:reader".into(), None));
    let again = d
        .complete_claims(agent, &entries[..1], 2_500)
        .await
        .unwrap();
    assert!(again.is_empty(), "a repeat completes nothing");

    // Release with its history step: quarantined at the attempt limit.
    let row = ReleaseRow {
        agent,
        event: f3,
        token: claimed[0].claim_token,
        terminal: false,
        available_at: 2_600,
        error: Some("flaky"),
        detail: Some("flaky".into()),
        now: 2_600,
    };
    let mut tx = d.begin_write().await.expect("begin");
    let (state, seq) = d
        .release_claim(&mut tx, &row)
        .await
        .unwrap()
        .expect("released");
    assert!(d.release_claim(&mut tx, &row).await.unwrap().is_none());
    d.commit(tx, &[]).await.expect("commit");
    assert_eq!(state.status, EventStatus::Quarantined);
    assert_eq!(seq, claimed[0].event.seq);
    let (_, error, step) = last_step(d, tenant, f3).await;
    assert_eq!(error.as_deref(), Some("flaky"));
    assert_eq!(
        step,
        (
            "quarantined".into(),
            "agent:reader".into(),
            Some("flaky".into())
        )
    );
    // And back to pending below it.
    let mut tx = d.begin_write().await.expect("begin");
    // With an attempt id, the token is the engine's `attempt_token` (PostgreSQL
    // computes it in SQL), and the claim is found among the claims held.
    let attempt = uuid::Uuid::new_v4();
    let again = d
        .claim_batch(&mut tx, agent, 1, 4_000, Some(attempt), 3_000)
        .await
        .unwrap();
    assert_eq!(again[0].event.event_id, f2);
    assert_eq!(
        again[0].claim_token,
        crate::engine::inbox::attempt_token(attempt, f2, again[0].event.attempts),
        "{}",
        d.backend()
    );
    let held = d.claims_held(&mut tx, a, 3_000).await.unwrap();
    assert!(
        held.iter().any(|c| c.event.event_id == f2
            && c.claim_token == again[0].claim_token
            && crate::clock::from_timestamp(c.lease_expires_at) == 4_000),
        "{held:?}"
    );
    assert!(
        d.claims_held(&mut tx, a, 4_000).await.unwrap().is_empty(),
        "a lease that ran out is held no more"
    );
    let row = ReleaseRow {
        event: f2,
        token: again[0].claim_token,
        error: None,
        detail: None,
        now: 3_000,
        available_at: 3_000,
        ..row
    };
    let (state, _) = d.release_claim(&mut tx, &row).await.unwrap().unwrap();
    d.commit(tx, &[]).await.expect("commit");
    assert_eq!(state.status, EventStatus::Pending);
    let (_, error, step) = last_step(d, tenant, f2).await;
    assert_eq!(error, None);
    assert_eq!(step, ("released".into(), "agent:reader".into(), None));
}
