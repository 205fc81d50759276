//! The console's filters over plain HTTP: priority, alone and with the others, in
//! listings and in bulk actions; a priority that is not a number is a 400 problem.

use serde_json::{Value, json};
use switchboard_proto::{BulkAction, BulkRequest, EventFilter, EventListQuery, SendMessage};
use switchboard_tests::{TestServer, key};

async fn send(server: &TestServer, agent: &str, priority: i32) {
    server
        .operator()
        .send_message(
            agent,
            &SendMessage {
                payload: json!({ "p": priority }),
                correlation_id: None,
                priority: Some(priority),
                available_at: None,
                expires_at: None,
                max_attempts: None,
            },
            &key(),
        )
        .await
        .expect("send");
}

#[tokio::test]
async fn events_filter_by_priority_in_lists_and_bulk_actions() {
    let server = TestServer::start().await;
    server.agent("a").await;
    for p in [5, -3, 5, 0] {
        send(&server, "a", p).await;
    }
    let op = server.operator();
    let page = op
        .events(&EventListQuery {
            priority: Some(5),
            ..Default::default()
        })
        .await
        .expect("events");
    assert_eq!(page.events.len(), 2);
    assert!(page.events.iter().all(|e| e.event.priority == 5));
    let none = op
        .events(&EventListQuery {
            priority: Some(5),
            agent: Some("nobody".into()),
            ..Default::default()
        })
        .await
        .expect("events");
    assert!(none.events.is_empty(), "filters combine");

    let purged = op
        .bulk(
            BulkAction::Purge,
            &BulkRequest {
                ids: None,
                filter: Some(EventFilter {
                    priority: Some(-3),
                    ..Default::default()
                }),
            },
        )
        .await
        .expect("purge");
    assert_eq!(purged.affected, 1, "only the priority -3 event");

    let bad = reqwest::Client::new()
        .get(format!("{}/api/v1/ops/events?priority=high", server.url))
        .bearer_auth(&server.operator_token)
        .send()
        .await
        .expect("GET");
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.expect("problem");
    assert_eq!(body["code"], "validation_failed");
}
