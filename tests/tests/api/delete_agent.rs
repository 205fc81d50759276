//! Deleting an agent (issue 15, the Agents page's Delete): its credentials stop,
//! its open events are purged, it leaves its rooms, its name is free for a new
//! agent, and nothing is delivered to it once the deletion has answered, even
//! with sends racing it.

use serde_json::json;
use switchboard_tests::sdk::proto::{CreateRoom, SendMessage};
use switchboard_tests::sdk::reqwest::Method;
use switchboard_tests::{TestServer, key};

use crate::support::{call, inbox, message, send, send_raw};

#[tokio::test]
async fn a_deleted_agent_is_gone_its_work_purged_and_its_name_free() {
    let server = TestServer::start().await;
    let op = server.operator();
    let (gone, gone_client) = server.agent("gone").await;
    let (_, stays) = server.agent("stays").await;
    for i in 0..3 {
        send(&stays, "gone", json!(i)).await;
    }
    // One claimed, two pending.
    gone_client
        .claim("gone", &Default::default())
        .await
        .expect("claim");
    op.create_room(&CreateRoom {
        name: "team".into(),
    })
    .await
    .unwrap();
    for member in ["gone", "stays"] {
        op.add_member("team", member).await.unwrap();
    }

    let deleted = op.delete_agent("gone").await.expect("deleted");
    assert_eq!(
        (
            deleted.agent_id,
            deleted.name.as_str(),
            deleted.revoked,
            deleted.purged
        ),
        (gone.agent_id, "gone", 1, 3)
    );

    // Its token stops; its id and name answer as agents that never were.
    let refused = call(gone_client.request(Method::GET, "agents/gone/inbox")).await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    for key in ["gone", &gone.agent_id.to_string()] {
        call(op.request(Method::GET, &format!("agents/{key}/inbox")))
            .await
            .problem(404, "not_found");
        call(op.request(Method::DELETE, &format!("ops/agents/{key}")))
            .await
            .problem(404, "not_found");
    }
    send_raw(&stays, "gone", &message(json!("late")), &key())
        .await
        .problem(404, "not_found");
    let agents = op.agents().await.unwrap();
    assert_eq!(
        agents.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["stays"],
        "only the live agent is listed"
    );
    // The room goes on without it.
    let room = op.room("team").await.unwrap();
    assert_eq!(room.members.len(), 1, "{room:?}");
    let receipt = stays
        .send_room_message(
            "team",
            &SendMessage {
                payload: json!("still here"),
                ..Default::default()
            },
            &key(),
        )
        .await
        .expect("room send");
    assert_eq!(receipt.deliveries.len(), 0, "stays is the sender");
    // The name is free: a new agent, a new id, an empty inbox numbered from 1.
    let (again, again_client) = server.agent("gone").await;
    assert_ne!(again.agent_id, gone.agent_id);
    assert!(inbox(&again_client, "gone").await.is_empty());
    let receipt = send(&stays, "gone", json!("fresh")).await;
    assert_eq!(receipt.seq, 1);
    assert_eq!(receipt.agent_id, again.agent_id);
    // Another tenant's operator cannot delete it: it does not exist for them.
    let (_, other_op) = server.tenant("other").await;
    call(other_op.request(Method::DELETE, "ops/agents/gone"))
        .await
        .problem(404, "not_found");
    // A read-only token may not delete.
    call(stays.request(Method::DELETE, "ops/agents/gone"))
        .await
        .problem(403, "forbidden");
}

/// Sends race the deletion: each is answered 201 (committed before the deletion,
/// and then purged with the rest) or 404 (after it), never anything else, and no
/// event is left open in the deleted inbox: the deletion purged exactly the events
/// whose sends were accepted.
#[tokio::test]
async fn sends_racing_a_deletion_are_purged_with_it_or_refused() {
    let server = TestServer::start().await;
    let (_, sender) = server.agent("sender").await;
    for round in 0..3 {
        let target = format!("target-{round}");
        server.agent(&target).await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let senders: Vec<_> = (0..6)
            .map(|_| {
                let (sender, target) = (sender.clone(), target.clone());
                let (stop, accepted) = (stop.clone(), accepted.clone());
                tokio::spawn(async move {
                    let (mut created, mut refused) = (0u64, 0u64);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let reply = send_raw(&sender, &target, &message(json!(1)), &key()).await;
                        match reply.status {
                            201 => {
                                created += 1;
                                accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            }
                            404 => {
                                refused += 1;
                                break;
                            }
                            other => {
                                panic!("a send racing a deletion got {other}: {}", reply.text())
                            }
                        }
                    }
                    (created, refused)
                })
            })
            .collect();
        // Delete while the sends are in full flow.
        let flowing = std::time::Instant::now();
        while accepted.load(std::sync::atomic::Ordering::Relaxed) < 12 {
            assert!(
                flowing.elapsed().as_secs() < 20,
                "the sends never got going"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let deleted = server
            .operator()
            .delete_agent(&target)
            .await
            .expect("deleted");
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut created = 0;
        for task in senders {
            created += task.await.unwrap().0;
        }
        assert_eq!(
            deleted.purged, created,
            "round {round}: every accepted send was purged by the deletion, none \
             committed after it"
        );
    }
}
