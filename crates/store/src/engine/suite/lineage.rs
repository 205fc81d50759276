//! The credential tree and the operators' audit rows (`lineage.rs`, `audit.rs`):
//! revoking a credential revokes every live descendant, within its tenant, with one
//! audit row in the same transaction.

use super::note;
use crate::engine::directory::NewToken;
use crate::engine::lineage::LineageStatements;
use crate::*;

/// Seeds `hash` in `tenant` with `parent`.
async fn token<D: super::super::directory::DirectoryStatements>(
    d: &Engine<D>,
    tenant: TenantId,
    hash: u8,
    parent: Option<u8>,
) where
    Engine<D>: Store,
{
    let parent = parent.map(|p| [p; 32]);
    let mut tx = d.begin_write().await.expect("begin");
    d.insert_token_row(
        &mut tx,
        &NewToken {
            hash: &[hash; 32],
            tenant,
            agent: None,
            scopes: &["ops:read".to_owned()],
            label: "lineage",
            now: 1,
            parent: parent.as_ref().map(|p| &p[..]),
        },
    )
    .await
    .expect("token");
    d.commit(tx, &[]).await.expect("commit");
}

async fn live<D>(d: &Engine<D>, hash: u8) -> bool
where
    Engine<D>: Store,
{
    d.token(&[hash; 32]).await.unwrap().is_some()
}

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
    D: LineageStatements + super::super::directory::DirectoryStatements,
{
    let tenant = d.ensure_tenant("lineage", 0).await.unwrap();
    let other = d.ensure_tenant("lineage-other", 0).await.unwrap();
    // root ─┬─ child ── grandchild
    //       └─ sibling (revoked already)
    // loner (no parent)
    token(d, tenant, 0x71, None).await;
    token(d, tenant, 0x72, Some(0x71)).await;
    token(d, tenant, 0x73, Some(0x72)).await;
    token(d, tenant, 0x74, Some(0x71)).await;
    token(d, tenant, 0x75, None).await;
    let mut tx = d.begin_write().await.unwrap();
    let mut children = d.live_children(&mut tx, tenant, &[0x71; 32]).await.unwrap();
    children.sort();
    assert_eq!(children, vec![vec![0x72; 32], vec![0x74; 32]]);
    assert!(
        d.live_children(&mut tx, other, &[0x71; 32])
            .await
            .unwrap()
            .is_empty(),
        "a credential's children are of its tenant"
    );
    assert!(
        d.revoke_token_row(&mut tx, tenant, &[0x74; 32], 2)
            .await
            .unwrap()
    );
    assert!(
        !d.revoke_token_row(&mut tx, tenant, &[0x74; 32], 2)
            .await
            .unwrap()
    );
    assert!(
        !d.revoke_token_row(&mut tx, other, &[0x75; 32], 2)
            .await
            .unwrap(),
        "not another tenant's"
    );
    d.commit(tx, &[]).await.unwrap();
    assert_eq!(
        d.credentials(tenant)
            .await
            .unwrap()
            .iter()
            .find(|c| c.hash == [0x73; 32])
            .and_then(|c| c.parent_hash.clone()),
        Some(vec![0x72; 32]),
        "the list names each credential's parent"
    );

    // Another tenant revokes nothing of it.
    let noted = note();
    assert_eq!(
        d.revoke_credential(other, &[0x71; 32], &noted, 3)
            .await
            .unwrap(),
        0
    );
    assert!(live(d, 0x71).await && live(d, 0x73).await);
    // Revoking the root revokes its live descendants (child and grandchild), not
    // the loner; one audit row counts them.
    let before = d.audit(tenant, 50).await.unwrap().len();
    assert_eq!(
        d.revoke_credential(tenant, &[0x71; 32], &noted, 4)
            .await
            .unwrap(),
        3
    );
    for hash in [0x71, 0x72, 0x73] {
        assert!(!live(d, hash).await, "{hash:#x} is revoked with its root");
    }
    assert!(live(d, 0x75).await);
    let audit = d.audit(tenant, 50).await.unwrap();
    assert_eq!(audit.len(), before + 1, "one row: {audit:?}");
    let row = &audit[0];
    assert_eq!(
        (
            row.action.as_str(),
            row.actor.as_str(),
            row.target.as_deref(),
            row.count
        ),
        ("credential_revoked", "operator", Some("suite"), 3)
    );
    // Revoking it again changes nothing and writes nothing.
    assert_eq!(
        d.revoke_credential(tenant, &[0x71; 32], &noted, 5)
            .await
            .unwrap(),
        0
    );
    assert_eq!(d.audit(tenant, 50).await.unwrap().len(), before + 1);
}
