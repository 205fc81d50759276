//! The operator views' and bulk actions' statements, and the bulk driver.

use crate::engine::ops::bulk::{self, BulkDriver, NewAudit, NewJob, Target, Window};
use crate::*;
use switchboard_proto::{EventStatus, JobState, OpsEvent};

/// Sends one message from an operator into `to`'s inbox.
pub(super) async fn send<D>(
    d: &Engine<D>,
    tenant: TenantId,
    to: AgentId,
    payload: &str,
    priority: i32,
    correlation: Option<&str>,
) -> EventId
where
    Engine<D>: Store,
{
    let msg = NewMessage {
        payload: payload.to_owned(),
        correlation_id: correlation.map(str::to_owned),
        priority,
        available_at: 0,
        expires_at: None,
        max_attempts: 5,
    };
    d.send_direct(tenant, to, &Actor::Operator, &msg, None, 1)
        .await
        .expect("send")
        .value
        .event_id
}

fn ids(events: &[OpsEvent]) -> Vec<EventId> {
    events.iter().map(|e| e.event.event_id).collect()
}

fn sorted(mut ids: Vec<EventId>) -> Vec<EventId> {
    ids.sort_by_key(ToString::to_string);
    ids
}

fn scope<'a>(
    action: BulkAction,
    ids: Option<&'a [EventId]>,
    filter: Option<&'a EventFilter>,
) -> Scope<'a> {
    Scope {
        action,
        ids,
        filter,
    }
}

fn listing(filter: EventFilter, after: Option<EventId>) -> EventListQuery {
    EventListQuery {
        agent: filter.agent,
        status: filter.status,
        correlation_id: filter.correlation_id,
        q: filter.q,
        priority: filter.priority,
        after,
        ..EventListQuery::default()
    }
}

/// Every `OpsStatements`, `BulkStatements` and [`BulkDriver`] method against a
/// fresh database of `d`'s backend.
pub(super) async fn check<D: BulkDriver>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("ops", 0).await.expect("tenant");
    let other = d.ensure_tenant("ops-other", 0).await.expect("tenant");
    let w1 = d
        .create_agent(tenant, "w1", &[31; 32], &[], None, 0)
        .await
        .expect("agent");
    let w2 = d
        .create_agent(tenant, "w2", &[32; 32], &[], None, 0)
        .await
        .expect("agent");
    let stranger = d
        .create_agent(other, "w1", &[33; 32], &[], None, 0)
        .await
        .expect("agent");
    let plain = send(d, tenant, w1.id, "{\"n\":1}", 0, None).await;
    let marked = send(d, tenant, w1.id, "{\"t\":\"Hello_World\"}", 5, Some("c-1")).await;
    let second = send(d, tenant, w2.id, "{\"n\":2}", 0, None).await;
    let foreign = send(d, other, stranger.id, "{\"n\":1}", 0, None).await;
    let all = sorted(vec![plain, marked, second]);

    // The page: the tenant's events in id order, each filter condition, the cursor.
    let page = |filter: EventFilter| async move {
        d.events_page(tenant, &listing(filter, None), 10).await
    };
    let every = page(EventFilter::default()).await.unwrap();
    assert_eq!(ids(&every), all);
    let first = every.iter().find(|e| e.event.event_id == marked).unwrap();
    assert_eq!(
        (
            first.agent_name.as_str(),
            first.event.priority,
            first.lease_expires_at
        ),
        ("w1", 5, None)
    );
    let by_name = EventFilter {
        agent: Some("w1".into()),
        ..EventFilter::default()
    };
    assert_eq!(
        ids(&page(by_name).await.unwrap()),
        sorted(vec![plain, marked])
    );
    let by_id = EventFilter {
        agent: Some(w2.id.to_string()),
        ..EventFilter::default()
    };
    assert_eq!(ids(&page(by_id).await.unwrap()), [second]);
    for (filter, want) in [
        (
            EventFilter {
                priority: Some(5),
                ..EventFilter::default()
            },
            vec![marked],
        ),
        (
            EventFilter {
                correlation_id: Some("c-1".into()),
                ..EventFilter::default()
            },
            vec![marked],
        ),
        (
            EventFilter {
                status: Some(EventStatus::Pending),
                ..EventFilter::default()
            },
            all.clone(),
        ),
        (
            EventFilter {
                status: Some(EventStatus::Claimed),
                ..EventFilter::default()
            },
            vec![],
        ),
        // Case-insensitive, with `_` and `%` taken literally.
        (
            EventFilter {
                q: Some("hello_world".into()),
                ..EventFilter::default()
            },
            vec![marked],
        ),
        (
            EventFilter {
                q: Some("o%w".into()),
                ..EventFilter::default()
            },
            vec![],
        ),
    ] {
        assert_eq!(
            ids(&page(filter.clone()).await.unwrap()),
            want,
            "{filter:?}"
        );
    }
    let rest = d
        .events_page(tenant, &listing(EventFilter::default(), Some(all[0])), 1)
        .await
        .unwrap();
    assert_eq!(ids(&rest), [all[1]]);
    // The store's page: `limit`, and a cursor while more follow.
    let query = listing(EventFilter::default(), None);
    let listed = d.list_events(tenant, &query, 2).await.unwrap();
    assert_eq!(
        (ids(&listed.events), listed.next_cursor),
        (all[..2].to_vec(), Some(all[1]))
    );
    let listed = d.list_events(tenant, &query, 3).await.unwrap();
    assert_eq!((listed.events.len(), listed.next_cursor), (3, None));

    // One event and its history, in one snapshot, within the tenant only.
    let mut tx = d.begin_read().await.expect("read");
    let found = d.load_ops_event(&mut tx, tenant, marked).await.unwrap();
    assert_eq!(found.event.correlation_id.as_deref(), Some("c-1"));
    assert!(matches!(
        d.load_ops_event(&mut tx, tenant, foreign).await,
        Err(StoreError::NotFound)
    ));
    let history = d.event_history(&mut tx, marked).await.unwrap();
    assert_eq!(
        history
            .iter()
            .map(|h| (h.action.as_str(), h.actor.as_str()))
            .collect::<Vec<_>>(),
        [("created", "operator")]
    );
    d.commit(tx, &[]).await.expect("end the read");

    // What an action covers: its statuses, the ids, the filter, the window.
    let id_list = [plain, second, foreign];
    let w1_only = EventFilter {
        agent: Some("w1".into()),
        ..EventFilter::default()
    };
    let mut tx = d.begin_write().await.expect("begin");
    let purge_all = scope(BulkAction::Purge, None, None);
    assert_eq!(
        d.count_matching(&mut tx, tenant, &purge_all).await.unwrap(),
        (3, Some(all[2]))
    );
    assert_eq!(
        d.count_matching(&mut tx, tenant, &scope(BulkAction::Replay, None, None))
            .await
            .unwrap(),
        (0, None),
        "nothing is quarantined"
    );
    let by_ids = scope(BulkAction::Purge, Some(&id_list[..]), None);
    assert_eq!(
        d.count_matching(&mut tx, tenant, &by_ids).await.unwrap().0,
        2,
        "not another tenant's"
    );
    assert_eq!(
        d.count_matching(
            &mut tx,
            tenant,
            &scope(BulkAction::Purge, Some(&[][..]), None)
        )
        .await
        .unwrap(),
        (0, None)
    );
    let both = scope(BulkAction::Purge, Some(&id_list[..]), Some(&w1_only));
    assert_eq!(d.count_matching(&mut tx, tenant, &both).await.unwrap().0, 1);
    let window = Window {
        after: Some(all[0]),
        upto: Some(all[2]),
        limit: Some(1),
    };
    let targets = d
        .find_targets(&mut tx, tenant, &purge_all, &window)
        .await
        .unwrap();
    assert_eq!(targets.len(), 1);
    assert_eq!(
        (targets[0].id.clone(), targets[0].status.as_str()),
        (all[1].to_string(), "pending")
    );
    let whole = d
        .find_targets(&mut tx, tenant, &purge_all, &Window::default())
        .await
        .unwrap();
    assert_eq!(
        whole.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        all.iter().map(ToString::to_string).collect::<Vec<_>>()
    );

    // One event changed, unless its status moved since it was found.
    let target = whole.iter().find(|t| t.id == plain.to_string()).unwrap();
    let stale = Target {
        status: "claimed".into(),
        ..target.clone()
    };
    assert!(
        !d.apply_to(&mut tx, BulkAction::Purge, &stale, 3)
            .await
            .unwrap()
    );
    assert!(
        d.apply_to(&mut tx, BulkAction::Purge, target, 3)
            .await
            .unwrap()
    );
    assert!(
        !d.apply_to(&mut tx, BulkAction::Purge, target, 3)
            .await
            .unwrap(),
        "not twice"
    );
    let purged = d.load_ops_event(&mut tx, tenant, plain).await.unwrap();
    assert_eq!(
        (purged.event.status, purged.event.payload),
        (EventStatus::Purged, None)
    );

    // Batches (the driver's shape): each event changed once, with history, at most
    // the limit; a batch under its limit found the rest empty.
    let mut batches = Vec::new();
    for (limit, full, now) in [(1, true, 4), (5, false, 5)] {
        let window = Window {
            limit: Some(limit),
            ..Window::default()
        };
        let batch = d
            .apply_batch(&mut tx, tenant, &purge_all, &window, &Actor::Operator, now)
            .await
            .unwrap();
        assert_eq!((batch.full, batch.changed.len()), (full, 1), "{batch:?}");
        batches.push(batch.changed[0].clone());
    }
    let (next, last) = (&batches[0], &batches[1]);
    assert_ne!(
        next.id,
        plain.to_string(),
        "a purged event is not purged again"
    );
    assert_ne!(next.id, last.id);
    let (changed, agent, seq) = (last.id.clone(), last.agent.clone(), last.seq);
    let changed_id: EventId = changed.parse().unwrap();
    let event = d.load_ops_event(&mut tx, tenant, changed_id).await.unwrap();
    assert_eq!(
        (agent, seq as u64, event.event.status),
        (
            event.event.agent_id.to_string(),
            event.event.seq,
            EventStatus::Purged
        )
    );
    let history = d.event_history(&mut tx, changed_id).await.unwrap();
    assert_eq!(
        history
            .last()
            .map(|h| (h.action.as_str(), h.actor.as_str())),
        Some(("purged", "operator"))
    );
    assert_eq!(
        d.count_matching(&mut tx, tenant, &purge_all).await.unwrap(),
        (0, None)
    );

    // Audit rows: an action at once and a job, newest first, per tenant.
    let at_once = d
        .insert_audit(
            &mut tx,
            &NewAudit {
                tenant,
                scope: &both,
                actor: &Actor::Operator,
                count: 1,
                job: None,
                now: 6,
            },
        )
        .await
        .unwrap();
    let job = d
        .insert_audit(
            &mut tx,
            &NewAudit {
                tenant,
                scope: &purge_all,
                actor: &Actor::System("test"),
                count: 0,
                job: Some(NewJob {
                    state: JobState::Completed,
                    total: 0,
                    rate: Some(7),
                    owner: Some("someone"),
                }),
                now: 7,
            },
        )
        .await
        .unwrap();
    d.commit(tx, &[]).await.expect("commit");
    let audit = d.audit_entries(tenant, 10).await.unwrap();
    assert_eq!(
        audit.iter().map(|e| e.id).collect::<Vec<_>>(),
        [job, at_once]
    );
    let row = &audit[1];
    assert_eq!(
        (
            row.actor.as_str(),
            row.action.as_str(),
            row.count,
            row.job_state
        ),
        ("operator", "purge", 1, None)
    );
    assert_eq!(
        (row.ids.as_ref().map(Vec::len), row.filter.clone()),
        (Some(3), Some(w1_only.clone()))
    );
    assert_eq!(
        (
            audit[0].job_state,
            audit[0].job_total,
            audit[0].actor.as_str()
        ),
        (Some(JobState::Completed), Some(0), "system:test")
    );
    assert_eq!(d.audit_entries(tenant, 1).await.unwrap().len(), 1);
    assert!(d.audit_entries(other, 10).await.unwrap().is_empty());
    // The store's action at once: refused above `max`, else done with its audit row.
    let everything = scope(BulkAction::Purge, None, None);
    assert!(matches!(
        d.bulk(other, &everything, 0, &Actor::Operator, 8).await,
        Err(StoreError::TooMany(1))
    ));
    let done = d
        .bulk(
            other,
            &scope(BulkAction::Purge, Some(&[foreign][..]), None),
            1,
            &Actor::Operator,
            8,
        )
        .await
        .unwrap();
    assert_eq!(done.value.0, 1);
    assert_eq!(
        done.wakes,
        [Wake {
            tenant_id: other,
            agent_id: stranger.id,
            cursor_hint: 1
        }]
    );
    assert_eq!(d.audit(other, 10).await.unwrap()[0].id, done.value.1);
    assert_eq!(bulk::verb(BulkAction::Replay), "replayed");
}
