//! A memory's records listed by pages over real HTTP (issue 38 item 3):
//! `GET /api/v1/memories/{id}/records?cursor=…&limit=…` and the seed's `/v1/…`,
//! `{"records": [...], "next_cursor": "…"}` with an opaque cursor, absent on the last
//! page. No fencing token: the tenant's agents (the holder, whoever held it last)
//! and operators read it; another tenant gets the 404 of a memory that does not
//! exist, a token of neither kind 403. (The walk's exactness under concurrent writes
//! is the driver suite's `record_pages.rs`, on every backend.)

use serde_json::{Value, json};
use switchboard_tests::sdk::proto::{
    AcquireLease, Lease, MemoryId, MemoryRecord, RegisterMemory, ReleaseLease, TokenCreated,
};
use switchboard_tests::sdk::reqwest::{self, Method};
use switchboard_tests::sdk::{Client, Precondition};
use switchboard_tests::{TestServer, key};

use crate::support::{Reply, call};

async fn leased(client: &Client, name: &str) -> (MemoryId, Lease) {
    let m = client
        .register_memory(&RegisterMemory::default())
        .await
        .unwrap()
        .memory_instance_id;
    let ask: AcquireLease = serde_json::from_value(json!({
        "name": name, "memory_instance_id": m, "ttl_seconds": 30, "lock_delay_seconds": 0
    }))
    .unwrap();
    (m, client.acquire_lease(&ask, &key()).await.unwrap().0)
}

/// `GET {path}` from the root with `token`.
async fn get(server: &TestServer, token: &str, path: &str) -> Reply {
    call(
        reqwest::Client::new()
            .get(format!("{}{path}", server.url))
            .bearer_auth(token),
    )
    .await
}

fn keys(records: &[MemoryRecord]) -> Vec<String> {
    records.iter().map(|r| r.key.clone()).collect()
}

#[tokio::test]
async fn records_list_by_pages_in_key_order_with_an_opaque_cursor() {
    let server = TestServer::start().await;
    let (a_info, a) = server.agent("a").await;
    let (m, lease) = leased(&a, "lister").await;
    let t = lease.fencing_token;
    for n in (0..25).rev() {
        let key = format!("k{n:02}");
        a.put_record(m, &key, &json!({"n": n}), t, Precondition::None)
            .await
            .unwrap();
    }
    let all: Vec<String> = (0..25).map(|n| format!("k{n:02}")).collect();

    let first = a.list_records(m, None, Some(10)).await.unwrap();
    assert_eq!(keys(&first.records), all[..10]);
    // Each record as a read of it alone gives it (value, version, token, time).
    assert_eq!(
        first.records[3],
        a.get_record(m, "k03", t).await.unwrap(),
        "a listed record is the record"
    );
    let cursor = first.next_cursor.expect("more pages");
    assert!(
        !cursor.contains("k09"),
        "the cursor is opaque, not the key: {cursor}"
    );
    let second = a.list_records(m, Some(&cursor), Some(10)).await.unwrap();
    assert_eq!(keys(&second.records), all[10..20]);
    let last = a
        .list_records(m, second.next_cursor.as_deref(), Some(10))
        .await
        .unwrap();
    assert_eq!(keys(&last.records), all[20..]);
    assert_eq!(last.next_cursor, None, "the last page has no cursor");
    // A page that ends exactly at the last record says so too (no empty page after).
    let exact = a.list_records(m, Some(&cursor), Some(15)).await.unwrap();
    assert_eq!((exact.records.len(), exact.next_cursor), (15, None));
    // The SDK's walk, with the server's default page.
    assert_eq!(keys(&a.all_records(m, None).await.unwrap()), all);
    assert_eq!(keys(&a.all_records(m, Some(4)).await.unwrap()), all);

    // On the wire: `next_cursor` a string, absent on the last page; the seed's `/v1`
    // path answers the same bytes as `/api/v1`.
    let token = a_info.token;
    let path = format!("/api/v1/memories/{m}/records?limit=20");
    let page = get(&server, &token, &path).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.json()["next_cursor"].is_string(), "{}", page.text());
    let seed = get(&server, &token, &path["/api".len()..]).await;
    assert_eq!((seed.status, seed.json()), (200, page.json()));
    let next = page.json()["next_cursor"].as_str().unwrap().to_owned();
    let rest = get(
        &server,
        &token,
        &format!("/v1/memories/{m}/records?limit=20&cursor={next}"),
    )
    .await;
    assert_eq!(rest.status, 200, "{}", rest.text());
    let body = rest.json();
    assert_eq!(body["records"].as_array().map(Vec::len), Some(5));
    assert!(body.get("next_cursor").is_none(), "absent: {body}");

    // An empty memory: an empty last page.
    let empty = a
        .register_memory(&RegisterMemory::default())
        .await
        .unwrap()
        .memory_instance_id;
    let page = a.list_records(empty, None, None).await.unwrap();
    assert_eq!((page.records.len(), page.next_cursor), (0, None));
}

#[tokio::test]
async fn bad_cursors_and_limits_are_refused_with_how_to_fix() {
    let server = TestServer::start().await;
    let (a_info, a) = server.agent("a").await;
    let (m, lease) = leased(&a, "lister").await;
    a.put_record(m, "k", &json!(1), lease.fencing_token, Precondition::None)
        .await
        .unwrap();
    let token = a_info.token;
    for prefix in ["/api/v1", "/v1"] {
        let base = format!("{prefix}/memories/{m}/records");
        for bad in ["nonsense", "r1.%21%21", "r9.aw", ""] {
            let doc = get(&server, &token, &format!("{base}?cursor={bad}"))
                .await
                .problem(400, "validation_failed");
            let detail = doc["detail"].as_str().unwrap_or_default();
            assert!(detail.contains("next_cursor"), "{prefix} {bad:?}: {doc}");
        }
        for limit in ["0", "1001"] {
            get(&server, &token, &format!("{base}?limit={limit}"))
                .await
                .problem(422, "validation_failed");
        }
        for odd in ["limit=ten", "after=k"] {
            get(&server, &token, &format!("{base}?{odd}"))
                .await
                .problem(400, "validation_failed");
        }
    }
}

#[tokio::test]
async fn records_are_listed_to_the_tenant_and_its_operators_only() {
    let server = TestServer::start().await;
    let (_, a) = server.agent("a").await;
    let (_, b) = server.agent("b").await;
    let op = server.operator();
    let (m, lease) = leased(&a, "lister").await;
    for key in ["x", "y"] {
        a.put_record(m, key, &json!(key), lease.fencing_token, Precondition::None)
            .await
            .unwrap();
    }
    let listed = |c: &Client| {
        let c = c.clone();
        async move { keys(&c.all_records(m, None).await.expect("listed")) }
    };
    // The holder, another agent of the tenant, the operator; no fencing token.
    for who in [&a, &b, &op] {
        assert_eq!(listed(who).await, ["x", "y"]);
    }
    // After the release, whoever held it last reads the baseline on.
    a.release_lease(&ReleaseLease::of(&lease)).await.unwrap();
    assert_eq!(listed(&a).await, ["x", "y"], "the last holder");
    assert_eq!(listed(&b).await, ["x", "y"]);

    // Another tenant, operator or agent: the 404 of a memory that does not exist.
    let (tenant_b, op_b) = server.tenant("team-b").await;
    let carol: Value = call(
        op_b.request(Method::POST, "ops/agents")
            .json(&json!({"name": "carol"})),
    )
    .await
    .json();
    let carol = carol["token"].as_str().expect("token").to_owned();
    let nowhere = MemoryId::new();
    for token in [tenant_b.operator_token, carol] {
        for prefix in ["/api/v1", "/v1"] {
            let real = get(&server, &token, &format!("{prefix}/memories/{m}/records")).await;
            let none = get(
                &server,
                &token,
                &format!("{prefix}/memories/{nowhere}/records"),
            )
            .await;
            let real = real.problem(404, "not_found");
            let none = none.problem(404, "not_found");
            let blank = |doc: &Value, id: &str| doc.to_string().replace(id, "ID");
            assert_eq!(
                blank(&real, &m.to_string()),
                blank(&none, &nowhere.to_string()),
                "another tenant cannot tell the memory exists"
            );
        }
    }

    // A token that is neither an agent's nor an operator's: 403 before any lookup.
    let metrics: TokenCreated = serde_json::from_slice(
        &call(
            op.request(Method::POST, "ops/tokens")
                .json(&json!({"scopes": ["metrics:read"], "label": "scrape"})),
        )
        .await
        .body,
    )
    .expect("token");
    for id in [m, nowhere] {
        get(
            &server,
            &metrics.token,
            &format!("/api/v1/memories/{id}/records"),
        )
        .await
        .problem(403, "forbidden");
    }
}

#[tokio::test]
async fn the_openapi_document_lists_the_listing_at_both_paths() {
    let server = TestServer::start().await;
    let doc = call(reqwest::Client::new().get(format!("{}/api/v1/openapi.json", server.url)))
        .await
        .json();
    for path in [
        "/api/v1/memories/{memory_id}/records",
        "/v1/memories/{memory_id}/records",
    ] {
        let get = &doc["paths"][path]["get"];
        let params: Vec<&str> = get["parameters"]
            .as_array()
            .unwrap_or_else(|| panic!("{path} is documented: {get}"))
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert_eq!(params, ["memory_id", "cursor", "limit"], "{path}");
    }
    let page = &doc["components"]["schemas"]["MemoryRecordPage"]["properties"];
    assert!(
        page["records"].is_object() && page["next_cursor"].is_object(),
        "{page}"
    );
}
