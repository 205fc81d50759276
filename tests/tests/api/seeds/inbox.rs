//! Seed 000, "Concrete API Contract": the paths under `/api/v1/agents/{agent_id}`,
//! the poll page's `sequence_number`, and the least-privilege read scope
//! (`agent:project_A:read`: "the blast radius is rigidly confined to that specific
//! agent's inbox and memory state").

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_tests::sdk::reqwest;
use switchboard_tests::{TestServer, key};

use super::Seed;
use crate::support::call;

/// The first `inbox_updated` of a raw SSE stream, as text: (`cursor_hint`, the
/// stream's content type).
async fn first_wakeup(url: &str, token: &str) -> (u64, String) {
    use futures::StreamExt;
    let response = reqwest::Client::new()
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("subscribe");
    assert_eq!(response.status(), 200, "subscribe answers 200");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.expect("chunk")));
            // `event: inbox_updated` then `data: {"cursor_hint": N}`, as the seed shows.
            if let Some(at) = text.find("event: inbox_updated") {
                let rest = &text[at..];
                if let Some(data) = rest.lines().find_map(|l| l.strip_prefix("data: ")) {
                    let v: Value = serde_json::from_str(data).expect("data is JSON");
                    return v["cursor_hint"].as_u64().expect("cursor_hint");
                }
            }
        }
        panic!("the stream ended before an inbox_updated: {text}")
    };
    let hint = tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("an inbox_updated within 5 s");
    (hint, content_type)
}

#[tokio::test]
async fn the_seeds_inbox_contract_works_as_written() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("project-a").await;
    let id = agent.agent_id.to_string();
    let op = Seed::new(&server.url, &server.operator_token);
    let me = Seed::new(&server.url, &agent.token);
    for n in 0..3 {
        let sent = op
            .post(
                &format!("/api/v1/agents/{id}/messages"),
                json!({"payload": {"type": "meeting_room_post", "room_id": "rm_8", "n": n},
                       "correlation_id": "msg_99x"}),
                Some(&key()),
            )
            .await;
        assert_eq!(sent.status, 201, "{}", sent.text());
    }

    // 1. Subscribe: text/event-stream, an inbox_updated with the cursor hint.
    let (hint, content_type) = first_wakeup(
        &format!("{}/api/v1/agents/{id}/subscribe", server.url),
        &agent.token,
    )
    .await;
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    assert_eq!(hint, 3, "the head after three sends");

    // 2. Poll after a cursor: events with `sequence_number`, `next_cursor`, `has_more`.
    let page = me
        .get(&format!(
            "/api/v1/agents/{id}/inbox?after_cursor=1&limit=10"
        ))
        .await;
    assert_eq!(page.status, 200, "{}", page.text());
    let page = page.json();
    let numbers: Vec<u64> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["sequence_number"].as_u64().expect("sequence_number"))
        .collect();
    assert_eq!(
        numbers,
        [2, 3],
        "strictly after the cursor, in order: {page}"
    );
    let first = &page["events"][0];
    for field in [
        "event_id",
        "priority",
        "correlation_id",
        "payload",
        "expires_at",
    ] {
        assert!(first.get(field).is_some(), "the seed's {field}: {first}");
    }
    assert_eq!(
        first["seq"], first["sequence_number"],
        "one number, two names"
    );
    assert_eq!(
        (&page["next_cursor"], &page["has_more"]),
        (&json!(3), &json!(false))
    );

    // 3. Claim: the batch under a visibility lease, each with its sequence number.
    let claim = me
        .post(
            &format!("/api/v1/agents/{id}/inbox/claim"),
            json!({"limit": 2}),
            None,
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.text());
    let claimed = claim.json()["events"].as_array().cloned().expect("events");
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0]["sequence_number"], 1, "oldest first");
    let token = |e: &Value| json!({"claim_token": e["claim_token"]});

    // 5. Release: back to pending at once, claimable again.
    let event = claimed[1]["event_id"].as_str().unwrap();
    let released = me
        .post(
            &format!("/api/v1/agents/{id}/inbox/{event}/release"),
            token(&claimed[1]),
            None,
        )
        .await;
    assert_eq!(released.status, 200, "{}", released.text());
    assert_eq!(released.json()["status"], "pending");

    // 4. Ack: completed.
    let event = claimed[0]["event_id"].as_str().unwrap();
    let acked = me
        .post(
            &format!("/api/v1/agents/{id}/inbox/{event}/ack"),
            token(&claimed[0]),
            None,
        )
        .await;
    assert_eq!(acked.status, 200, "{}", acked.text());
    assert_eq!(acked.json()["status"], "completed");
}

/// Mints `agent`'s read-only token as an operator would from the console.
async fn read_token(server: &TestServer, agent: &str) -> String {
    let op = Seed::new(&server.url, &server.operator_token);
    let minted = op
        .post(
            "/api/v1/ops/tokens",
            json!({"scopes": [format!("agent:{agent}:read")], "label": "dashboard"}),
            None,
        )
        .await;
    assert_eq!(minted.status, 201, "{}", minted.text());
    let body = minted.json();
    let scope = body["scopes"][0].as_str().expect("scope").to_owned();
    assert!(
        scope.starts_with("agent:") && scope.ends_with(":read") && !scope.contains(agent),
        "stored by the agent's id, not its name: {body}"
    );
    body["token"].as_str().expect("token").to_owned()
}

#[tokio::test]
async fn an_agents_read_scope_reads_its_inbox_and_rooms_and_changes_nothing() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("project-a").await;
    let (other, _) = server.agent("project-b").await;
    let op = Seed::new(&server.url, &server.operator_token);
    let id = agent.agent_id.to_string();
    for room in ["ours", "theirs"] {
        let made = op.post("/api/v1/rooms", json!({"name": room}), None).await;
        assert_eq!(made.status, 201, "{}", made.text());
    }
    for (room, who) in [("ours", "project-a"), ("theirs", "project-b")] {
        let joined = call(
            reqwest::Client::new()
                .put(format!("{}/api/v1/rooms/{room}/members/{who}", server.url))
                .bearer_auth(&server.operator_token),
        )
        .await;
        assert_eq!(joined.status, 200, "{}", joined.text());
    }
    let sent = op
        .post(
            &format!("/api/v1/agents/{id}/messages"),
            json!({"payload": {"n": 1}}),
            Some(&key()),
        )
        .await;
    assert_eq!(sent.status, 201, "{}", sent.text());

    let memory = op.post("/v1/memories", json!({}), None).await.json()["memory_instance_id"]
        .as_str()
        .expect("a memory")
        .to_owned();
    let reader = Seed::new(&server.url, &read_token(&server, "project-a").await);
    // What it may: poll, the snapshot, subscribe, its rooms' logs, the tenant's
    // memory records.
    for path in [
        format!("/v1/memories/{memory}/records"),
        format!("/api/v1/agents/{id}/inbox?after_cursor=0"),
        "/api/v1/agents/project-a/snapshot".to_owned(),
        "/api/v1/rooms/ours".to_owned(),
        "/api/v1/rooms/ours/messages".to_owned(),
    ] {
        let r = reader.get(&path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
    let (hint, _) = first_wakeup(
        &format!("{}/api/v1/agents/{id}/subscribe", server.url),
        &reader.token,
    )
    .await;
    assert_eq!(hint, 1);
    // Nothing of another agent's: 404, as for anyone outside (I9).
    for path in [
        format!("/api/v1/agents/{}/inbox", other.agent_id),
        "/api/v1/agents/project-b/snapshot".to_owned(),
        "/api/v1/rooms/theirs/messages".to_owned(),
    ] {
        reader.get(&path).await.problem(404, "not_found");
    }
    // Nothing that changes anything: 403, saying what the token may do.
    let writes = [
        (format!("/api/v1/agents/{id}/inbox/claim"), json!({}), false),
        (
            format!("/api/v1/agents/{id}/messages"),
            json!({"payload": {}}),
            true,
        ),
        (
            "/api/v1/rooms/ours/messages".to_owned(),
            json!({"payload": {}}),
            true,
        ),
        ("/v1/memories".to_owned(), json!({}), false),
        (
            "/v1/leases".to_owned(),
            json!({"display_name": "Reader", "memory_instance_id": agent.agent_id,
                   "ttl_seconds": 30}),
            true,
        ),
        (
            format!("/api/v1/agents/{id}/callbacks"),
            json!({"url": "https://example.com/hook"}),
            true,
        ),
    ];
    for (path, body, keyed) in writes {
        let k = key();
        let r = reader.post(&path, body, keyed.then_some(k.as_str())).await;
        let doc = r.problem(403, "forbidden");
        assert!(
            doc["detail"].as_str().is_some_and(|d| d.contains("read")),
            "{path}: says the token only reads: {doc}"
        );
    }
    // The event is still there, unclaimed: the reader changed nothing.
    let page = op
        .get(&format!("/api/v1/agents/{id}/inbox?after_cursor=0"))
        .await
        .json();
    assert_eq!(page["events"][0]["status"], "pending", "{page}");
}

#[tokio::test]
async fn an_agent_exchanges_its_token_for_its_read_scope() {
    let server = TestServer::start().await;
    let (agent, _) = server.agent("project-a").await;
    let (other, _) = server.agent("project-b").await;
    let scope = format!("agent:{}:read", agent.agent_id);
    let reply = crate::oauth::exchange(&server, &agent.token, Some(&scope)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.json()["scope"], scope.as_str());
    let access = reply.json()["access_token"].as_str().unwrap().to_owned();
    let reader = Seed::new(&server.url, &access);
    let id = agent.agent_id;
    let poll = reader.get(&format!("/api/v1/agents/{id}/inbox")).await;
    assert_eq!(poll.status, 200, "{}", poll.text());
    reader
        .post(&format!("/api/v1/agents/{id}/inbox/claim"), json!({}), None)
        .await
        .problem(403, "forbidden");
    // Only its own agent's read scope: another's is refused as OAuth says.
    let theirs = format!("agent:{}:read", other.agent_id);
    let refused = crate::oauth::exchange(&server, &agent.token, Some(&theirs)).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["error"], "invalid_scope");
}
