//! Seed 001, "Complete Proposed HTTP API" and "Transaction Algorithms": the lease
//! example exactly as written (`display_name: "My Agent"` → `canonical_name:
//! "myagent"`), the owner's upsert (`… WHERE expires_at < NOW() OR owner_client_id =
//! EXCLUDED.owner_client_id`), 423 with `Retry-After`, and "Create/Register Memory"
//! under the id the client holds.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::{Options, TestServer, key};

use super::Seed;

/// The seed's memory id and lease request, verbatim.
const MEMORY: &str = "018f3b3a-9b5c-7d12-bc01-9a2cfe123456";

fn seed_request() -> Value {
    json!({
        "display_name": "My Agent",
        "memory_instance_id": MEMORY,
        "owner_client_id": "worker-node-alpha-99",
        "ttl_seconds": 30
    })
}

fn retry_after(reply: &crate::support::Reply) -> u64 {
    reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("a 423 carries Retry-After: {}", reply.text()))
        .parse()
        .expect("Retry-After in seconds")
}

#[tokio::test]
async fn the_seeds_lease_example_is_accepted_as_written() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("alpha").await;
    let seed = Seed::new(&server.url, &agent.token);
    // 1. Create/Register Memory: the client's UUIDv7.
    let registered = seed
        .post("/v1/memories", json!({"memory_instance_id": MEMORY}), None)
        .await;
    assert_eq!(registered.status, 201, "{}", registered.text());
    assert_eq!(registered.json()["memory_instance_id"], MEMORY);

    let k = key();
    let lease = seed.post("/v1/leases", seed_request(), Some(&k)).await;
    assert_eq!(lease.status, 201, "{}", lease.text());
    let body = lease.json();
    assert_eq!(body["canonical_name"], "myagent", "{body}");
    assert_eq!(body["display_name"], "My Agent", "kept and shown: {body}");
    for field in ["lease_id", "fencing_token", "expires_at"] {
        assert!(!body[field].is_null(), "{field}: {body}");
    }
    // Cached Retry (200 OK).
    let again = seed.post("/v1/leases", seed_request(), Some(&k)).await;
    assert_eq!((again.status, again.json()), (200, body.clone()));
    // The operators' list (the console's leases page) shows the display name.
    let listed = Seed::new(&server.url, &server.operator_token)
        .get("/api/v1/ops/leases")
        .await
        .json();
    assert_eq!(listed["leases"][0]["display_name"], "My Agent", "{listed}");

    // The rule's edges: `name` wins over `display_name`; what PRECIS refuses stays
    // refused, as name_invalid.
    let mut both = seed_request();
    both["name"] = json!("alpha-main");
    both["memory_instance_id"] =
        seed.post("/v1/memories", json!({}), None).await.json()["memory_instance_id"].clone();
    let named = seed.post("/v1/leases", both, Some(&key())).await;
    assert_eq!(named.status, 201, "{}", named.text());
    assert_eq!(named.json()["canonical_name"], "alpha-main");
    let mut bad = seed_request();
    bad["display_name"] = json!("My Agent!");
    let refused = seed.post("/v1/leases", bad, Some(&key())).await;
    let doc = refused.problem(422, "name_invalid");
    assert!(
        doc["detail"].as_str().unwrap().contains("display_name"),
        "{doc}"
    );
}

#[tokio::test]
async fn the_owner_acquires_its_live_lease_again_and_everyone_else_waits() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (agent, _) = server.agent("alpha").await;
    let (colleague, _) = server.agent("beta").await;
    let (_, other_tenant) = server.tenant("elsewhere").await;
    let stranger = other_tenant
        .create_agent(&switchboard_tests::sdk::proto::CreateAgent {
            name: "gamma".into(),
        })
        .await
        .expect("an agent in another tenant");
    let seed = Seed::new(&server.url, &agent.token);
    assert_eq!(
        seed.post("/v1/memories", json!({"memory_instance_id": MEMORY}), None)
            .await
            .status,
        201
    );
    let first = seed.post("/v1/leases", seed_request(), Some(&key())).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let first = first.json();
    let token = first["fencing_token"].as_u64().unwrap();

    // The same holder, the same owner_client_id, a new key: the lease again, token + 1.
    server.advance(Duration::from_secs(5));
    let again = seed.post("/v1/leases", seed_request(), Some(&key())).await;
    assert_eq!(again.status, 201, "{}", again.text());
    let again = again.json();
    assert_eq!(again["fencing_token"], token + 1, "{again}");
    assert_ne!(
        again["lease_id"], first["lease_id"],
        "a new grant, a new lease id"
    );
    // The old token is stale from now on.
    let renew = |token: u64| {
        json!({"canonical_name": "myagent", "memory_instance_id": MEMORY,
               "fencing_token": token, "owner_client_id": "worker-node-alpha-99",
               "ttl_seconds": 30})
    };
    seed.post("/v1/leases/renew", renew(token), None)
        .await
        .problem(409, "stale_fence");
    let renewed = seed.post("/v1/leases/renew", renew(token + 1), None).await;
    assert_eq!(renewed.status, 200, "{}", renewed.text());

    // Anyone else gets 423 with Retry-After: exact within the tenant…
    server.advance(Duration::from_secs(10));
    let mut other_owner = seed_request();
    other_owner["owner_client_id"] = json!("worker-node-beta-7");
    let held = seed.post("/v1/leases", other_owner, Some(&key())).await;
    held.problem(423, "lease_held");
    assert_eq!(
        retry_after(&held),
        20,
        "30 s renewed 10 s ago: {}",
        held.text()
    );
    let mut by_colleague = seed_request();
    by_colleague["memory_instance_id"] = Seed::new(&server.url, &colleague.token)
        .post("/v1/memories", json!({}), None)
        .await
        .json()["memory_instance_id"]
        .clone();
    let held = Seed::new(&server.url, &colleague.token)
        .post("/v1/leases", by_colleague, Some(&key()))
        .await;
    held.problem(423, "lease_held");
    assert_eq!(retry_after(&held), 20);

    // …and coarse from another tenant: the maximum TTL, nothing of the lease's own.
    let theirs = Seed::new(&server.url, &stranger.token);
    let mut by_stranger = seed_request();
    by_stranger["memory_instance_id"] =
        theirs.post("/v1/memories", json!({}), None).await.json()["memory_instance_id"].clone();
    let held = theirs
        .post("/v1/leases", by_stranger.clone(), Some(&key()))
        .await;
    let doc = held.problem(423, "lease_held");
    assert_eq!(retry_after(&held), 300, "{}", held.text());
    assert!(
        !doc["detail"].as_str().unwrap().contains(" s more"),
        "no timing of another tenant's lease: {doc}"
    );
    server.advance(Duration::from_secs(15));
    let later = theirs.post("/v1/leases", by_stranger, Some(&key())).await;
    later.problem(423, "lease_held");
    assert_eq!(
        retry_after(&later),
        300,
        "the same whatever the lease's time left"
    );
}

#[tokio::test]
async fn a_memory_is_registered_under_the_clients_uuidv7() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("alpha").await;
    let seed = Seed::new(&server.url, &agent.token);
    let made = seed
        .post(
            "/v1/memories",
            json!({"memory_instance_id": MEMORY, "label": "main"}),
            None,
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text());
    // A retry in the same tenant: 200, the same memory.
    let retry = seed
        .post(
            "/v1/memories",
            json!({"memory_instance_id": MEMORY, "label": "main"}),
            None,
        )
        .await;
    assert_eq!((retry.status, retry.json()), (200, made.json()));
    // Not a UUIDv7: refused with what to do.
    let v4 = "9b2f3a1e-4c5d-4e6f-8a7b-1c2d3e4f5a6b";
    let doc = seed
        .post("/v1/memories", json!({"memory_instance_id": v4}), None)
        .await
        .problem(422, "validation_failed");
    assert!(doc["detail"].as_str().unwrap().contains("UUIDv7"), "{doc}");
    // Held elsewhere: the same problem whichever tenant asks.
    let mut problems = Vec::new();
    for tenant in ["t-one", "t-two"] {
        let (_, op) = server.tenant(tenant).await;
        let created = op
            .create_agent(&switchboard_tests::sdk::proto::CreateAgent {
                name: "alpha".into(),
            })
            .await
            .expect("agent");
        let theirs = Seed::new(&server.url, &created.token);
        let mut doc = theirs
            .post("/v1/memories", json!({"memory_instance_id": MEMORY}), None)
            .await
            .problem(409, "conflict");
        doc.as_object_mut().unwrap().remove("instance");
        problems.push(doc);
    }
    assert_eq!(
        problems[0], problems[1],
        "nothing tells one tenant from another"
    );
    // None given: the server mints a UUIDv7.
    let minted = seed.post("/v1/memories", json!({}), None).await;
    assert_eq!(minted.status, 201);
    let id = minted.json()["memory_instance_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(&id[14..15], "7", "a version 7 UUID: {id}");
}
