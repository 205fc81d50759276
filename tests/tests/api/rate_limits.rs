//! Rate limits (issue 15) over real HTTP, on the manual clock so buckets refill only
//! when the test moves time: a credential past its burst gets 429 `rate_limited`
//! with `Retry-After` and the IETF `RateLimit` fields while another credential goes
//! on; the bucket is taken before the token is looked up; a tenant's bucket is
//! shared by its credentials.

use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::server::config::RateLimit;
use switchboard_tests::{Options, TestServer};

use crate::support::{Reply, call};

async fn inbox_of(client: &Client, agent: &str) -> Reply {
    call(client.request(Method::GET, &format!("agents/{agent}/inbox"))).await
}

#[tokio::test]
async fn a_credential_past_its_burst_waits_and_others_go_on() {
    let server = TestServer::with(Options {
        manual_clock: true,
        rate_limit: Some(RateLimit {
            per_second: 1.0,
            burst: 5,
        }),
        tenant_rate_limit: Some(RateLimit::OFF),
        ..Options::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;

    for left in (0..5).rev() {
        let reply = inbox_of(&alice, "alice").await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(
            reply.header("ratelimit"),
            Some(format!("\"credential\";r={left}").as_str())
        );
        assert_eq!(
            reply.header("ratelimit-policy"),
            Some("\"credential\";q=5;w=5")
        );
    }
    let refused = inbox_of(&alice, "alice").await;
    let doc = refused.problem(429, "rate_limited");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("retry after 1 s"),
        "{doc}"
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.header("ratelimit"), Some("\"credential\";r=0;t=1"));
    assert!(refused.header("ratelimit-policy").is_some());

    // Another credential has a bucket of its own.
    let reply = inbox_of(&bob, "bob").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("ratelimit"), Some("\"credential\";r=4"));

    // A second later one token has flowed back in.
    server.clock.as_ref().expect("manual clock").advance(1_000);
    assert_eq!(inbox_of(&alice, "alice").await.status, 200);
    inbox_of(&alice, "alice").await.problem(429, "rate_limited");

    // The bucket is taken before the token is looked up: a token that does not
    // exist gets 401 five times, then 429 without a lookup.
    let stranger = Client::new(&server.url, "sb_ag_no-such-token").unwrap();
    for _ in 0..5 {
        inbox_of(&stranger, "alice")
            .await
            .problem(401, "unauthorized");
    }
    inbox_of(&stranger, "alice")
        .await
        .problem(429, "rate_limited");

    // Open endpoints take no token and no bucket.
    let health = call(alice.request(Method::GET, "capabilities")).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.header("ratelimit"), None);

    // Refusals are counted by policy.
    let metrics = server.operator().metrics_text().await.unwrap();
    let refused_line = metrics
        .lines()
        .find(|l| l.starts_with("rate_limited_total{policy=\"credential\"}"))
        .unwrap_or_else(|| panic!("no rate_limited_total in\n{metrics}"));
    assert!(refused_line.ends_with(" 3"), "{refused_line}");
}

#[tokio::test]
async fn a_tenants_bucket_is_shared_by_its_credentials() {
    let server = TestServer::with(Options {
        manual_clock: true,
        rate_limit: Some(RateLimit::OFF),
        tenant_rate_limit: Some(RateLimit {
            per_second: 1.0,
            burst: 6,
        }),
        ..Options::default()
    })
    .await;
    // Two agents made by the operator: two of the tenant's six tokens.
    let (_, alice) = server.agent("alice").await;
    let (_, bob) = server.agent("bob").await;
    for (client, name) in [(&alice, "alice"), (&bob, "bob"), (&alice, "alice")] {
        assert_eq!(inbox_of(client, name).await.status, 200);
    }
    let last = inbox_of(&bob, "bob").await;
    assert_eq!(last.status, 200);
    assert_eq!(last.header("ratelimit"), Some("\"tenant\";r=0"));
    assert_eq!(last.header("ratelimit-policy"), Some("\"tenant\";q=6;w=6"));
    let refused = inbox_of(&alice, "alice").await;
    refused.problem(429, "rate_limited");
    assert_eq!(refused.header("ratelimit"), Some("\"tenant\";r=0;t=1"));
    // The operator's token draws from the same bucket.
    call(server.operator().request(Method::GET, "ops/agents"))
        .await
        .problem(429, "rate_limited");
}
