//! The directory's statements: agents, depth and client reports and settings, each
//! within its tenant. Tenants, tokens and console grants are in `credentials.rs`.

use super::credentials::{grants, tenants, tokens};
use super::note;
use super::note_by;
use super::{message, operator};
use crate::engine::directory::{DepthCount, DirectoryStatements, depth_rows};
use crate::engine::events::{EventStatements, deliver};
use crate::*;

/// Every `DirectoryStatements` and [`DirectoryStatements`] method against a fresh
/// database of `d`'s backend (other areas' checks may share it: names here are
/// this file's own).
pub(super) async fn check<D: DirectoryStatements + EventStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let (tenant, other) = tenants(d).await;
    let (a1, a2, foreign) = agents(d, tenant, other).await;
    // Each tenant with its agents' count, by name.
    let listed = d.tenants().await.unwrap();
    let agents_of = |id| listed.iter().find(|t| t.id == id).map(|t| t.agents);
    assert_eq!((agents_of(tenant), agents_of(other)), (Some(2), Some(1)));
    assert!(
        listed.windows(2).all(|w| w[0].name < w[1].name),
        "{listed:?}"
    );
    tokens(d, tenant, other, &a1, &foreign).await;
    grants(d, tenant, &a1).await;
    depth(d, tenant, other, &a1, &a2, &foreign).await;
    client_reports(d, tenant, other, &a1, &a2, &foreign).await;
    client_settings(d, tenant, other, &a1, &a2).await;
}

/// Two agents of `tenant` and one of the same name in `other`.
async fn agents<D: DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    other: TenantId,
) -> (AgentRecord, AgentRecord, AgentRecord)
where
    Engine<D>: Store,
{
    let b = AgentRecord::created(AgentId::new(), tenant, "dir-b", 10);
    let a = AgentRecord::created(AgentId::new(), tenant, "dir-a", 11);
    let mut tx = d.begin_write().await.expect("begin");
    assert!(d.insert_agent(&mut tx, &b).await.unwrap());
    assert!(d.insert_agent(&mut tx, &a).await.unwrap());
    d.commit(tx, &[]).await.expect("commit");
    // A name is unique within its tenant only; the failed insert ends the
    // transaction (on PostgreSQL), which is then dropped.
    let mut tx = d.begin_write().await.expect("begin");
    let twin = AgentRecord::created(AgentId::new(), tenant, "dir-a", 12);
    assert!(!d.insert_agent(&mut tx, &twin).await.unwrap());
    drop(tx);
    let foreign = d
        .create_agent(other, "dir-a", &[0xd0; 32], &[], None, 13)
        .await
        .expect("same name, other tenant");
    assert!(matches!(
        d.create_agent(tenant, "dir-b", &[0xd1; 32], &[], None, 14)
            .await,
        Err(StoreError::Conflict(_))
    ));
    // The refused agent's token was not kept either.
    assert!(d.live_token(&[0xd1; 32]).await.unwrap().is_none());

    // Found by id or by name, within the tenant only.
    assert_eq!(
        d.agent_by_key(tenant, &a.id.to_string())
            .await
            .unwrap()
            .unwrap()
            .name,
        "dir-a"
    );
    assert!(
        d.agent_by_key(other, &a.id.to_string())
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.agent_by_key(tenant, &foreign.id.to_string())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        d.agent_by_key(tenant, "dir-a").await.unwrap().unwrap().id,
        a.id
    );
    assert_eq!(
        d.agent_by_key(other, "dir-a").await.unwrap().unwrap().id,
        foreign.id
    );
    assert!(d.agent_by_key(tenant, "nobody").await.unwrap().is_none());
    assert_eq!(d.agent(tenant, &a.id.to_string()).await.unwrap().id, a.id);
    assert_eq!(d.agent(tenant, "dir-b").await.unwrap().id, b.id);
    assert!(matches!(
        d.agent(other, &a.id.to_string()).await,
        Err(StoreError::NotFound)
    ));
    // By name.
    let names: Vec<_> = d
        .agents_of(tenant)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["dir-a", "dir-b"]);
    let row = &d.agents(other).await.unwrap()[0];
    assert_eq!(
        (row.id, row.tenant_id, row.created_at),
        (foreign.id, other, 13)
    );

    // Seen: set when unset or older than the bound, else left alone.
    let seen = |id: AgentId| async move {
        d.agent_by_key(tenant, &id.to_string())
            .await
            .unwrap()
            .unwrap()
            .last_seen_at
    };
    assert_eq!(seen(a.id).await, None);
    d.note_seen(None, a.id, 1_000, 0).await.unwrap();
    assert_eq!(seen(a.id).await, Some(1_000));
    d.note_seen(None, a.id, 1_500, 500).await.unwrap();
    assert_eq!(seen(a.id).await, Some(1_000));
    d.note_seen(None, a.id, 2_500, 1_500).await.unwrap();
    assert_eq!(seen(a.id).await, Some(2_500));
    d.touch_agent(a.id, 3_000).await.unwrap();
    assert_eq!(seen(a.id).await, Some(2_500), "within a second");
    d.touch_agent(a.id, 3_600).await.unwrap();
    assert_eq!(seen(a.id).await, Some(3_600));
    (a, b, foreign)
}

async fn depth<D: DirectoryStatements + EventStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
    foreign: &AgentRecord,
) where
    Engine<D>: Store,
{
    // a1: three events, the first claimed; a2 and the foreign agent: none.
    let mut tx = d.begin_write().await.expect("begin");
    for (n, at) in [(1, 50), (2, 60), (3, 70)] {
        let msg = NewMessage {
            available_at: at,
            ..message(n)
        };
        deliver(&d.0, &mut tx, a1.id, &operator(tenant, &msg, 0))
            .await
            .unwrap();
    }
    d.commit(tx, &[]).await.expect("commit");
    let claimed = d
        .claim(a1, 1, 60_000, None, 100)
        .await
        .expect("claim")
        .events;
    assert_eq!(claimed.len(), 1);

    let mut groups = d.depth_counts(Some(tenant)).await.unwrap();
    groups.sort_by_key(|g| (g.agent_name.clone(), g.status.clone()));
    let line = |a: &AgentRecord, status: Option<&str>, count, oldest| DepthCount {
        agent_id: a.id,
        tenant_id: tenant,
        agent_name: a.name.clone(),
        status: status.map(str::to_owned),
        count,
        oldest_pending_at: oldest,
    };
    // The claimed one was available first (50): 60 is the oldest pending.
    assert_eq!(
        groups,
        [
            line(a1, Some("claimed"), 1, None),
            line(a1, Some("pending"), 2, Some(60)),
            line(a2, None, 0, None),
        ]
    );
    let all = d.depth_counts(None).await.unwrap();
    assert!(
        all.iter()
            .any(|g| g.agent_id == foreign.id && g.tenant_id == other)
    );
    assert!(all.iter().any(|g| g.agent_id == a1.id));

    // Folded: one row per agent, by name.
    let rows = d.depth(Some(tenant)).await.unwrap();
    let names: Vec<_> = rows.iter().map(|r| r.agent_name.as_str()).collect();
    assert_eq!(names, ["dir-a", "dir-b"]);
    assert_eq!((rows[0].counts.pending, rows[0].counts.claimed), (2, 1));
    assert_eq!(
        (rows[0].oldest_pending_at, rows[1].oldest_pending_at),
        (Some(60), None)
    );
    assert_eq!(rows[1].counts, StatusCounts::default());
    let other_rows = d.depth(Some(other)).await.unwrap();
    assert_eq!(other_rows.len(), 1);
    assert_eq!(other_rows[0].agent_id, foreign.id);
    // Equal names (of two tenants) by id; the oldest over all groups.
    let same = |id, at| DepthCount {
        agent_id: id,
        tenant_id: tenant,
        agent_name: "x".into(),
        status: Some("pending".into()),
        count: 1,
        oldest_pending_at: at,
    };
    let (lo, hi) = if a1.id.to_string() < a2.id.to_string() {
        (a1.id, a2.id)
    } else {
        (a2.id, a1.id)
    };
    let folded = depth_rows(vec![same(hi, Some(5)), same(lo, None), same(hi, Some(3))]);
    assert_eq!(
        folded.iter().map(|r| r.agent_id).collect::<Vec<_>>(),
        [lo, hi]
    );
    assert_eq!(
        (folded[1].counts.pending, folded[1].oldest_pending_at),
        (2, Some(3))
    );
}

async fn client_reports<D: DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
    foreign: &AgentRecord,
) where
    Engine<D>: Store,
{
    assert!(d.client_reports_of(tenant).await.unwrap().is_empty());
    d.upsert_client_report(a2.id, "{\"n\":1}", 80)
        .await
        .unwrap();
    d.upsert_client_report(a1.id, "{\"n\":2}", 81)
        .await
        .unwrap();
    // Replaced, not added.
    d.upsert_client_report(a2.id, "{\"n\":3}", 82)
        .await
        .unwrap();
    d.put_client_report(foreign.id, "{\"n\":4}", 83)
        .await
        .unwrap();
    let rows = d.client_reports_of(tenant).await.unwrap();
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.agent_id,
                r.name.as_str(),
                r.report.as_str(),
                r.received_at,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (a1.id, "dir-a", "{\"n\":2}", 81),
            (a2.id, "dir-b", "{\"n\":3}", 82)
        ]
    );
    let theirs = d.client_reports(other).await.unwrap();
    assert_eq!(theirs.len(), 1);
    assert_eq!(
        (theirs[0].agent_id, theirs[0].received_at),
        (foreign.id, 83)
    );
}

/// Rows of client settings, and the token lookup that joins the agent's over the
/// tenant's. `a1` holds the token `[0xe1; 32]` (see `tokens`).
async fn client_settings<D: DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
) where
    Engine<D>: Store,
{
    let token = || async { d.live_token(&[0xe1; 32]).await.unwrap().unwrap() };
    assert!(d.client_settings(tenant).await.unwrap().is_empty());
    assert_eq!(token().await.client_settings, ClientSettings::default());
    let paused = ClientSettings {
        poll_ceiling_ms: Some(60_000),
        reports_paused: Some(true),
    };
    d.put_client_settings(tenant, None, paused, &note_by("operator"), 90)
        .await
        .unwrap();
    assert_eq!(token().await.client_settings, paused, "the tenant's row");
    // The agent's own row overrides field by field; NULL inherits.
    let own = ClientSettings {
        poll_ceiling_ms: None,
        reports_paused: Some(false),
    };
    d.put_client_settings(tenant, Some(a1.id), own, &note_by("operator"), 91)
        .await
        .unwrap();
    d.put_client_settings(tenant, Some(a2.id), paused, &note_by("operator"), 92)
        .await
        .unwrap();
    assert_eq!(
        token().await.client_settings,
        ClientSettings {
            poll_ceiling_ms: Some(60_000),
            reports_paused: Some(false)
        }
    );
    // Replaced, not added.
    let faster = ClientSettings {
        poll_ceiling_ms: Some(2_000),
        reports_paused: None,
    };
    d.put_client_settings(tenant, Some(a1.id), faster, &note_by("agent:x"), 93)
        .await
        .unwrap();
    assert_eq!(
        token().await.client_settings,
        ClientSettings {
            poll_ceiling_ms: Some(2_000),
            reports_paused: Some(true)
        }
    );
    // Another tenant's rows are not these, and do not reach this token.
    d.put_client_settings(other, None, own, &note_by("operator"), 94)
        .await
        .unwrap();
    let rows = d.client_settings(tenant).await.unwrap();
    let seen: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.agent_id,
                r.name.as_deref(),
                r.settings,
                r.updated_at,
                r.updated_by.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (None, None, paused, 90, "operator"),
            (Some(a1.id), Some("dir-a"), faster, 93, "agent:x"),
            (Some(a2.id), Some("dir-b"), paused, 92, "operator"),
        ]
    );
    assert_eq!(d.client_settings(other).await.unwrap().len(), 1);
    // Deleting the agent's row leaves the tenant's; deleting twice finds nothing.
    assert!(
        d.delete_client_settings(tenant, Some(a1.id), &note(), 0)
            .await
            .unwrap()
    );
    assert!(
        !d.delete_client_settings(tenant, Some(a1.id), &note(), 0)
            .await
            .unwrap()
    );
    assert_eq!(token().await.client_settings, paused);
    assert!(
        d.delete_client_settings(tenant, None, &note(), 0)
            .await
            .unwrap()
    );
    assert_eq!(token().await.client_settings, ClientSettings::default());
    assert_eq!(d.client_settings(tenant).await.unwrap().len(), 1, "a2's");
}
