//! A client written from the names-and-leases seed (issue 12, defect 6): raw JSON
//! bodies spelled exactly as the seed spells them, sent to the seed's paths
//! (`/v1/leases…`, `/v1/memories…`, no `/api` prefix) with a plain HTTP client and
//! read as plain JSON; no proto type and no SDK call. What it checks: acquire (201,
//! then 200 for the replay), renew and release by the four identifying fields
//! (`canonical_name`, `memory_instance_id`, `fencing_token`, `owner_client_id`),
//! branch, the refusals' stable codes, and the OpenAPI document's seed names. Also:
//! a renewal that sends `lease_id` and the fields must name one lease with both.

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::reqwest;
use switchboard_tests::{Options, TestServer, key};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::support::{Reply, call};

/// The seed client: its base URL and bearer token, nothing of ours.
struct Seed {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Seed {
    async fn post(&self, path: &str, body: Value, idempotency_key: Option<&str>) -> Reply {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body);
        if let Some(k) = idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        call(req).await
    }
}

fn at(reply: &Value, field: &str) -> OffsetDateTime {
    let text = reply[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field}: {reply}"));
    OffsetDateTime::parse(text, &Rfc3339).unwrap_or_else(|e| panic!("{field} {text:?}: {e}"))
}

#[tokio::test]
async fn a_client_written_from_the_seed_works_unchanged() {
    let server = TestServer::with(Options {
        manual_clock: true,
        ..Options::default()
    })
    .await;
    let (agent, _) = server.agent("seed-agent").await;
    let seed = Seed {
        http: reqwest::Client::new(),
        url: server.url.clone(),
        token: agent.token,
    };

    let memory = seed.post("/v1/memories", json!({}), None).await;
    assert_eq!(memory.status, 201, "{}", memory.text());
    let m = memory.json()["memory_instance_id"].clone();
    assert!(m.is_string(), "{}", memory.text());

    // Acquire: 201, then 200 for the replay of the same key, with the same answer.
    let acquire = json!({
        "display_name": "Seed-Bot",
        "memory_instance_id": m,
        "owner_client_id": "host-a/pid-7",
        "ttl_seconds": 30,
    });
    let k = key();
    let first = seed.post("/v1/leases", acquire.clone(), Some(&k)).await;
    assert_eq!(first.status, 201, "{}", first.text());
    let lease = first.json();
    for field in ["lease_id", "canonical_name", "fencing_token", "expires_at"] {
        assert!(
            !lease[field].is_null(),
            "the seed's answer has {field}: {lease}"
        );
    }
    assert_eq!(
        lease["canonical_name"], "seed-bot",
        "canonicalized: {lease}"
    );
    assert_eq!(
        lease["name"], lease["canonical_name"],
        "both spellings, one value"
    );
    assert_eq!(lease["fencing_token"], 1);
    let replay = seed.post("/v1/leases", acquire.clone(), Some(&k)).await;
    assert_eq!(
        (replay.status, replay.replayed()),
        (200, true),
        "{}",
        replay.text()
    );
    assert_eq!(replay.json(), lease);
    // The seed's path and ours are one route: the key replays on either.
    let ours = seed.post("/api/v1/leases", acquire.clone(), Some(&k)).await;
    assert_eq!((ours.status, ours.json()), (200, lease.clone()));

    // Renew by the four identifying fields.
    let token = lease["fencing_token"].as_u64().unwrap();
    let fields = |token: u64, owner: &str| {
        json!({
            "canonical_name": "seed-bot",
            "memory_instance_id": m,
            "fencing_token": token,
            "owner_client_id": owner,
        })
    };
    server.advance(Duration::from_secs(10));
    let mut renew = fields(token, "host-a/pid-7");
    renew["ttl_seconds"] = json!(30);
    let renewed = seed.post("/v1/leases/renew", renew.clone(), None).await;
    assert_eq!(renewed.status, 200, "{}", renewed.text());
    assert!(
        at(&renewed.json(), "expires_at") > at(&lease, "expires_at"),
        "renewing 10 s in moves the expiry: {} then {}",
        lease["expires_at"],
        renewed.text()
    );

    // Refusals, each a problem document with a stable code; none is a 500.
    let wrong_token = seed
        .post("/v1/leases/renew", fields(token + 1, "host-a/pid-7"), None)
        .await;
    wrong_token.problem(409, "stale_fence");
    let stale_token = seed
        .post("/v1/leases/renew", fields(token - 1, "host-a/pid-7"), None)
        .await;
    stale_token.problem(409, "stale_fence");
    let unknown_owner = seed
        .post("/v1/leases/renew", fields(token, "host-b/pid-9"), None)
        .await
        .problem(409, "stale_fence");
    assert!(
        unknown_owner["detail"]
            .as_str()
            .is_some_and(|d| d.contains("owner_client_id")),
        "says which field does not match: {unknown_owner}"
    );
    let mut other_name = fields(token, "host-a/pid-7");
    other_name["canonical_name"] = json!("other-bot");
    seed.post("/v1/leases/renew", other_name, None)
        .await
        .problem(409, "stale_fence");
    let mut no_memory = fields(token, "host-a/pid-7");
    no_memory
        .as_object_mut()
        .unwrap()
        .remove("memory_instance_id");
    let p = seed
        .post("/v1/leases/renew", no_memory, None)
        .await
        .problem(422, "validation_failed");
    assert!(
        p["detail"]
            .as_str()
            .is_some_and(|d| d.contains("memory_instance_id")),
        "says what is missing: {p}"
    );
    // An unknown owner cannot release it either; the lease is still held.
    seed.post("/v1/leases/release", fields(token, "host-b/pid-9"), None)
        .await
        .problem(409, "stale_fence");

    // Branch by the seed's fields.
    let branch = seed
        .post(
            "/v1/memories/branch",
            json!({"parent_memory_instance_id": m, "parent_fencing_token": token}),
            None,
        )
        .await;
    assert_eq!(branch.status, 201, "{}", branch.text());
    let child = branch.json()["memory_instance_id"].clone();
    assert!(
        child.is_string() && child != m,
        "a new identity: {}",
        branch.text()
    );

    // Release by the four fields: 204; after it the lease is over, and releasing
    // again is done already.
    let released = seed
        .post("/v1/leases/release", fields(token, "host-a/pid-7"), None)
        .await;
    assert_eq!(released.status, 204, "{}", released.text());
    seed.post("/v1/leases/renew", renew.clone(), None)
        .await
        .problem(409, "stale_fence");
    let again = seed
        .post("/v1/leases/release", fields(token, "host-a/pid-7"), None)
        .await;
    assert_eq!(again.status, 204, "{}", again.text());

    // A new lease has a higher token; past its expiry a renewal is 410.
    let second = seed.post("/v1/leases", acquire.clone(), Some(&key())).await;
    assert_eq!(second.status, 201, "{}", second.text());
    let token2 = second.json()["fencing_token"].as_u64().unwrap();
    assert!(token2 > token, "{}", second.text());
    server.advance(Duration::from_secs(31));
    seed.post("/v1/leases/renew", fields(token2, "host-a/pid-7"), None)
        .await
        .problem(410, "lease_expired");
}

#[tokio::test]
async fn a_lease_named_by_both_its_id_and_its_fields_must_be_one_lease() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("both-ways").await;
    let seed = Seed {
        http: reqwest::Client::new(),
        url: server.url.clone(),
        token: agent.token,
    };
    let mut leases = Vec::new();
    for name in ["first-bot", "second-bot"] {
        let m = seed.post("/api/v1/memories", json!({}), None).await.json()["memory_instance_id"]
            .clone();
        let body = json!({"name": name, "memory_instance_id": m, "owner_client": "host-a", "ttl_seconds": 30});
        let reply = seed.post("/api/v1/leases", body, Some(&key())).await;
        assert_eq!(reply.status, 201, "{}", reply.text());
        leases.push(reply.json());
    }
    let named = |id: &Value, by: &Value| {
        json!({
            "lease_id": id["lease_id"],
            "canonical_name": by["canonical_name"],
            "memory_instance_id": by["memory_instance_id"],
            "fencing_token": by["fencing_token"],
            "owner_client_id": "host-a",
        })
    };
    let mixed = named(&leases[0], &leases[1]);
    seed.post("/api/v1/leases/renew", mixed.clone(), None)
        .await
        .problem(409, "stale_fence");
    seed.post("/api/v1/leases/release", mixed, None)
        .await
        .problem(409, "stale_fence");
    let same = seed
        .post("/api/v1/leases/renew", named(&leases[0], &leases[0]), None)
        .await;
    assert_eq!(same.status, 200, "{}", same.text());
    let p = seed
        .post("/api/v1/leases/renew", json!({"fencing_token": 1}), None)
        .await
        .problem(422, "validation_failed");
    assert!(
        p["detail"].as_str().is_some_and(|d| d.contains("lease_id")),
        "says how to name the lease: {p}"
    );
}

#[tokio::test]
async fn the_openapi_document_lists_the_seed_names_and_paths() {
    let server = TestServer::start().await;
    let reply =
        call(reqwest::Client::new().get(format!("{}/api/v1/openapi.json", server.url))).await;
    assert_eq!(reply.status, 200);
    let doc = reply.json();
    let schemas = &doc["components"]["schemas"];
    let has = |schema: &str, field: &str| {
        assert!(
            schemas[schema]["properties"][field].is_object(),
            "{schema}.{field} is documented: {}",
            schemas[schema]
        );
    };
    for field in [
        "display_name",
        "name",
        "owner_client_id",
        "owner_client",
        "memory_instance_id",
        "ttl_seconds",
    ] {
        has("AcquireLease", field);
    }
    for field in [
        "lease_id",
        "canonical_name",
        "name",
        "fencing_token",
        "expires_at",
    ] {
        has("Lease", field);
    }
    for schema in ["RenewLease", "ReleaseLease"] {
        for field in [
            "lease_id",
            "canonical_name",
            "memory_instance_id",
            "fencing_token",
            "owner_client_id",
        ] {
            has(schema, field);
        }
    }
    for field in ["parent_memory_instance_id", "parent_fencing_token"] {
        has("BranchMemory", field);
    }
    for path in [
        "/v1/leases",
        "/v1/leases/renew",
        "/v1/leases/release",
        "/v1/memories",
        "/v1/memories/branch",
        "/api/v1/leases",
        "/api/v1/leases/renew",
    ] {
        assert!(
            doc["paths"][path]["post"].is_object(),
            "POST {path} is documented"
        );
    }
}
