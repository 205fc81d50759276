//! The directory's statements of who may act: tenants (created, raced, listed),
//! tokens (listed, revoked within their tenant) and console grants. Called from
//! `directory.rs::check`, which shares its tenants and agents with them.

use super::note;
use crate::engine::directory::{DirectoryStatements, NewToken};
use crate::*;

pub(super) async fn tenants<D: DirectoryStatements>(d: &Engine<D>) -> (TenantId, TenantId)
where
    Engine<D>: Store,
{
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
    assert_eq!(d.tenant_by_name("dir").await.unwrap(), Some(id));
    assert_eq!(d.tenant_by_name("dir-none").await.unwrap(), None);
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
async fn created_tenants<D: DirectoryStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let scopes = vec!["admin-less".to_owned(), "ops:read".to_owned()];
    let operator = |hash: &'static [u8]| NewOperator {
        token_hash: hash,
        scopes: &scopes,
        label: "operator",
    };
    let made = d
        .create_tenant("dir-made", &operator(&[0xe0; 32]), None, 5)
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
        d.create_tenant("dir-made", &operator(&[0xe1; 32]), None, 6)
            .await,
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
            d.create_tenant("dir-raced", &operator, None, 7).await
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

pub(super) async fn tokens<D: DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    other: TenantId,
    a1: &AgentRecord,
    foreign: &AgentRecord,
) where
    Engine<D>: Store,
{
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
            parent: None,
        },
    )
    .await
    .unwrap();
    d.commit(tx, &[]).await.expect("commit");
    let t = d.live_token(&[0xe1; 32]).await.unwrap().expect("token");
    assert_eq!((t.tenant_id, t.agent_id), (tenant, Some(a1.id)));
    assert_eq!((t.agent_name.as_deref(), t.scopes), (Some("dir-a"), scopes));
    // An operator's token: no agent.
    d.insert_token(&[0xe2; 32], tenant, &["ops:read".into()], "ops", None, 21)
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
    assert_eq!(
        d.revoke_credential(TenantId::new(), &[0xe2; 32], &note(), 22)
            .await
            .unwrap(),
        0
    );
    assert!(d.live_token(&[0xe2; 32]).await.unwrap().is_some());
    // A revoked token is not returned, and revoking it again changes nothing.
    assert_eq!(
        d.revoke_credential(tenant, &[0xe2; 32], &note(), 22)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        d.revoke_credential(tenant, &[0xe2; 32], &note(), 23)
            .await
            .unwrap(),
        0
    );
    assert!(d.live_token(&[0xe2; 32]).await.unwrap().is_none());
    assert!(d.token(&[0xe1; 32]).await.unwrap().is_some());
    // Every credential of an agent, within its tenant only.
    assert_eq!(
        d.revoke_agent_credentials(tenant, foreign.id, &note(), 24)
            .await
            .unwrap(),
        0
    );
    assert!(d.live_token(&[0xd0; 32]).await.unwrap().is_some());
    assert_eq!(
        d.revoke_agent_credentials(other, foreign.id, &note(), 24)
            .await
            .unwrap(),
        1
    );
    assert!(d.live_token(&[0xd0; 32]).await.unwrap().is_none());
    assert_eq!(
        d.revoke_agent_credentials(other, foreign.id, &note(), 25)
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

pub(super) async fn grants<D: DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    a1: &AgentRecord,
) where
    Engine<D>: Store,
{
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
    d.insert_grant(
        &grant(&[0x71; 32], GrantKind::Ticket, &[0xe1; 32], 200),
        None,
        40,
    )
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
    d.insert_grant(
        &grant(&[0x72; 32], GrantKind::Ticket, &[0xe1; 32], 200),
        None,
        40,
    )
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
        None,
        250,
    )
    .await
    .unwrap();
    d.insert_grant(
        &grant(&[0x74; 32], GrantKind::Ticket, &[0xe1; 32], 400),
        None,
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
