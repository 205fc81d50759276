//! Signed requests' statements (issue 39): keys bound to a credential (listed
//! newest first, bound once, a revoked one never again), the agents' keys as
//! operators list them (a revoked credential's keys are not), the tenant's policy
//! (default, set, audited), and the replay cache: of many connections inserting
//! one `(keyid, nonce)` at once exactly one wins, and trimming forgets only what
//! expired.

use super::note;
use crate::*;

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("keys", 1).await.unwrap();
    let token = [0x6b; 32];
    let agent = d
        .create_agent(
            tenant,
            "key-holder",
            &token,
            &["agent:{agent_id}:inbox".to_owned()],
            None,
            2,
        )
        .await
        .unwrap();
    let key = |jkt: &'static str, byte: u8, binds_parent| NewRequestKey {
        jkt,
        public_key: Box::leak(Box::new([byte; 32])),
        binds_parent,
    };

    // Bound, then listed newest first; a second binding of the same key is told.
    assert!(d.request_keys(&token).await.unwrap().is_empty());
    assert!(
        d.bind_request_key(tenant, &token, &key("k1", 1, true), Some(&note()), 10)
            .await
            .unwrap()
    );
    assert!(
        d.bind_request_key(tenant, &token, &key("k2", 2, false), None, 20)
            .await
            .unwrap()
    );
    assert!(
        !d.bind_request_key(tenant, &token, &key("k1", 1, true), None, 30)
            .await
            .unwrap()
    );
    let keys = d.request_keys(&token).await.unwrap();
    assert_eq!(
        keys.iter()
            .map(|k| (k.jkt.as_str(), k.binds_parent, k.created_at))
            .collect::<Vec<_>>(),
        [("k2", false, 20), ("k1", true, 10)]
    );
    assert_eq!(keys[1].public_key, vec![1; 32]);
    // Another credential has none of them.
    assert!(d.request_keys(&[0x6c; 32]).await.unwrap().is_empty());

    // Revoked once, in its tenant only; never bound again.
    let other = d.ensure_tenant("keys-other", 1).await.unwrap();
    assert!(
        !d.revoke_request_key(other, &token, "k2", &note(), 40)
            .await
            .unwrap()
    );
    assert!(
        d.revoke_request_key(tenant, &token, "k2", &note(), 40)
            .await
            .unwrap()
    );
    assert!(
        !d.revoke_request_key(tenant, &token, "k2", &note(), 41)
            .await
            .unwrap()
    );
    assert!(
        !d.bind_request_key(tenant, &token, &key("k2", 2, true), None, 50)
            .await
            .unwrap()
    );
    assert_eq!(d.request_keys(&token).await.unwrap().len(), 1);

    // Operators see the live keys of live credentials, by agent.
    let listed = d.agent_keys(tenant).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].agent_id, listed[0].jkt.as_str()),
        (agent.id, "k1")
    );
    assert!(d.agent_keys(other).await.unwrap().is_empty());
    d.revoke_credential(tenant, &token, &note(), 60)
        .await
        .unwrap();
    assert!(d.agent_keys(tenant).await.unwrap().is_empty());

    // The policy: the default, then set (once per tenant).
    assert_eq!(
        d.signature_policy(tenant).await.unwrap(),
        SignaturePolicy::Optional
    );
    d.set_signature_policy(tenant, SignaturePolicy::Required, &note(), 70)
        .await
        .unwrap();
    assert_eq!(
        d.signature_policy(tenant).await.unwrap(),
        SignaturePolicy::Required
    );
    assert_eq!(
        d.signature_policy(other).await.unwrap(),
        SignaturePolicy::Optional
    );

    // The replay cache: many connections, one nonce, one winner.
    let attempts = futures::future::join_all((0..16).map(|_| d.use_nonce("k1", "n-race", 1_000)));
    let won = attempts
        .await
        .into_iter()
        .map(|r| r.expect("use_nonce"))
        .filter(|&new| new)
        .count();
    assert_eq!(won, 1, "exactly one use of a nonce is new");
    assert!(
        d.use_nonce("k2", "n-race", 1_000).await.unwrap(),
        "another keyid's nonce"
    );
    assert!(d.use_nonce("k1", "n-old", 500).await.unwrap());
    // Saved behind (a process that owns its database checks in memory): a nonce
    // saved before is left as it was; the live ones are read back at start.
    d.save_nonces(&[
        UsedNonce {
            keyid: "k3".into(),
            nonce: "n-behind".into(),
            expires_at: 3_000,
        },
        UsedNonce {
            keyid: "k1".into(),
            nonce: "n-race".into(),
            expires_at: 9_999,
        },
    ])
    .await
    .unwrap();
    let mut live = d.live_nonces(950).await.unwrap();
    live.sort_by(|a, b| (&a.keyid, &a.nonce).cmp(&(&b.keyid, &b.nonce)));
    assert_eq!(
        live.iter()
            .map(|n| (n.keyid.as_str(), n.nonce.as_str(), n.expires_at))
            .collect::<Vec<_>>(),
        [
            ("k1", "n-race", 1_000),
            ("k2", "n-race", 1_000),
            ("k3", "n-behind", 3_000)
        ]
    );
    // Trimming forgets the expired, and only them.
    assert_eq!(d.forget_nonces(900).await.unwrap(), 1);
    assert_eq!(d.live_nonces(950).await.unwrap().len(), 3);
    assert!(!d.use_nonce("k1", "n-race", 1_000).await.unwrap());
    assert!(d.use_nonce("k1", "n-old", 2_000).await.unwrap());

    // A pass's worth: 64 + 8 + 3 rows (each statement size), one of them kept before.
    let many: Vec<UsedNonce> = (0..75)
        .map(|i| UsedNonce {
            keyid: "k4".into(),
            nonce: format!("n-{i}"),
            expires_at: 5_000 + i,
        })
        .chain(std::iter::once(UsedNonce {
            keyid: "k1".into(),
            nonce: "n-old".into(),
            expires_at: 9_999,
        }))
        .collect();
    d.save_nonces(&many).await.unwrap();
    let live = d.live_nonces(950).await.unwrap();
    let k4: std::collections::BTreeMap<String, i64> = live
        .iter()
        .filter(|n| n.keyid == "k4")
        .map(|n| (n.nonce.clone(), n.expires_at))
        .collect();
    assert_eq!(k4.len(), 75);
    assert_eq!(k4["n-0"], 5_000);
    assert_eq!(k4["n-74"], 5_074);
    assert!(
        live.iter()
            .any(|n| (n.keyid.as_str(), n.nonce.as_str(), n.expires_at) == ("k1", "n-old", 2_000))
    );
}
