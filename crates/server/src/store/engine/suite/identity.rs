//! Access tokens' statements: signing keys (listed oldest first, deleted one by
//! one) and issued tokens (live only while unexpired and unrevoked with a live
//! parent credential in the same tenant, revoked only within their tenant,
//! forgotten once expired).

use crate::store::*;

fn key(kid: &str, created_at: i64) -> SigningKeyRow {
    SigningKeyRow {
        kid: kid.to_owned(),
        algorithm: "EdDSA".to_owned(),
        public_key: vec![7; 32],
        // A sealed PKCS#8 Ed25519 key is 24 + 83 + 16 bytes.
        private_key: vec![9; 123],
        sealed_with: "0123456789abcdef".to_owned(),
        created_at,
    }
}

pub(super) async fn check<D: Store>(d: &D) {
    assert!(d.signing_keys().await.unwrap().is_empty());
    let (a, b) = (key("kid-a", 20), key("kid-b", 10));
    d.insert_signing_key(&a).await.unwrap();
    d.insert_signing_key(&b).await.unwrap();
    assert_eq!(d.signing_keys().await.unwrap(), [b.clone(), a.clone()]);
    d.delete_signing_key("kid-b").await.unwrap();
    d.delete_signing_key("kid-none").await.unwrap();
    assert_eq!(d.signing_keys().await.unwrap(), [a]);

    let tenant = d.ensure_tenant("identity", 1).await.unwrap();
    let other = d.ensure_tenant("identity-other", 1).await.unwrap();
    let scopes = vec!["messages:send".to_owned()];
    let agent = d
        .create_agent(tenant, "ida", &[0xa1; 32], &scopes, 1)
        .await
        .unwrap();
    let issue = |jti: &'static str, parent: &'static [u8], tenant, expires_at| NewAccessToken {
        jti,
        tenant,
        parent_hash: parent,
        issued_at: 100,
        expires_at,
    };
    d.insert_access_token(&issue("t1", &[0xa1; 32], tenant, 1_000))
        .await
        .unwrap();
    d.insert_access_token(&issue("t2", &[0xa1; 32], tenant, 1_000))
        .await
        .unwrap();
    d.insert_access_token(&issue("t3", &[0xa1; 32], tenant, 500))
        .await
        .unwrap();
    // Recorded under another tenant than its parent's: never live.
    d.insert_access_token(&issue("t4", &[0xa1; 32], other, 1_000))
        .await
        .unwrap();

    let live = d
        .access_token("t1", 999)
        .await
        .unwrap()
        .expect("t1 is live");
    assert_eq!(live.parent_hash, vec![0xa1; 32]);
    assert_eq!(live.record.tenant_id, tenant);
    assert_eq!(live.record.agent_id, Some(agent.id));
    assert_eq!(live.record.agent_name.as_deref(), Some("ida"));
    assert!(
        d.access_token("t1", 1_000).await.unwrap().is_none(),
        "expired"
    );
    assert!(
        d.access_token("t4", 999).await.unwrap().is_none(),
        "tenant mismatch"
    );
    assert!(d.access_token("nope", 999).await.unwrap().is_none());

    // Revoked within its own tenant only, once.
    assert!(!d.revoke_access_token(other, "t1", 200).await.unwrap());
    assert!(d.access_token("t1", 300).await.unwrap().is_some());
    assert!(d.revoke_access_token(tenant, "t1", 200).await.unwrap());
    assert!(!d.revoke_access_token(tenant, "t1", 201).await.unwrap());
    assert!(d.access_token("t1", 300).await.unwrap().is_none());

    // Revoking the parent credential ends every token issued from it.
    assert!(d.access_token("t2", 300).await.unwrap().is_some());
    assert_eq!(
        d.revoke_agent_credentials(tenant, agent.id, 300)
            .await
            .unwrap(),
        1
    );
    assert!(d.access_token("t2", 301).await.unwrap().is_none());

    // Only the expired are forgotten.
    assert_eq!(d.forget_access_tokens(600).await.unwrap(), 1, "t3");
    assert_eq!(d.forget_access_tokens(2_000).await.unwrap(), 3);
}
