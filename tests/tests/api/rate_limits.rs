//! Rate limits (issue 15) over real HTTP, on the manual clock so buckets refill only
//! when the test moves time: a credential past its burst gets 429 `rate_limited`
//! with `Retry-After` and the IETF `RateLimit` fields while another credential goes
//! on; the bucket is taken before the token is looked up; a tenant's bucket is
//! shared by its credentials.

use switchboard_tests::sdk::Client;
use switchboard_tests::sdk::reqwest::{self, Method};
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

    // A token that does not exist is answered 401, from the cache of unknown
    // tokens after the first lookup, and draws no bucket of its own (an address's:
    // `unknown_tokens_are_limited_per_address`).
    let stranger = Client::new(&server.url, "sb_ag_no-such-token").unwrap();
    for _ in 0..6 {
        inbox_of(&stranger, "alice")
            .await
            .problem(401, "unauthorized");
    }

    // Open endpoints take no token and no bucket.
    let health = call(alice.request(Method::GET, "capabilities")).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.header("ratelimit"), None);

    // Refusals are counted by policy.
    let metrics = server.operator().metrics_text().await.unwrap();
    // Counted for the tenant of the token whose bucket ran dry (alice's, twice).
    assert_eq!(
        switchboard_tests::exposition::labelled(
            &metrics,
            "rate_limited_total",
            &[("policy", "credential")]
        ),
        Some(2.0),
        "{metrics}"
    );
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

/// Made-up tokens cost no database read past an address's burst, and no bucket
/// each: every lookup the cache cannot answer draws from the client address's
/// bucket first (issue 36). A known token (in the cache) draws none of it, and
/// behind a trusted proxy the address is the one `X-Forwarded-For` names.
#[tokio::test]
async fn unknown_tokens_are_limited_per_address() {
    let server = TestServer::with(Options {
        manual_clock: true,
        address_rate_limit: Some(RateLimit {
            per_second: 1.0,
            burst: 5,
        }),
        ..Options::default()
    })
    .await;
    let (_, alice) = server.agent("alice").await;
    // A full bucket again (the operator's lookup drew from it), then alice's token
    // is looked up once (one of the five) and cached (2 s: the clock stands still).
    server.advance(std::time::Duration::from_secs(10));
    assert_eq!(inbox_of(&alice, "alice").await.status, 200);
    for n in 0..4 {
        let made_up = Client::new(&server.url, format!("sb_ag_made-up-{n}")).unwrap();
        inbox_of(&made_up, "alice")
            .await
            .problem(401, "unauthorized");
    }
    let made_up = Client::new(&server.url, "sb_ag_made-up-x").unwrap();
    let refused = inbox_of(&made_up, "alice").await;
    let doc = refused.problem(429, "rate_limited");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("address"),
        "{doc}"
    );
    assert_eq!(refused.header("retry-after"), Some("1"));
    // The known token goes on: the cache answers, no lookup, no address bucket.
    assert_eq!(inbox_of(&alice, "alice").await.status, 200);
    server.advance(std::time::Duration::from_secs(10));
    let metrics = server.operator().metrics_text().await.unwrap();
    assert_eq!(
        switchboard_tests::exposition::sum(&metrics, "rate_limited_unattributed_total"),
        Some(1.0),
        "an address's refusal is the process's count, no tenant's: {metrics}"
    );
}

/// Behind a trusted proxy, each client the proxy names has its own address bucket;
/// `X-Forwarded-For` from anyone else is not believed.
#[tokio::test]
async fn a_trusted_proxy_names_the_client() {
    let limited = |trusted: Vec<String>| Options {
        manual_clock: true,
        address_rate_limit: Some(RateLimit {
            per_second: 1.0,
            burst: 2,
        }),
        trusted_proxies: trusted,
        ..Options::default()
    };
    let unknown = |server: &TestServer, n: u32, client: &str| {
        reqwest::Client::new()
            .get(format!("{}/api/v1/agents/alice/inbox", server.url))
            .bearer_auth(format!("sb_ag_unknown-{n}"))
            .header("x-forwarded-for", client)
    };
    // Trusted (the test connects from 127.0.0.1): two clients, two buckets.
    let server = TestServer::with(limited(vec!["127.0.0.1/32".into()])).await;
    for n in 0..2 {
        call(unknown(&server, n, "203.0.113.7"))
            .await
            .problem(401, "unauthorized");
    }
    call(unknown(&server, 2, "203.0.113.7"))
        .await
        .problem(429, "rate_limited");
    call(unknown(&server, 3, "198.51.100.9, 203.0.113.8"))
        .await
        .problem(401, "unauthorized");
    // Not trusted: the header is ignored, the peer's one bucket runs dry.
    let server = TestServer::with(limited(Vec::new())).await;
    for n in 0..2 {
        call(unknown(&server, n, &format!("203.0.113.{n}")))
            .await
            .problem(401, "unauthorized");
    }
    call(unknown(&server, 2, "203.0.113.99"))
        .await
        .problem(429, "rate_limited");
}
