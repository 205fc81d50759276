//! Access tokens' statements: signing keys (listed oldest first, deleted one by
//! one) and issued tokens (live only while unexpired and unrevoked with a live
//! parent credential in the same tenant, revoked only within their tenant,
//! forgotten once expired).

use super::note;
use super::note_by;
use crate::*;

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

pub(super) async fn check<D>(d: &Engine<D>)
where
    Engine<D>: Store,
{
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
        .create_agent(tenant, "ida", &[0xa1; 32], &scopes, None, 1)
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
        d.revoke_agent_credentials(tenant, agent.id, &note(), 300)
            .await
            .unwrap(),
        1
    );
    assert!(d.access_token("t2", 301).await.unwrap().is_none());

    // Only the expired are forgotten.
    assert_eq!(d.forget_access_tokens(600).await.unwrap(), 1, "t3");
    assert_eq!(d.forget_access_tokens(2_000).await.unwrap(), 3);

    devices(d, tenant, other).await;
}

/// Device requests and refresh tokens: decided once within their tenant, polled
/// by their client with `slow_down`, their tokens taken once; refresh tokens used
/// once, a reuse revoking the family.
async fn devices<D>(d: &Engine<D>, tenant: TenantId, other: TenantId)
where
    Engine<D>: Store,
{
    let request = |hash: &'static str, code: &'static str, tenant| NewDeviceRequest {
        device_hash: hash,
        user_code: code,
        tenant,
        client_id: "cli",
        agent_name: "dev-agent",
        source: "127.0.0.1",
        user_agent: "suite",
        created_at: 1_000,
        expires_at: 61_000,
        interval_ms: 5_000,
    };
    assert!(
        d.insert_device_request(&request("h1", "BCDF-GHJK", Some(tenant)))
            .await
            .unwrap()
    );
    assert!(
        !d.insert_device_request(&request("h2", "BCDF-GHJK", Some(tenant)))
            .await
            .unwrap(),
        "a user code in use"
    );
    assert!(
        d.insert_device_request(&request("h3", "LMNP-QRST", None))
            .await
            .unwrap()
    );
    let listed = d.device_requests(tenant, 2_000).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (listed[0].status.as_str(), listed[0].agent_id),
        ("pending", None)
    );
    assert!(d.device_requests(other, 2_000).await.unwrap().is_empty());
    assert!(
        d.device_requests(tenant, 61_000).await.unwrap().is_empty(),
        "expired"
    );

    let issue = |refresh: &'static [u8], jti: &'static str| Issue {
        refresh_hash: refresh,
        jti,
        expires_at: 900_000,
        key: None,
    };
    let i1 = issue(&[0xd1; 32], "d1");
    assert!(matches!(
        d.poll_device_request("h1", "other-cli", 2_000, &i1)
            .await
            .unwrap(),
        DevicePoll::Unknown
    ));
    assert!(matches!(
        d.poll_device_request("h1", "cli", 2_000, &i1)
            .await
            .unwrap(),
        DevicePoll::Pending
    ));
    assert!(matches!(
        d.poll_device_request("h1", "cli", 6_000, &i1)
            .await
            .unwrap(),
        DevicePoll::SlowDown
    ));
    // The interval is 10 s from the slowed poll on.
    assert!(matches!(
        d.poll_device_request("h1", "cli", 15_000, &i1)
            .await
            .unwrap(),
        DevicePoll::SlowDown
    ));
    assert!(matches!(
        d.poll_device_request("h1", "cli", 30_000, &i1)
            .await
            .unwrap(),
        DevicePoll::Pending
    ));

    let scopes = vec!["agent:{agent_id}:inbox".to_owned()];
    let approval = Approval {
        agent_name: None,
        family_hash: &[0xc7; 32],
        scopes: &scopes,
        parent: &[0xc8; 32],
    };
    assert!(
        d.decide_device_request(other, "BCDF-GHJK", Some(&approval), &note_by("op"), 31_000)
            .await
            .unwrap()
            .is_none()
    );
    let approved = d
        .decide_device_request(
            tenant,
            "BCDF-GHJK",
            Some(&approval),
            &note_by("operator"),
            31_000,
        )
        .await
        .unwrap()
        .expect("approved");
    assert_eq!(
        (approved.status.as_str(), approved.decided_by.as_deref()),
        ("approved", Some("operator"))
    );
    let agent = approved.agent_id.expect("the agent it made");
    assert!(
        d.decide_device_request(tenant, "BCDF-GHJK", None, &note_by("op"), 31_000)
            .await
            .unwrap()
            .is_none()
    );

    let DevicePoll::Approved(grant) = d
        .poll_device_request("h1", "cli", 45_000, &i1)
        .await
        .unwrap()
    else {
        panic!("approved");
    };
    assert_eq!(grant.parent_hash, vec![0xc7; 32]);
    assert_eq!(grant.record.agent_id, Some(agent));
    assert_eq!(grant.record.scopes, [format!("agent:{agent}:inbox")]);
    assert!(d.access_token("d1", 50_000).await.unwrap().is_some());
    assert!(matches!(
        d.poll_device_request("h1", "cli", 60_000, &i1)
            .await
            .unwrap(),
        DevicePoll::Unknown
    ));
    assert!(matches!(
        d.poll_device_request("h3", "cli", 61_000, &i1)
            .await
            .unwrap(),
        DevicePoll::Expired
    ));

    let i2 = issue(&[0xd2; 32], "d2");
    assert!(matches!(
        d.refresh(&[0xd1; 32], 70_000, RefreshLifetimes::DEFAULT, &i2)
            .await
            .unwrap(),
        Refreshed::Rotated(_)
    ));
    assert!(matches!(
        d.refresh(&[0xee; 32], 70_000, RefreshLifetimes::DEFAULT, &i2)
            .await
            .unwrap(),
        Refreshed::Unknown
    ));
    let i3 = issue(&[0xd3; 32], "d3");
    assert!(matches!(
        d.refresh(&[0xd1; 32], 71_000, RefreshLifetimes::DEFAULT, &i3)
            .await
            .unwrap(),
        Refreshed::Reused
    ));
    assert!(matches!(
        d.refresh(&[0xd2; 32], 72_000, RefreshLifetimes::DEFAULT, &i3)
            .await
            .unwrap(),
        Refreshed::Revoked
    ));
    assert!(
        d.access_token("d2", 72_000).await.unwrap().is_none(),
        "the family is revoked"
    );
    assert!(
        !d.revoke_refresh_family(&[0xd2; 32], 73_000).await.unwrap(),
        "already"
    );
    assert!(!d.revoke_refresh_family(&[0xee; 32], 73_000).await.unwrap());
}
