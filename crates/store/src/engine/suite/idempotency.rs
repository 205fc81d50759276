//! The statements of idempotency keys, and phase 1 over them.

use crate::engine::idempotency::{IdemStatements, KeyTerms, StoredKey};

/// A key taken at `now`, locked for 10 ms, kept for a second.
fn terms(now: i64) -> KeyTerms {
    KeyTerms {
        now,
        lock_ms: 10,
        ttl_ms: 1_000,
    }
}
use crate::*;

fn key(tenant: TenantId, hash: u8, owner: u8) -> IdemKey {
    IdemKey {
        tenant_id: tenant,
        principal: "agent:w1".into(),
        key_hash: vec![hash],
        fingerprint: vec![1],
        owner: vec![owner],
    }
}

fn response(status: u16) -> StoredResponse {
    StoredResponse {
        status,
        body: "{\"ok\":true}".into(),
    }
}

/// Every [`IdemStatements`](crate::engine::idempotency::IdemStatements) method and [`IdemStatements`] constant against a fresh
/// database of `d`'s backend.
pub(super) async fn check<D: IdemStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("suite-idem", 0).await.expect("tenant");
    let mine = key(tenant, 1, 7);
    let theirs = IdemKey {
        owner: vec![8],
        ..mine.clone()
    };

    let mut tx = d.begin_write().await.expect("begin");
    // Inserted once, in flight under its owner.
    assert!(d.insert_key(&mut tx, &mine, terms(100)).await.unwrap());
    assert!(!d.insert_key(&mut tx, &theirs, terms(200)).await.unwrap());
    let in_flight = StoredKey {
        fingerprint: vec![1],
        state: "in_flight".into(),
        status_code: None,
        response: None,
        locked_until: 110,
        expires_at: 1_100,
        owner: Some(vec![7]),
    };
    assert_eq!(d.lock_key(&mut tx, &mine).await.unwrap(), Some(in_flight));
    assert_eq!(d.lock_key(&mut tx, &key(tenant, 2, 7)).await.unwrap(), None);
    // Taken over: the first owner can no longer store its response; neither can
    // the new one with another body.
    d.take_over_key(&mut tx, &theirs, 300).await.unwrap();
    let row = d.lock_key(&mut tx, &mine).await.unwrap().expect("key");
    assert_eq!((row.owner, row.locked_until), (Some(vec![8]), 300));
    assert!(
        !d.store_response(&mut tx, &mine, &response(201))
            .await
            .unwrap()
    );
    let other_body = IdemKey {
        fingerprint: vec![2],
        ..theirs.clone()
    };
    assert!(
        !d.store_response(&mut tx, &other_body, &response(201))
            .await
            .unwrap()
    );
    assert!(
        d.store_response(&mut tx, &theirs, &response(201))
            .await
            .unwrap()
    );
    let row = d.lock_key(&mut tx, &mine).await.unwrap().expect("key");
    assert_eq!(
        (row.state.as_str(), row.status_code, row.response.as_deref()),
        ("done", Some(201), Some("{\"ok\":true}"))
    );
    // Done: stored once only, and not forgotten as in flight.
    assert!(
        !d.store_response(&mut tx, &theirs, &response(400))
            .await
            .unwrap()
    );
    d.forget_key(&mut tx, &theirs).await.unwrap();
    assert!(d.lock_key(&mut tx, &mine).await.unwrap().is_some());
    // Renewed: a new fingerprint, in flight, nothing stored.
    d.renew_key(&mut tx, &other_body, terms(2_000))
        .await
        .unwrap();
    let renewed = StoredKey {
        fingerprint: vec![2],
        state: "in_flight".into(),
        status_code: None,
        response: None,
        locked_until: 2_010,
        expires_at: 3_000,
        owner: Some(vec![8]),
    };
    assert_eq!(d.lock_key(&mut tx, &mine).await.unwrap(), Some(renewed));
    // Forgotten only by its owner.
    d.forget_key(&mut tx, &mine).await.unwrap();
    assert!(d.lock_key(&mut tx, &mine).await.unwrap().is_some());
    d.forget_key(&mut tx, &theirs).await.unwrap();
    assert_eq!(d.lock_key(&mut tx, &mine).await.unwrap(), None);
    // Every in-flight key, not the done ones.
    for hash in [3, 4, 5] {
        let k = key(tenant, hash, 7);
        assert!(d.insert_key(&mut tx, &k, terms(0)).await.unwrap());
    }
    assert!(
        d.store_response(&mut tx, &key(tenant, 5, 7), &response(201))
            .await
            .unwrap()
    );
    assert_eq!(d.forget_in_flight_keys(&mut tx).await.unwrap(), 2);
    assert!(
        d.lock_key(&mut tx, &key(tenant, 5, 7))
            .await
            .unwrap()
            .is_some()
    );
    d.commit(tx, &[]).await.expect("commit");

    // Phase 1 over them: fresh, in flight for another owner until the lock runs out,
    // at once for the same owner, replayed once done, refused with another body.
    let k = key(tenant, 6, 7);
    let other = IdemKey {
        owner: vec![8],
        ..k.clone()
    };
    assert_eq!(
        d.idem_begin(&k, 0, 10, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    assert_eq!(
        d.idem_begin(&other, 5, 10, 1_000).await.unwrap(),
        IdemBegin::InFlight
    );
    assert_eq!(
        d.idem_begin(&k, 5, 10, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    assert_eq!(
        d.idem_begin(&other, 15, 10, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    assert!(matches!(
        d.idem_complete(&k, &response(404)).await,
        Err(StoreError::KeyTakenOver)
    ));
    d.idem_complete(&other, &response(404)).await.unwrap();
    assert_eq!(
        d.idem_begin(&k, 20, 10, 1_000).await.unwrap(),
        IdemBegin::Replay(response(404))
    );
    let changed = IdemKey {
        fingerprint: vec![9],
        ..k.clone()
    };
    assert_eq!(
        d.idem_begin(&changed, 20, 10, 1_000).await.unwrap(),
        IdemBegin::Mismatch
    );
    // Expired: new again, with the new body.
    assert_eq!(
        d.idem_begin(&changed, 1_015, 10, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    // Aborted by its owner only; then fresh again.
    d.idem_abort(&other).await.unwrap();
    let changed_other = IdemKey {
        owner: vec![8],
        ..changed.clone()
    };
    assert_eq!(
        d.idem_begin(&changed_other, 1_016, 10, 1_000)
            .await
            .unwrap(),
        IdemBegin::InFlight
    );
    d.idem_abort(&changed).await.unwrap();
    assert_eq!(
        d.idem_begin(&other, 1_017, 10, 1_000).await.unwrap(),
        IdemBegin::Fresh
    );
    // At start, a backend that one process owns forgets what is in flight.
    let recovered = d.idem_recover().await.unwrap();
    assert_eq!(recovered, u64::from(D::DIALECT.sole_owner()));
    let again = if D::DIALECT.sole_owner() {
        IdemBegin::Fresh
    } else {
        IdemBegin::InFlight
    };
    assert_eq!(d.idem_begin(&k, 1_018, 10, 1_000).await.unwrap(), again);
}
