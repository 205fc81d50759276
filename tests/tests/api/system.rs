//! Health, readiness, capabilities, the OpenAPI document, Prometheus metrics and
//! request ids. (Log output is not observable from here and is not tested.)

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::proto::{ClaimRequest, ClaimToken};
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::{Options, TestServer};

use crate::support::{call, send};

#[tokio::test]
async fn health_and_readiness() {
    let server = TestServer::start().await;
    let op = server.operator();
    op.healthz().await.expect("healthz");
    op.readyz().await.expect("readyz");
    let http = reqwest::Client::new();
    for path in ["/healthz", "/readyz"] {
        let reply = call(http.get(format!("{}{path}", server.url))).await;
        assert_eq!(reply.status, 200, "{path} needs no token: {}", reply.text());
    }
}

#[tokio::test]
async fn capabilities_publish_the_enforced_limits() {
    let server = TestServer::start().await;
    let reply =
        call(reqwest::Client::new().get(format!("{}/api/v1/capabilities", server.url))).await;
    assert_eq!(reply.status, 200, "capabilities are public");
    let caps = server.operator().capabilities().await.unwrap();
    assert_eq!(
        (caps.api_version.as_str(), caps.backend.as_str()),
        ("v1", switchboard_tests::backend())
    );
    let l = caps.limits;
    assert_eq!(l.max_body_bytes, 5_242_880);
    assert_eq!((l.max_page_size, l.default_page_size), (1000, 100));
    assert_eq!(l.max_claim_batch, 100);
    assert_eq!(
        (
            l.min_lease_seconds,
            l.max_lease_seconds,
            l.default_lease_seconds
        ),
        (1, 43_200, 60)
    );
    assert_eq!(l.max_delay_seconds, 43_200);
    assert_eq!((l.max_attempts_limit, l.default_max_attempts), (100, 5));
    assert!(
        l.idempotency_ttl_seconds >= 24 * 3600,
        "I8: keys are kept at least 24 h"
    );
    assert_eq!(l.heartbeat_seconds, 30);
    let w = &l.webhooks;
    assert_eq!(
        (w.challenge_timeout_seconds, w.delivery_timeout_seconds),
        (10, 15)
    );
    assert_eq!(
        w.retry_schedule_seconds,
        [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000],
        "Svix's schedule"
    );
    assert_eq!(w.disable_after_seconds, 5 * 86_400);

    let small = TestServer::with(Options {
        max_body_bytes: Some(1234),
        ..Options::default()
    })
    .await;
    let caps = small.operator().capabilities().await.unwrap();
    assert_eq!(
        caps.limits.max_body_bytes, 1234,
        "the published limit is the configured one"
    );
}

#[tokio::test]
async fn the_openapi_document_describes_the_api() {
    let server = TestServer::start().await;
    let reply =
        call(reqwest::Client::new().get(format!("{}/api/v1/openapi.json", server.url))).await;
    assert_eq!(reply.status, 200);
    let doc = reply.json();
    let version = doc["openapi"].as_str().unwrap_or("");
    assert!(version.starts_with("3."), "OpenAPI 3.x, got {version:?}");
    for (path, method) in [
        ("/api/v1/agents/{agent}/messages", "post"),
        ("/api/v1/rooms/{room}/messages", "post"),
        ("/api/v1/agents/{agent}/inbox", "get"),
        ("/api/v1/agents/{agent}/inbox/claim", "post"),
        ("/api/v1/agents/{agent}/inbox/{event_id}/ack", "post"),
        ("/api/v1/agents/{agent}/inbox/{event_id}/release", "post"),
        ("/api/v1/ops/bulk/{action}", "post"),
        ("/api/v1/ops/events", "get"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} is documented"
        );
    }
}

/// What schemathesis found wrong in the document (issue 17): query parameters listed
/// as path parameters, error bodies as `application/json` when the server sends
/// `application/problem+json`, and the errors every route shares left out.
#[tokio::test]
async fn the_openapi_document_says_how_errors_and_query_parameters_are_sent() {
    let server = TestServer::start().await;
    let reply =
        call(reqwest::Client::new().get(format!("{}/api/v1/openapi.json", server.url))).await;
    assert_eq!(reply.status, 200);
    let doc = reply.json();
    let paths = doc["paths"].as_object().expect("paths");

    // Query parameters are in the query, optional, with their bounds.
    let params = |path: &str| doc["paths"][path]["get"]["parameters"].clone();
    for (path, query) in [
        (
            "/api/v1/agents/{agent}/inbox",
            &["after_cursor", "limit"][..],
        ),
        (
            "/api/v1/ops/events",
            &["agent", "status", "after", "limit"][..],
        ),
        ("/api/v1/ops/audit", &["limit"][..]),
    ] {
        let params = params(path);
        for name in query {
            let p = params
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == *name))
                .unwrap_or_else(|| panic!("{path} documents {name}: {params}"));
            assert_eq!(p["in"], "query", "{path} {name}: {p}");
            assert_ne!(p["required"], true, "{path} {name} is optional: {p}");
            if *name == "limit" {
                assert_eq!(p["schema"]["minimum"], 1, "{path}: {p}");
                assert_eq!(p["schema"]["maximum"], 1000, "{path}: {p}");
            }
        }
    }

    // Every error is a problem document, and every operation but the open ones
    // lists 401 and 403 and takes the bearer token.
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let mut operations = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().expect("path item") {
            let Some(responses) = op["responses"].as_object() else {
                continue;
            };
            operations += 1;
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let content = response["content"].as_object().expect("content");
                    assert_eq!(
                        content.keys().collect::<Vec<_>>(),
                        ["application/problem+json"],
                        "{method} {path} {status}: {response}"
                    );
                }
            }
            let open = matches!(
                (method.as_str(), path.as_str()),
                ("get", "/api/v1/capabilities") | ("post" | "delete", "/api/v1/session")
            );
            if !open {
                for status in ["401", "403"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path} lists {status}"
                    );
                }
                assert_eq!(op["security"], json!([{"bearer": []}]), "{method} {path}");
            }
            if op["requestBody"].is_object() {
                for status in ["400", "413", "415", "422"] {
                    assert!(
                        responses.contains_key(status),
                        "{method} {path} has a body and lists {status}"
                    );
                }
            }
            if path.contains('{') {
                assert!(responses.contains_key("404"), "{method} {path} lists 404");
            }
        }
    }
    assert!(operations > 50, "{operations} operations");

    // The bounds the server enforces on body fields.
    let schemas = &doc["components"]["schemas"];
    for (schema, field, min, max) in [
        ("ClaimRequest", "limit", json!(1), json!(100)),
        ("ClaimRequest", "lease_seconds", json!(1), json!(43200)),
        ("ExtendRequest", "lease_seconds", json!(1), json!(43200)),
        ("SendMessage", "priority", json!(-1000), json!(1000)),
        ("SendMessage", "max_attempts", json!(1), json!(100)),
        ("StartJob", "rate_per_second", json!(1), json!(10000)),
        ("AcquireLease", "ttl_seconds", json!(0.1), json!(300)),
    ] {
        let p = &schemas[schema]["properties"][field];
        assert_eq!(
            (&p["minimum"], &p["maximum"]),
            (&min, &max),
            "{schema}.{field}: {p}"
        );
    }
    assert_eq!(schemas["AckBatch"]["properties"]["acks"]["maxItems"], 100);

    // A body whose fields are all optional may be left out (no body reads as `{}`).
    let body = |path: &str| doc["paths"][path]["post"]["requestBody"]["required"].clone();
    assert_eq!(body("/api/v1/agents/{agent}/inbox/claim"), false);
    assert_eq!(body("/api/v1/memories"), false);
    assert_eq!(body("/api/v1/agents/{agent}/messages"), true);
    server
        .operator()
        .create_agent(&switchboard_tests::sdk::proto::CreateAgent {
            name: "no-body".into(),
        })
        .await
        .expect("agent");
    let claimed = call(
        reqwest::Client::new()
            .post(format!("{}/api/v1/agents/no-body/inbox/claim", server.url))
            .bearer_auth(&server.operator_token),
    )
    .await;
    assert_eq!(claimed.status, 200, "no body reads as {{}}: {claimed:?}");
    assert_eq!(claimed.json()["events"], json!([]));
}

/// The sum of every series of `name` in a text exposition (one tenant's, in these
/// tests).
fn sample(text: &str, name: &str) -> Option<f64> {
    switchboard_tests::exposition::sum(text, name)
}

/// One `inbox_depth` series: (tenant, agent, status, value).
fn depth_series(text: &str) -> Vec<(String, String, String, f64)> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("inbox_depth{")?;
            let (labels, value) = rest.split_once("} ")?;
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches('"').to_owned())
                    .unwrap_or_else(|| panic!("inbox_depth without {name}: {l}"))
            };
            Some((
                label("tenant"),
                label("agent"),
                label("status"),
                value.trim().parse().expect("numeric sample"),
            ))
        })
        .collect()
}

/// The depth of `agent` in `status`, in a text exposition.
fn depth_of(text: &str, agent: &str, status: &str) -> Option<f64> {
    depth_series(text)
        .into_iter()
        .find(|(_, a, s, _)| a == agent && s == status)
        .map(|(_, _, _, v)| v)
}

async fn metrics(server: &TestServer) -> String {
    server.operator().metrics_text().await.expect("metrics")
}

#[tokio::test]
async fn metrics_track_depth_latency_leases_and_fencing() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    for n in 0..3 {
        send(&op, "alice", json!(n)).await;
    }
    let claimed = alice
        .claim("alice", &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    let text = metrics(&server).await;
    assert_eq!(depth_of(&text, "alice", "pending"), Some(2.0), "{text}");
    assert_eq!(depth_of(&text, "alice", "claimed"), Some(1.0));
    assert_eq!(depth_of(&text, "alice", "completed"), Some(0.0));
    assert_eq!(sample(&text, "delivery_latency_seconds_count"), Some(0.0));
    assert_eq!(sample(&text, "lease_expirations_total"), Some(0.0));
    assert_eq!(sample(&text, "stale_claim_rejections_total"), Some(0.0));

    server.advance(Duration::from_secs(2));
    alice
        .ack("alice", claimed.event.event_id, claimed.claim_token)
        .await
        .unwrap();
    let text = metrics(&server).await;
    assert_eq!(
        sample(&text, "delivery_latency_seconds_count"),
        Some(1.0),
        "{text}"
    );
    let sum = sample(&text, "delivery_latency_seconds_sum").expect("sum");
    assert!(
        (sum - 2.0).abs() < 0.01,
        "latency is available→ack on the server clock: {sum}"
    );
    assert_eq!(depth_of(&text, "alice", "completed"), Some(1.0));
    // A repeated ack of the same claim is not a second delivery.
    alice
        .ack("alice", claimed.event.event_id, claimed.claim_token)
        .await
        .unwrap();
    assert_eq!(
        sample(&metrics(&server).await, "delivery_latency_seconds_count"),
        Some(1.0)
    );

    let lease = ClaimRequest {
        limit: Some(1),
        lease_seconds: Some(1),
        attempt_id: None,
    };
    let short = alice.claim("alice", &lease).await.unwrap().events.remove(0);
    let forged = alice
        .ack("alice", short.event.event_id, ClaimToken::new())
        .await
        .unwrap_err();
    assert_eq!(forged.status(), Some(409));
    server.advance(Duration::from_secs(2));
    assert_eq!(server.tick().await.reap.lease_expirations, 1);
    let late = alice
        .ack("alice", short.event.event_id, short.claim_token)
        .await
        .unwrap_err();
    assert_eq!(late.status(), Some(409), "the holder's lease is gone");
    let text = metrics(&server).await;
    assert_eq!(
        sample(&text, "lease_expirations_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "stale_claim_rejections_total"), Some(2.0));
    assert_eq!(
        depth_of(&text, "alice", "pending"),
        Some(2.0),
        "the expired lease is pending again"
    );
}

#[tokio::test]
async fn an_ack_in_the_same_millisecond_is_still_a_delivery() {
    // With a manual clock that does not move, available_at == ack time: latency 0.
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    send(&op, "alice", json!("fast")).await;
    let claimed = alice
        .claim("alice", &ClaimRequest::default())
        .await
        .unwrap()
        .events
        .remove(0);
    alice
        .ack("alice", claimed.event.event_id, claimed.claim_token)
        .await
        .unwrap();
    let text = metrics(&server).await;
    assert_eq!(
        sample(&text, "delivery_latency_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "events_acked_total"), Some(1.0));
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let http = reqwest::Client::new();
    let requests = vec![
        http.get(format!("{}/healthz", server.url)),
        http.get(format!("{}/metrics", server.url)),
        http.get(format!("{}/api/v1/capabilities", server.url)),
        http.get(format!("{}/api/v1/ops/overview", server.url)),
        alice.request(Method::GET, "agents/alice/inbox"),
        alice.request(Method::GET, "nope"),
        alice.request(Method::DELETE, "agents/alice/inbox"),
        alice
            .request(Method::POST, "agents/alice/messages")
            .header("idempotency-key", "k1")
            .json(&json!({"payload": 1})),
        alice
            .request(Method::POST, "agents/alice/messages")
            .json(&json!({"payload": 1})),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for request in requests {
        let reply = call(request).await;
        let id = reply.header("x-request-id").unwrap_or_default().to_owned();
        assert!(!id.is_empty(), "HTTP {} has no x-request-id", reply.status);
        assert!(
            seen.insert(id.clone()),
            "request ids are unique, {id} repeated"
        );
    }
    let stream = alice
        .request(Method::GET, "agents/alice/subscribe")
        .send()
        .await
        .unwrap();
    assert!(
        stream.headers().contains_key("x-request-id"),
        "SSE responses too"
    );
    drop(stream);

    let mine = call(
        alice
            .request(Method::GET, "agents/alice/snapshot")
            .header("x-request-id", "trace-42"),
    )
    .await;
    assert_eq!(
        mine.header("x-request-id"),
        Some("trace-42"),
        "a caller's id is kept"
    );
    let _: Value = mine.json();
}

/// PostgreSQL adds the queue table's health to `/metrics` and to the operator's
/// overview (the console's "Queue table" tiles); SQLite has no such thing and shows
/// none of it.
#[tokio::test]
async fn metrics_and_overview_show_the_queue_tables_health_on_postgres() {
    let server = TestServer::start().await;
    let (_, alice) = server.agent("alice").await;
    let op = server.operator();
    for _ in 0..3 {
        send(&op, "alice", json!({ "x": 1 })).await;
    }
    let claimed = alice
        .claim(
            "alice",
            &ClaimRequest {
                limit: Some(3),
                lease_seconds: Some(30),
                attempt_id: None,
            },
        )
        .await
        .expect("claim");
    assert_eq!(claimed.events.len(), 3);
    let text = metrics(&server).await;
    let gauges = [
        "events_dead_tuples",
        "events_live_tuples",
        "events_vacuum_age_seconds",
        "oldest_transaction_age_seconds",
    ];
    if switchboard_tests::backend() == "postgres" {
        for g in gauges {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{g} ")))
                .unwrap_or_else(|| panic!("{g} in /metrics:\n{text}"));
            let value: f64 = line[g.len() + 1..].trim().parse().expect("a number");
            assert!(value >= 0.0 || value.is_nan(), "{line}");
        }
        assert_eq!(text.matches("# EOF").count(), 1, "one exposition");
        assert!(text.trim_end().ends_with("# EOF"));
        // The statistics collector reports with a delay of up to a second or so.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let health = loop {
            let overview = op.overview().await.expect("overview");
            let health = overview
                .queue_table
                .expect("the overview has the queue table");
            if health.live_tuples >= 3 || std::time::Instant::now() > deadline {
                break health;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            health.live_tuples >= 3,
            "three events are stored: {health:?}"
        );
        assert!(
            (0.0..60.0).contains(&health.oldest_transaction_age_seconds),
            "no transaction stays open here: {health:?}"
        );
    } else {
        for g in gauges {
            assert!(!text.contains(g), "{g} is PostgreSQL's");
        }
        let overview = op.overview().await.expect("overview");
        assert_eq!(
            overview.queue_table, None,
            "SQLite has no queue table health"
        );
    }
}

/// I9 for `/metrics`: the depth series name agents, so nobody without a token may
/// scrape, an agent token may not either, and a scrape shows only the scraping token's
/// tenant. `/healthz` and `/readyz` stay open.
#[tokio::test]
async fn metrics_need_a_metrics_token_and_show_only_its_tenant() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (alice, _) = server.agent("alice").await;
    send(&op, "alice", json!(1)).await;
    let (_, op_b) = server.tenant("tenant-b").await;
    op_b.create_agent(&switchboard_tests::sdk::proto::CreateAgent {
        name: "secret-agent-of-b".to_owned(),
    })
    .await
    .expect("tenant B creates its agent");
    send(&op_b, "secret-agent-of-b", json!(2)).await;

    let http = reqwest::Client::new();
    let anonymous = call(http.get(format!("{}/metrics", server.url))).await;
    anonymous.problem(401, "unauthorized");
    let as_agent = call(
        http.get(format!("{}/metrics", server.url))
            .bearer_auth(alice.token.as_str()),
    )
    .await;
    let problem = as_agent.problem(403, "forbidden");
    assert!(
        problem["detail"]
            .as_str()
            .is_some_and(|d| d.contains("metrics:read") && d.contains("/api/v1/ops/tokens")),
        "the refusal says how to get a token: {problem}"
    );

    // The test server's own token is the deployment admin's: a token of tenant A
    // without `admin` scrapes as A's Prometheus would.
    let minted = call(
        op.request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": ["metrics:read"], "label": "prometheus-a"})),
    )
    .await;
    assert_eq!(minted.status, 201, "{}", minted.text());
    let scraper_a = switchboard_tests::sdk::Client::new(
        &server.url,
        minted.json()["token"].as_str().expect("token"),
    )
    .expect("client");
    let a_text = scraper_a.metrics_text().await.expect("tenant A scrapes");
    let b_text = op_b.metrics_text().await.expect("tenant B scrapes");
    let admin_text = metrics(&server).await;
    let agents = |text: &str| {
        let mut v: Vec<(String, String)> = depth_series(text)
            .into_iter()
            .map(|(t, a, _, _)| (t, a))
            .collect();
        v.dedup();
        v
    };
    let (a_agents, b_agents) = (agents(&a_text), agents(&b_text));
    assert_eq!(
        a_agents.iter().map(|(_, a)| a.as_str()).collect::<Vec<_>>(),
        ["alice"],
        "{a_text}"
    );
    assert_eq!(
        b_agents.iter().map(|(_, a)| a.as_str()).collect::<Vec<_>>(),
        ["secret-agent-of-b"],
        "{b_text}"
    );
    assert_ne!(a_agents[0].0, b_agents[0].0, "each series names its tenant");
    assert!(!a_text.contains("secret-agent-of-b") && !b_text.contains("alice"));
    assert_eq!(depth_of(&b_text, "secret-agent-of-b", "pending"), Some(1.0));
    // Every series of a tenant's scrape is its own; the process's are the admin's.
    use switchboard_tests::exposition::tenants;
    for (text, tenant) in [(&a_text, &a_agents[0].0), (&b_text, &b_agents[0].0)] {
        for name in [
            "events_acked_total",
            "sse_subscribers",
            "rate_limited_total",
        ] {
            assert_eq!(
                &tenants(text, name),
                std::slice::from_ref(tenant),
                "{name}: {text}"
            );
        }
        for admin_only in [
            "retention_held_back",
            "background_task_failures",
            "transaction_retries",
        ] {
            assert!(
                !text.contains(admin_only),
                "{admin_only} in a tenant's scrape: {text}"
            );
        }
    }
    let mut both = vec![a_agents[0].0.clone(), b_agents[0].0.clone()];
    both.sort();
    assert_eq!(
        tenants(&admin_text, "inbox_depth"),
        both,
        "the admin sees every tenant: {admin_text}"
    );
    assert!(tenants(&admin_text, "events_acked_total").len() >= 2);
    assert!(
        admin_text.contains("# TYPE retention_held_back gauge"),
        "{admin_text}"
    );
}

/// A metrics-only token for Prometheus: minted by an operator, shown once, good for
/// `/metrics` and for nothing else.
#[tokio::test]
async fn a_minted_metrics_token_scrapes_and_does_nothing_else() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    send(&op, "alice", json!(1)).await;

    let minted = call(
        op.request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": ["metrics:read"], "label": "prometheus"})),
    )
    .await;
    assert_eq!(minted.status, 201, "{}", minted.text());
    let minted: Value = serde_json::from_slice(&minted.body).expect("json");
    assert_eq!(minted["scopes"], json!(["metrics:read"]));
    assert_eq!(minted["label"], "prometheus");
    let token = minted["token"].as_str().expect("token").to_owned();

    let reply = call(
        reqwest::Client::new()
            .get(format!("{}/metrics", server.url))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(depth_of(&reply.text(), "alice", "pending"), Some(1.0));

    let scraper = switchboard_tests::sdk::Client::new(&server.url, token.as_str()).expect("client");
    for (method, path) in [
        (Method::GET, "ops/agents"),
        (Method::GET, "ops/overview"),
        (Method::GET, "agents/alice/inbox"),
        (Method::GET, "rooms/anything"),
        (Method::GET, "session"),
    ] {
        call(scraper.request(method.clone(), path))
            .await
            .problem(403, "forbidden");
    }
    call(
        scraper
            .request(Method::POST, "agents/alice/messages")
            .header("idempotency-key", "k")
            .json(&json!({"payload": 1})),
    )
    .await
    .problem(403, "forbidden");
    call(
        scraper
            .request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": ["metrics:read"], "label": "again"})),
    )
    .await
    .problem(403, "forbidden");

    // Only read-only machine scopes can be minted, by operators only.
    for body in [
        json!({"scopes": ["ops:write"], "label": "x"}),
        json!({"scopes": [], "label": "x"}),
        json!({"scopes": ["metrics:read"], "label": ""}),
    ] {
        call(op.request(Method::POST, "ops/tokens").json(&body))
            .await
            .problem(400, "validation_failed");
    }
    call(
        alice
            .request(Method::POST, "ops/tokens")
            .json(&json!({"scopes": ["metrics:read"], "label": "mine"})),
    )
    .await
    .problem(403, "forbidden");
    assert!(
        !server
            .stored_bytes()
            .await
            .windows(token.len())
            .any(|w| w == token.as_bytes()),
        "only the token's hash is stored (I11)"
    );
}

/// I9 for the numbers: the overview's counters and latency, the history's samples
/// and a tenant's scrape count only the tenant's own activity. Tenant A acks, lets
/// a lease expire and presents a stale claim token; tenant B's operator sees none
/// of it, and A's sees all of it.
#[tokio::test]
async fn a_tenants_counters_latency_and_history_are_its_own() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    let (_, op_b) = server.tenant("quiet-b").await;
    for n in 0..2 {
        send(&op, "alice", json!(n)).await;
    }
    let short = ClaimRequest {
        limit: Some(1),
        lease_seconds: Some(1),
        attempt_id: None,
    };
    let first = alice.claim("alice", &short).await.unwrap().events.remove(0);
    server.advance(Duration::from_secs(2));
    assert_eq!(server.tick().await.reap.lease_expirations, 1);
    let again = alice.claim("alice", &short).await.unwrap().events.remove(0);
    alice
        .ack("alice", again.event.event_id, again.claim_token)
        .await
        .unwrap();
    let stale = alice
        .ack("alice", first.event.event_id, first.claim_token)
        .await
        .unwrap_err();
    assert_eq!(stale.status(), Some(409));
    server.advance(Duration::from_secs(10));
    server.tick().await;

    let mine = op.overview().await.unwrap().counters.expect("counters");
    assert_eq!(
        (
            mine.delivered_total,
            mine.lease_expirations_total,
            mine.stale_claim_rejections_total
        ),
        (1, 1, 1),
        "{mine:?}"
    );
    assert!(mine.delivery_latency_p50_seconds.is_some());
    let theirs = op_b.overview().await.unwrap().counters.expect("counters");
    assert_eq!(
        (
            theirs.delivered_total,
            theirs.lease_expirations_total,
            theirs.stale_claim_rejections_total,
            theirs.quarantined_total,
            theirs.delivery_latency_p50_seconds,
        ),
        (0, 0, 0, 0, None),
        "B's overview counts nothing of A's: {theirs:?}"
    );
    let rates = theirs.per_minute.expect("rates");
    assert_eq!(
        (
            rates.delivered_per_minute,
            rates.lease_expirations_per_minute
        ),
        (0.0, 0.0)
    );
    let history = op_b.history().await.unwrap();
    assert!(!history.samples.is_empty());
    assert!(
        history
            .samples
            .iter()
            .all(|s| s.delivered_total == 0 && s.lease_expirations_total == 0),
        "B's history counts nothing of A's: {:?}",
        history.samples
    );
    assert!(history.latency.iter().all(|b| b.count == 0));
    let a_history = op.history().await.unwrap();
    assert_eq!(a_history.samples.last().map(|s| s.delivered_total), Some(1));
    let b_text = op_b.metrics_text().await.unwrap();
    for name in [
        "events_acked_total",
        "lease_expirations_total",
        "stale_claim_rejections_total",
        "delivery_latency_seconds_count",
    ] {
        assert_eq!(
            sample(&b_text, name),
            Some(0.0),
            "{name} in B's scrape: {b_text}"
        );
    }
}

/// The tasks that failed in a worker pass.
fn failed(report: &switchboard_tests::server::TickReport) -> Vec<&'static str> {
    report.failures.iter().map(|(task, _)| *task).collect()
}

/// One failing background task is logged, counted in the admin's metrics and run
/// again at the next pass, and never keeps the pass's other tasks from running: here
/// retention fails (a hook, as a database error would) while the scavenger, the
/// history and the maintenance tasks still run.
#[tokio::test]
async fn a_failing_background_task_does_not_stop_the_others() {
    let failing = std::sync::Arc::new(std::sync::Mutex::new(Some("retention")));
    let hook = failing.clone();
    let server = TestServer::with(Options {
        manual_clock: true,
        retention: Some(Duration::ZERO),
        hooks: switchboard_tests::server::Hooks {
            before_background_task: Some(std::sync::Arc::new(move |task| {
                match *hook.lock().unwrap() == Some(task) {
                    true => Err(format!("{task} failed (injected)")),
                    false => Ok(()),
                }
            })),
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    for n in 0..2 {
        send(&op, "alice", json!(n)).await;
    }
    let short = ClaimRequest {
        limit: Some(2),
        lease_seconds: Some(1),
        attempt_id: None,
    };
    let claimed = alice.claim("alice", &short).await.unwrap().events;
    alice
        .ack("alice", claimed[0].event.event_id, claimed[0].claim_token)
        .await
        .unwrap();
    // Past the lease and a sample interval (the server's first pass took one).
    server.advance(Duration::from_secs(6));

    let failures = |text: &str| {
        switchboard_tests::exposition::labelled(
            text,
            "background_task_failures_total",
            &[("task", "retention")],
        )
        .unwrap_or(0.0)
    };
    let before = failures(&metrics(&server).await);
    let report = server.tick_report().await;
    assert_eq!(failed(&report), ["retention"], "{report:?}");
    assert_eq!(report.reap.lease_expirations, 1, "the scavenger ran first");
    assert_eq!(report.retention.events_removed, 0);
    assert_eq!(
        op.history().await.unwrap().samples.last().map(|s| s.at),
        Some(server.now()),
        "the history's sample after it was taken, in this pass"
    );
    let text = metrics(&server).await;
    assert_eq!(failures(&text), before + 1.0, "counted: {text}");

    // Mended: the next pass runs it.
    *failing.lock().unwrap() = None;
    server.advance(Duration::from_secs(1));
    let report = server.tick().await;
    assert!(
        report.retention.events_removed >= 1,
        "the acked event goes now: {report:?}"
    );
}

/// Each background task runs in a room of its own, under a supervisor: a room
/// that panics (here the scavenger, from a hook, on its first pass) is counted and
/// started again a second later, and the other rooms never stop meanwhile.
#[tokio::test]
async fn a_panicking_room_is_started_again_and_the_others_keep_running() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let scavenger = std::sync::Arc::new(AtomicUsize::new(0));
    let retention = std::sync::Arc::new(AtomicUsize::new(0));
    let (s, r) = (scavenger.clone(), retention.clone());
    let server = TestServer::with(Options {
        worker_interval: Some(Duration::from_millis(50)),
        hooks: switchboard_tests::server::Hooks {
            before_background_task: Some(std::sync::Arc::new(move |task| {
                match task {
                    "scavenger" if s.fetch_add(1, Ordering::SeqCst) == 0 => {
                        panic!("the scavenger's first pass panics (injected)")
                    }
                    "retention" => {
                        r.fetch_add(1, Ordering::SeqCst);
                    }
                    _ => {}
                }
                Ok(())
            })),
            ..Default::default()
        },
        ..Options::default()
    })
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while scavenger.load(Ordering::SeqCst) < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the scavenger's room was never started again ({} passes)",
            scavenger.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Its restart waited a second; retention ran all along, every 50 ms.
    assert!(
        retention.load(Ordering::SeqCst) >= 10,
        "retention kept running: {} passes",
        retention.load(Ordering::SeqCst)
    );
    let text = metrics(&server).await;
    let failures = switchboard_tests::exposition::labelled(
        &text,
        "background_task_failures_total",
        &[("task", "scavenger")],
    );
    assert_eq!(failures, Some(1.0), "the panic is counted once: {text}");
}

/// The same with a real database failure (SQLite: a table retention's neighbour
/// task trims is gone): the pass's other tasks run, the failure is counted each time.
#[tokio::test]
async fn a_database_failure_of_one_task_leaves_the_others_running() {
    if switchboard_tests::backend() != "sqlite" {
        return;
    }
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let op = server.operator();
    let (_, alice) = server.agent("alice").await;
    send(&op, "alice", json!(1)).await;
    let short = ClaimRequest {
        limit: Some(1),
        lease_seconds: Some(1),
        attempt_id: None,
    };
    alice.claim("alice", &short).await.unwrap();
    {
        let url = format!("sqlite://{}", server.db_path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::query("DROP TABLE callback_attempts")
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
    }
    server.advance(Duration::from_secs(6));
    let before = switchboard_tests::exposition::labelled(
        &metrics(&server).await,
        "background_task_failures_total",
        &[("task", "callback_attempts")],
    )
    .unwrap_or(0.0);
    for pass in 1..=2 {
        let report = server.tick_report().await;
        assert_eq!(failed(&report), ["callback_attempts"], "{report:?}");
        if pass == 1 {
            assert_eq!(report.reap.lease_expirations, 1);
        }
        assert_eq!(
            op.history().await.unwrap().samples.last().map(|s| s.at),
            Some(server.now()),
            "pass {pass} still took its sample"
        );
        assert_eq!(
            switchboard_tests::exposition::labelled(
                &metrics(&server).await,
                "background_task_failures_total",
                &[("task", "callback_attempts")]
            ),
            Some(before + f64::from(pass))
        );
        server.advance(Duration::from_secs(6));
    }
}
