//! Seed 002: capability discovery where §4.4 puts it (`/v1/capabilities`), JSON for
//! every API path (a JSON client must never get the console's HTML), and the
//! regional boundary header of §9.3 (`X-Region-Constraint: EU`).

use serde_json::json;
use switchboard_tests::sdk::reqwest;
use switchboard_tests::{Options, TestServer, key};

use super::Seed;
use crate::support::{Reply, call};

async fn get(server: &TestServer, path: &str) -> Reply {
    call(reqwest::Client::new().get(format!("{}{path}", server.url))).await
}

#[tokio::test]
async fn capabilities_are_where_the_seed_puts_them_and_no_api_path_gets_the_console() {
    let server = TestServer::start().await;
    for path in ["/v1/capabilities", "/api/v1/capabilities"] {
        let caps = get(&server, path).await;
        assert_eq!(caps.status, 200, "{path}: {}", caps.text());
        assert!(
            caps.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
        assert_eq!(caps.json()["api_version"], "v1", "{path}");
    }
    // Every other API path: a JSON 404, never 200 with the console's page.
    for path in [
        "/v1",
        "/v1/",
        "/v1/no-such-thing",
        "/v1/workspaces/w1/memories",
        "/api",
        "/api/",
        "/api/v2/capabilities",
        "/api/v1/no-such-thing",
        "/oauth/no-such-thing",
        "/.well-known/no-such-thing",
        "/mcp",
        "/mcp/messages",
        "/metrics/extra",
        "/healthz/deep",
        "/readyz/now",
    ] {
        get(&server, path).await.problem(404, "not_found");
    }
    // The console's own routes still serve its page.
    let page = get(&server, "/agents/build-bot").await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    // Every API path answers without its `/api` prefix too, authenticated alike.
    let (agent, _) = server.agent("alpha").await;
    let me = Seed::new(&server.url, &agent.token);
    let page = me.get("/v1/agents/alpha/inbox?after_cursor=0").await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert_eq!(page.json()["next_cursor"], 0);
    // The OpenAPI document lists the seed's paths.
    let doc = get(&server, "/api/v1/openapi.json").await.json();
    assert!(doc["paths"]["/v1/capabilities"]["get"].is_object());
    let event = &doc["components"]["schemas"]["InboxEvent"]["properties"];
    assert!(event["sequence_number"].is_object(), "{event}");
}

#[tokio::test]
async fn a_region_constraint_the_server_does_not_meet_is_refused_before_any_effect() {
    let server = TestServer::with(Options {
        region: Some("EU".into()),
        ..Options::default()
    })
    .await;
    let (agent, _) = server.agent("alpha").await;
    let op = Seed::new(&server.url, &server.operator_token);
    let send = |region: Option<&'static str>| {
        let op = &op;
        async move {
            let headers: Vec<(&str, &str)> = region
                .map(|r| ("X-Region-Constraint", r))
                .into_iter()
                .collect();
            op.post_with(
                "/api/v1/agents/alpha/messages",
                json!({"payload": {"region": region}}),
                Some(&key()),
                &headers,
            )
            .await
        }
    };
    let doc = send(Some("US")).await.problem(421, "region_mismatch");
    assert!(doc["detail"].as_str().unwrap().contains("\"EU\""), "{doc}");
    send(Some("bad region!"))
        .await
        .problem(400, "validation_failed");
    assert_eq!(
        send(Some("eu")).await.status,
        201,
        "names compare without case"
    );
    assert_eq!(
        send(Some("US, EU")).await.status,
        201,
        "any region named will do"
    );
    assert_eq!(send(None).await.status, 201, "no header, no constraint");
    // The refused send left nothing behind.
    let page = Seed::new(&server.url, &agent.token)
        .get("/api/v1/agents/alpha/inbox?after_cursor=0")
        .await
        .json();
    let regions: Vec<_> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["region"].clone())
        .collect();
    assert_eq!(regions, [json!("eu"), json!("US, EU"), json!(null)]);

    // The SDK sends the header when its profile names a region.
    use switchboard_tests::sdk::{Client, Credentials, Token};
    let as_profile = |region: &str| Credentials {
        server: server.url.clone(),
        token: Token::from(agent.token.clone()),
        region: Some(region.to_owned()),
        signing_key: None,
    };
    let eu = as_profile("EU").client().expect("client");
    eu.poll("alpha", 0, None).await.expect("EU is met");
    let us = as_profile("US").client().expect("client");
    let refused = us.poll("alpha", 0, None).await.expect_err("US is not");
    assert_eq!(
        refused.code(),
        Some(switchboard_tests::sdk::proto::ErrorCode::RegionMismatch),
        "{refused}"
    );
    // A server with no region meets no constraint.
    let nowhere = TestServer::start().await;
    let (other, _) = nowhere.agent("alpha").await;
    let client = Client::builder()
        .region_constraint(Some("EU"))
        .build(&nowhere.url, other.token.as_str())
        .expect("client");
    let refused = client.poll("alpha", 0, None).await.expect_err("no region");
    assert_eq!(
        refused.code(),
        Some(switchboard_tests::sdk::proto::ErrorCode::RegionMismatch)
    );
}

/// Seed 002 §11.2's `get_records` loop, as written: `GET …/records`, then again with
/// `params = {"cursor": next_cursor}` until `next_cursor` is empty; every record once.
#[tokio::test]
async fn the_seeds_record_walk_reads_every_record_once() {
    use switchboard_tests::sdk::proto::{AcquireLease, RegisterMemory};
    let server = TestServer::start().await;
    let (agent, client) = server.agent("alpha").await;
    let memory = client
        .register_memory(&RegisterMemory::default())
        .await
        .expect("memory")
        .memory_instance_id;
    let ask = AcquireLease {
        name: "alpha".into(),
        display_name: None,
        memory_instance_id: memory,
        ttl_seconds: 60.0,
        owner_client: None,
        lock_delay_seconds: None,
    };
    let lease = client.acquire_lease(&ask, &key()).await.expect("lease").0;
    for n in 0..25 {
        client
            .put_record(
                memory,
                &format!("k{n:02}"),
                &json!({"n": n}),
                lease.fencing_token,
                switchboard_tests::sdk::Precondition::None,
            )
            .await
            .expect("record");
    }
    let seed = Seed::new(&server.url, &agent.token);
    let (mut seen, mut next_cursor): (Vec<String>, Option<String>) = (Vec::new(), None);
    loop {
        let path = match &next_cursor {
            Some(c) => format!("/v1/memories/{memory}/records?limit=10&cursor={c}"),
            None => format!("/v1/memories/{memory}/records?limit=10"),
        };
        let page = seed.get(&path).await;
        assert_eq!(page.status, 200, "{}", page.text());
        let data = page.json();
        for record in data["records"].as_array().expect("records") {
            seen.push(record["key"].as_str().expect("key").to_owned());
        }
        next_cursor = data["next_cursor"].as_str().map(str::to_owned);
        if next_cursor.as_deref().is_none_or(str::is_empty) {
            break;
        }
    }
    let want: Vec<String> = (0..25).map(|n| format!("k{n:02}")).collect();
    assert_eq!(seen, want);
}
