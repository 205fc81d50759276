//! The directory's statements: tenants, tokens, console grants, agents, depth and
//! client reports and settings, each within its tenant.

use super::message;
use crate::store::engine::directory::{DepthCount, DirectoryDriver, NewToken, depth_rows};
use crate::store::engine::events::{EventDriver, deliver};
use crate::store::*;

/// Every `DirectoryStatements` and [`DirectoryDriver`] method against a fresh
/// database of `d`'s backend (other areas' checks may share it: names here are
/// this file's own).
pub(super) async fn check<D: DirectoryDriver + EventDriver + Store>(d: &D) {
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

async fn tenants<D: DirectoryDriver + Store>(d: &D) -> (TenantId, TenantId) {
    assert_eq!(d.tenant_named("dir").await.unwrap(), None);
    let id = TenantId::new();
    let mut tx = d.begin_write().await.expect("begin");
    assert!(d.insert_tenant(&mut tx, id, "dir", 1).await.unwrap());
    d.commit(tx, &[]).await.expect("commit");
    // A name taken (by another instance, say) is told, not an error.
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        !d.insert_tenant(&mut tx, TenantId::new(), "dir", 2)
            .await
            .unwrap()
    );
    drop(tx);
    assert_eq!(d.tenant_named("dir").await.unwrap(), Some(id));
    // Ensuring finds it, or makes one.
    assert_eq!(d.ensure_tenant("dir", 3).await.unwrap(), id);
    let other = d.ensure_tenant("dir-other", 3).await.unwrap();
    assert_ne!(other, id);
    assert_eq!(d.ensure_tenant("dir-other", 4).await.unwrap(), other);
    created_tenants(d).await;
    (id, other)
}

/// `create_tenant`: the tenant and its operator token at once, a taken name
/// creates neither, and of several creators of one name racing (on a pool, so on
/// several connections) exactly one wins.
async fn created_tenants<D: DirectoryDriver + Store>(d: &D) {
    let scopes = vec!["admin-less".to_owned(), "ops:read".to_owned()];
    let operator = |hash: &'static [u8]| NewOperator {
        token_hash: hash,
        scopes: &scopes,
        label: "operator",
    };
    let made = d
        .create_tenant("dir-made", &operator(&[0xe0; 32]), 5)
        .await
        .expect("create");
    assert_eq!(
        (made.name.as_str(), made.created_at, made.agents),
        ("dir-made", 5, 0)
    );
    let token = d.live_token(&[0xe0; 32]).await.unwrap().expect("its token");
    assert_eq!(token.tenant_id, made.id);
    assert_eq!(token.agent_id, None);
    assert_eq!(token.scopes, scopes);
    assert!(matches!(
        d.create_tenant("dir-made", &operator(&[0xe1; 32]), 6).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(d.live_token(&[0xe1; 32]).await.unwrap().is_none());

    const HASHES: [[u8; 32]; 6] = [
        [0xf0; 32], [0xf1; 32], [0xf2; 32], [0xf3; 32], [0xf4; 32], [0xf5; 32],
    ];
    let racers = HASHES.iter().map(|hash| {
        let scopes = &scopes;
        async move {
            let operator = NewOperator {
                token_hash: hash,
                scopes,
                label: "operator",
            };
            d.create_tenant("dir-raced", &operator, 7).await
        }
    });
    let results = futures::future::join_all(racers).await;
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "exactly one creator wins: {results:?}");
    assert!(
        results
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(StoreError::Conflict(_)))),
        "the others are told the name is taken: {results:?}"
    );
    let mut kept = 0;
    for hash in &HASHES {
        if let Some(t) = d.live_token(hash).await.unwrap() {
            assert_eq!(t.tenant_id, won[0].id);
            kept += 1;
        }
    }
    assert_eq!(kept, 1, "only the winner's token exists");

    // The scopes of a token can be replaced (the admin's upgrade at start).
    let upgraded = vec!["admin".to_owned(), "ops:read".to_owned()];
    d.set_token_scopes(&[0xe0; 32], &upgraded).await.unwrap();
    assert_eq!(
        d.live_token(&[0xe0; 32]).await.unwrap().unwrap().scopes,
        upgraded
    );
}

/// Two agents of `tenant` and one of the same name in `other`.
async fn agents<D: DirectoryDriver + Store>(
    d: &D,
    tenant: TenantId,
    other: TenantId,
) -> (AgentRecord, AgentRecord, AgentRecord) {
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
        .create_agent(other, "dir-a", &[0xd0; 32], &[], 13)
        .await
        .expect("same name, other tenant");
    assert!(matches!(
        d.create_agent(tenant, "dir-b", &[0xd1; 32], &[], 14).await,
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

async fn tokens<D: DirectoryDriver + Store>(
    d: &D,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    foreign: &AgentRecord,
) {
    let scopes = vec!["inbox:read".to_owned(), "inbox:write".to_owned()];
    let mut tx = d.begin_write().await.expect("begin");
    d.insert_token_row(
        &mut tx,
        &NewToken {
            hash: &[0xe1; 32],
            tenant,
            agent: Some(a1.id),
            scopes: &scopes,
            label: "agent:dir-a",
            now: 20,
        },
    )
    .await
    .unwrap();
    d.commit(tx, &[]).await.expect("commit");
    let t = d.live_token(&[0xe1; 32]).await.unwrap().expect("token");
    assert_eq!((t.tenant_id, t.agent_id), (tenant, Some(a1.id)));
    assert_eq!((t.agent_name.as_deref(), t.scopes), (Some("dir-a"), scopes));
    // An operator's token: no agent.
    d.insert_token(&[0xe2; 32], tenant, None, &["ops:read".into()], "ops", 21)
        .await
        .unwrap();
    let t = d.token(&[0xe2; 32]).await.unwrap().expect("token");
    assert_eq!(
        (t.agent_id, t.agent_name, t.scopes),
        (None, None, vec!["ops:read".into()])
    );
    assert!(d.live_token(&[0xe3; 32]).await.unwrap().is_none());
    // The tenant's credentials, oldest first, live or not.
    let listed = d.credentials(tenant).await.unwrap();
    let mine: Vec<_> = listed
        .iter()
        .filter(|c| c.hash == [0xe1; 32] || c.hash == [0xe2; 32])
        .map(|c| (c.label.as_str(), c.agent_name.as_deref(), c.revoked_at))
        .collect();
    assert_eq!(
        mine,
        [("agent:dir-a", Some("dir-a"), None), ("ops", None, None)]
    );
    // Another tenant cannot revoke it.
    assert!(
        !d.revoke_token(TenantId::new(), &[0xe2; 32], 22)
            .await
            .unwrap()
    );
    assert!(d.live_token(&[0xe2; 32]).await.unwrap().is_some());
    // A revoked token is not returned, and revoking it again changes nothing.
    assert!(d.revoke_credential(tenant, &[0xe2; 32], 22).await.unwrap());
    assert!(!d.revoke_credential(tenant, &[0xe2; 32], 23).await.unwrap());
    assert!(d.live_token(&[0xe2; 32]).await.unwrap().is_none());
    assert!(d.token(&[0xe1; 32]).await.unwrap().is_some());
    // Every credential of an agent, within its tenant only.
    assert_eq!(
        d.revoke_agent_credentials(tenant, foreign.id, 24)
            .await
            .unwrap(),
        0
    );
    assert!(d.live_token(&[0xd0; 32]).await.unwrap().is_some());
    assert_eq!(
        d.revoke_agent_credentials(other, foreign.id, 24)
            .await
            .unwrap(),
        1
    );
    assert!(d.live_token(&[0xd0; 32]).await.unwrap().is_none());
    assert_eq!(
        d.revoke_agent_credentials(other, foreign.id, 25)
            .await
            .unwrap(),
        0
    );
    let revoked = d.credentials(tenant).await.unwrap();
    let ops = revoked.iter().find(|c| c.hash == [0xe2; 32]).unwrap();
    assert_eq!(
        ops.revoked_at,
        Some(22),
        "the first revocation's time stays"
    );
}

async fn grants<D: DirectoryDriver + Store>(d: &D, tenant: TenantId, a1: &AgentRecord) {
    let scopes = vec!["inbox:read".to_owned()];
    let grant = |hash: &'static [u8], kind, token_hash: &'static [u8], expires_at| NewGrant {
        hash,
        kind,
        tenant,
        token_hash,
        scopes: &scopes,
        expires_at,
    };
    let mut tx = d.begin_write().await.expect("begin");
    let session = grant(&[0x51; 32], GrantKind::Session, &[0xe1; 32], 1_000);
    d.insert_grant_row(&mut tx, &session, 30).await.unwrap();
    d.insert_grant_row(
        &mut tx,
        &grant(&[0x52; 32], GrantKind::Session, &[0xe1; 32], 100),
        30,
    )
    .await
    .unwrap();
    // A grant of the revoked token.
    d.insert_grant_row(
        &mut tx,
        &grant(&[0x53; 32], GrantKind::Session, &[0xe2; 32], 1_000),
        30,
    )
    .await
    .unwrap();
    d.commit(tx, &[]).await.expect("commit");

    // Live: unexpired, of its kind, its token not revoked; as its token's agent.
    let g = d
        .live_grant(None, &[0x51; 32], GrantKind::Session, 999)
        .await
        .unwrap()
        .expect("live");
    assert_eq!(
        (g.record.tenant_id, g.record.agent_id),
        (tenant, Some(a1.id))
    );
    assert_eq!(
        (g.record.agent_name.as_deref(), &g.record.scopes),
        (Some("dir-a"), &scopes)
    );
    assert_eq!((g.token_hash, g.expires_at), (vec![0xe1; 32], 1_000));
    assert!(
        d.live_grant(None, &[0x51; 32], GrantKind::Session, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.live_grant(None, &[0x51; 32], GrantKind::Ticket, 0)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.live_grant(None, &[0x53; 32], GrantKind::Session, 0)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.grant(&[0x52; 32], GrantKind::Session, 99)
            .await
            .unwrap()
            .is_some()
    );

    // Expired ones are forgotten, in the writer's transaction.
    let mut tx = d.begin_write().await.expect("begin");
    d.delete_expired_grants(&mut tx, 100).await.unwrap();
    assert!(
        d.live_grant(Some(&mut tx), &[0x52; 32], GrantKind::Session, 0)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.live_grant(Some(&mut tx), &[0x51; 32], GrantKind::Session, 100)
            .await
            .unwrap()
            .is_some()
    );
    // Of its kind only; whether there was one.
    assert!(
        !d.delete_grant_of_kind(&mut tx, &[0x51; 32], GrantKind::Ticket)
            .await
            .unwrap()
    );
    assert!(
        d.delete_grant_of_kind(&mut tx, &[0x53; 32], GrantKind::Session)
            .await
            .unwrap()
    );
    assert!(
        !d.delete_grant_of_kind(&mut tx, &[0x53; 32], GrantKind::Session)
            .await
            .unwrap()
    );
    d.commit(tx, &[]).await.expect("commit");
    d.delete_grant_row(&[0x51; 32]).await.unwrap();
    assert!(
        d.live_grant(None, &[0x51; 32], GrantKind::Session, 0)
            .await
            .unwrap()
            .is_none()
    );
    d.delete_grant(&[0x51; 32]).await.unwrap();

    // A ticket works once.
    d.insert_grant(&grant(&[0x71; 32], GrantKind::Ticket, &[0xe1; 32], 200), 40)
        .await
        .unwrap();
    let g = d
        .take_live_grant(&[0x71; 32], GrantKind::Ticket, 50)
        .await
        .unwrap();
    assert_eq!(g.expect("taken").record.agent_id, Some(a1.id));
    assert!(
        d.take_live_grant(&[0x71; 32], GrantKind::Ticket, 50)
            .await
            .unwrap()
            .is_none()
    );
    // Not as a session; an expired one is refused, and gone all the same.
    d.insert_grant(&grant(&[0x72; 32], GrantKind::Ticket, &[0xe1; 32], 200), 40)
        .await
        .unwrap();
    assert!(
        d.take_grant(&[0x72; 32], GrantKind::Session, 50)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.take_grant(&[0x72; 32], GrantKind::Ticket, 200)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        d.grant(&[0x72; 32], GrantKind::Ticket, 0)
            .await
            .unwrap()
            .is_none()
    );
    // Inserting a grant forgets the expired ones.
    d.insert_grant(
        &grant(&[0x73; 32], GrantKind::Ticket, &[0xe1; 32], 300),
        250,
    )
    .await
    .unwrap();
    d.insert_grant(
        &grant(&[0x74; 32], GrantKind::Ticket, &[0xe1; 32], 400),
        300,
    )
    .await
    .unwrap();
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        !d.delete_grant_of_kind(&mut tx, &[0x73; 32], GrantKind::Ticket)
            .await
            .unwrap()
    );
    assert!(
        d.delete_grant_of_kind(&mut tx, &[0x74; 32], GrantKind::Ticket)
            .await
            .unwrap()
    );
    d.commit(tx, &[]).await.expect("commit");
}

async fn depth<D: DirectoryDriver + EventDriver + Store>(
    d: &D,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
    foreign: &AgentRecord,
) {
    // a1: three events, the first claimed; a2 and the foreign agent: none.
    let mut tx = d.begin_write().await.expect("begin");
    for (n, at) in [(1, 50), (2, 60), (3, 70)] {
        let msg = NewMessage {
            available_at: at,
            ..message(n)
        };
        deliver(d, &mut tx, tenant, a1.id, &Actor::Operator, None, &msg, 0)
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

async fn client_reports<D: DirectoryDriver + Store>(
    d: &D,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
    foreign: &AgentRecord,
) {
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
async fn client_settings<D: DirectoryDriver + Store>(
    d: &D,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    a2: &AgentRecord,
) {
    let token = || async { d.live_token(&[0xe1; 32]).await.unwrap().unwrap() };
    assert!(d.client_settings(tenant).await.unwrap().is_empty());
    assert_eq!(token().await.client_settings, ClientSettings::default());
    let paused = ClientSettings {
        poll_ceiling_ms: Some(60_000),
        reports_paused: Some(true),
    };
    d.put_client_settings(tenant, None, paused, "operator", 90)
        .await
        .unwrap();
    assert_eq!(token().await.client_settings, paused, "the tenant's row");
    // The agent's own row overrides field by field; NULL inherits.
    let own = ClientSettings {
        poll_ceiling_ms: None,
        reports_paused: Some(false),
    };
    d.put_client_settings(tenant, Some(a1.id), own, "operator", 91)
        .await
        .unwrap();
    d.put_client_settings(tenant, Some(a2.id), paused, "operator", 92)
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
    d.put_client_settings(tenant, Some(a1.id), faster, "agent:x", 93)
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
    d.put_client_settings(other, None, own, "operator", 94)
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
    assert!(d.delete_client_settings(tenant, Some(a1.id)).await.unwrap());
    assert!(!d.delete_client_settings(tenant, Some(a1.id)).await.unwrap());
    assert_eq!(token().await.client_settings, paused);
    assert!(d.delete_client_settings(tenant, None).await.unwrap());
    assert_eq!(token().await.client_settings, ClientSettings::default());
    assert_eq!(d.client_settings(tenant).await.unwrap().len(), 1, "a2's");
}
