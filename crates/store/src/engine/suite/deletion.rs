//! Deleting an agent: the row is marked and its name freed, its tokens revoked,
//! its open events purged (completed ones stay as they were), lookups and lists
//! skip it, its sequence no longer advances, and a second deletion finds nothing.

use super::note;
use crate::*;

fn msg() -> NewMessage {
    NewMessage {
        payload: "{}".to_owned(),
        correlation_id: None,
        priority: 0,
        available_at: 1,
        expires_at: None,
        max_attempts: 5,
    }
}

/// A token hash no other area of the suite uses.
fn hash(n: u8) -> Vec<u8> {
    let mut h = vec![0x44; 32];
    h[0] = 0xde;
    h[31] = n;
    h
}

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("deletion", 1).await.unwrap();
    let scopes = vec!["messages:send".to_owned()];
    let doomed = d
        .create_agent(tenant, "doomed", &hash(1), &scopes, None, 1)
        .await
        .unwrap();
    let keeper = d
        .create_agent(tenant, "keeper", &hash(2), &scopes, None, 1)
        .await
        .unwrap();
    for _ in 0..3 {
        d.send_direct(tenant, doomed.id, &Actor::Operator, &msg(), None, 2)
            .await
            .unwrap();
    }
    let other = d.ensure_tenant("deletion-other", 1).await.unwrap();
    assert_eq!(
        d.delete_agent(other, doomed.id, &note(), 3).await.unwrap(),
        None,
        "another tenant's"
    );

    let deleted = d.delete_agent(tenant, doomed.id, &note(), 3).await.unwrap();
    assert_eq!(
        deleted,
        Some(AgentDeletion {
            revoked: 1,
            purged: 3
        })
    );
    assert_eq!(
        d.delete_agent(tenant, doomed.id, &note(), 4).await.unwrap(),
        None,
        "once"
    );
    assert!(d.agent(tenant, "doomed").await.is_err());
    assert!(d.agent(tenant, &doomed.id.to_string()).await.is_err());
    assert!(d.token(&hash(1)).await.unwrap().is_none());
    assert!(d.token(&hash(2)).await.unwrap().is_some(), "the keeper's");
    let names: Vec<String> = d
        .agents(tenant)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["keeper"]);
    assert!(
        d.depth(Some(tenant))
            .await
            .unwrap()
            .iter()
            .all(|row| row.agent_id != doomed.id),
        "the depth view skips it"
    );
    let late = d
        .send_direct(tenant, doomed.id, &Actor::Operator, &msg(), None, 5)
        .await;
    assert!(matches!(late, Err(StoreError::NotFound)), "{late:?}");
    // The name is free.
    let again = d
        .create_agent(tenant, "doomed", &hash(3), &scopes, None, 6)
        .await
        .unwrap();
    assert_ne!(again.id, doomed.id);
    let _ = keeper;
}
