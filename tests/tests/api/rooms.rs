//! Rooms: one message fans out into one inbox event per member other than the sender,
//! numbered by the room's own sequence (`room_seq`).

use serde_json::json;
use switchboard_tests::sdk::proto::{
    CreateRoom, InboxEvent, Room, RoomReceipt, SendMessage, Sender,
};
use switchboard_tests::sdk::{Client, reqwest::Method};
use switchboard_tests::{TestServer, key};

use crate::support::{call, inbox, message, send_room_raw};

/// A server with agents a, b, c in room "team" and d outside it.
async fn team() -> (TestServer, Room, Vec<Client>) {
    let server = TestServer::start().await;
    let op = server.operator();
    let mut clients = Vec::new();
    for name in ["a", "b", "c", "d"] {
        clients.push(server.agent(name).await.1);
    }
    op.create_room(&CreateRoom {
        name: "team".into(),
    })
    .await
    .unwrap();
    for member in ["a", "b", "c"] {
        op.add_member("team", member).await.unwrap();
    }
    let room = op.room("team").await.unwrap();
    (server, room, clients)
}

async fn say(client: &Client, room: &str, payload: serde_json::Value) -> RoomReceipt {
    let message = SendMessage {
        payload,
        ..Default::default()
    };
    client
        .send_room_message(room, &message, &key())
        .await
        .expect("room send")
}

async fn inboxes(server: &TestServer) -> Vec<Vec<InboxEvent>> {
    let op = server.operator();
    let mut all = Vec::new();
    for name in ["a", "b", "c", "d"] {
        all.push(inbox(&op, name).await);
    }
    all
}

#[tokio::test]
async fn a_member_message_reaches_every_other_member_once() {
    let (server, room, clients) = team().await;
    let names: Vec<&str> = room.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);

    let first = say(&clients[0], "team", json!("from a")).await;
    assert_eq!(first.room_seq, 1);
    assert_eq!(first.deliveries.len(), 2, "b and c, not the sender");
    let [a, b, c, d] = &inboxes(&server).await[..] else {
        unreachable!()
    };
    assert!(a.is_empty(), "the sender gets no copy");
    assert!(d.is_empty(), "non-members get nothing");
    for got in [b, c] {
        assert_eq!(got.len(), 1);
        let event = &got[0];
        assert_eq!(event.room_id, Some(room.room_id));
        assert_eq!(event.room_seq, Some(1));
        assert_eq!(event.payload, Some(json!("from a")));
        assert!(matches!(&event.sender, Sender::Agent { name, .. } if name == "a"));
        assert!(
            first
                .deliveries
                .iter()
                .any(|d| d.event_id == event.event_id)
        );
    }

    let second = say(&clients[1], &room.room_id.to_string(), json!("from b")).await;
    assert_eq!(second.room_seq, 2, "room_seq counts room messages");
    let [a, b, c, _] = &inboxes(&server).await[..] else {
        unreachable!()
    };
    assert_eq!(a.iter().map(|e| e.room_seq).collect::<Vec<_>>(), [Some(2)]);
    assert_eq!(b.len(), 1, "b sent the second one");
    assert_eq!(
        c.iter().map(|e| e.room_seq).collect::<Vec<_>>(),
        [Some(1), Some(2)]
    );
    assert_eq!(server.operator().room("team").await.unwrap().head_seq, 2);
}

#[tokio::test]
async fn non_members_may_not_send() {
    let (server, _, clients) = team().await;
    // To a non-member the room does not exist, for a send as for a read (no
    // existence oracle): the same 404 as a room of nowhere.
    let k = key();
    let reply = send_room_raw(&clients[3], "team", &message(json!("let me in")), &k).await;
    let problem = reply.problem(404, "not_found");
    let nowhere = send_room_raw(&clients[3], "no-such-room", &message(json!(1)), &key()).await;
    let other = nowhere.problem(404, "not_found");
    assert_eq!(
        problem["detail"]
            .as_str()
            .map(|d| d.replace("team", "no-such-room")),
        other["detail"].as_str().map(str::to_owned),
        "{problem} / {other}"
    );
    assert!(
        inboxes(&server).await.iter().all(Vec::is_empty),
        "nothing delivered"
    );
    assert_eq!(server.operator().room("team").await.unwrap().head_seq, 0);
    // Nor read the room: to a non-member it does not exist.
    let seen = call(clients[3].request(Method::GET, "rooms/team")).await;
    seen.problem(404, "not_found");
    let member = call(clients[0].request(Method::GET, "rooms/team")).await;
    assert_eq!(member.status, 200, "members can read it");
    // The refusal was not stored under the key: once added, the same request
    // with the same key sends.
    server.operator().add_member("team", "d").await.unwrap();
    let retried = send_room_raw(&clients[3], "team", &message(json!("let me in")), &k).await;
    assert_eq!(retried.status, 201, "{}", retried.text());
}

#[tokio::test]
async fn an_operator_message_reaches_all_members() {
    let (server, room, _) = team().await;
    let receipt = say(&server.operator(), "team", json!("all hands")).await;
    assert_eq!(receipt.deliveries.len(), 3);
    let boxes = inboxes(&server).await;
    for got in &boxes[..3] {
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].sender, Sender::Operator);
        assert_eq!(got[0].room_id, Some(room.room_id));
    }
    assert!(boxes[3].is_empty());
}

#[tokio::test]
async fn a_removed_member_gets_nothing_more() {
    let (server, _, clients) = team().await;
    let op = server.operator();
    say(&clients[0], "team", json!(1)).await;
    let room = op.remove_member("team", "c").await.unwrap();
    assert!(room.members.iter().all(|m| m.name != "c"));
    let receipt = say(&clients[0], "team", json!(2)).await;
    assert_eq!(receipt.deliveries.len(), 1, "only b is left besides a");
    let boxes = inboxes(&server).await;
    assert_eq!(boxes[1].len(), 2);
    assert_eq!(
        boxes[2].len(),
        1,
        "c keeps what it had and gets nothing new"
    );
    send_room_raw(&clients[2], "team", &message(json!(3)), &key())
        .await
        .problem(404, "not_found");
    // Removing again is a no-op; adding back resumes deliveries.
    op.remove_member("team", "c").await.unwrap();
    op.add_member("team", "c").await.unwrap();
    assert_eq!(say(&clients[0], "team", json!(4)).await.deliveries.len(), 2);
}

#[tokio::test]
async fn unknown_rooms_and_agents_are_404() {
    let (server, _, clients) = team().await;
    let op = server.operator();
    call(op.request(Method::GET, "rooms/nope"))
        .await
        .problem(404, "not_found");
    send_room_raw(&op, "nope", &message(json!(1)), &key())
        .await
        .problem(404, "not_found");
    send_room_raw(&clients[0], "nope", &message(json!(1)), &key())
        .await
        .problem(404, "not_found");
    call(op.request(Method::PUT, "rooms/nope/members/a"))
        .await
        .problem(404, "not_found");
    call(op.request(Method::PUT, "rooms/team/members/zed"))
        .await
        .problem(404, "not_found");
    call(
        op.request(Method::POST, "rooms")
            .json(&json!({"name": "team"})),
    )
    .await
    .problem(409, "conflict");
}

#[tokio::test]
async fn the_room_log_reads_by_cursor_for_members_and_operators() {
    let (server, room, clients) = team().await;
    let op = server.operator();
    for i in 1..=5 {
        say(&clients[i % 3], "team", json!({ "n": i })).await;
    }
    // An operator's message has no sender.
    op.send_room_message(
        "team",
        &SendMessage {
            payload: json!("from the operator"),
            correlation_id: Some("run-7".into()),
            ..Default::default()
        },
        &key(),
    )
    .await
    .unwrap();

    // Pages of two, by cursor, as a member.
    let mut seen = Vec::new();
    let mut cursor = 0;
    loop {
        let page = clients[0]
            .room_messages("team", cursor, Some(2))
            .await
            .expect("a member reads the log");
        assert_eq!(page.room_id, room.room_id);
        assert!(page.messages.len() <= 2);
        seen.extend(page.messages.iter().cloned());
        cursor = page.next_cursor;
        if !page.has_more {
            break;
        }
    }
    let seqs: Vec<u64> = seen.iter().map(|m| m.room_seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6], "every message once, in order");
    assert_eq!(seen[0].payload, json!({ "n": 1 }));
    assert_eq!(seen[0].sender.as_ref().map(|s| s.name.as_str()), Some("b"));
    assert_eq!(seen[5].sender, None, "the operator's");
    assert_eq!(seen[5].correlation_id.as_deref(), Some("run-7"));

    // The end: an empty page keeps the cursor.
    let end = op.room_messages("team", 6, None).await.unwrap();
    assert!(end.messages.is_empty() && !end.has_more);
    assert_eq!(end.next_cursor, 6);

    // To an agent outside the room it does not exist, as the room itself.
    let outside = clients[3].room_messages("team", 0, None).await.unwrap_err();
    assert_eq!(outside.status(), Some(404));
    // Limits are enforced.
    let too_many = op.room_messages("team", 0, Some(1001)).await.unwrap_err();
    assert_eq!(too_many.status(), Some(422), "{too_many}");
    assert_eq!(
        too_many.code(),
        Some(switchboard_tests::sdk::proto::ErrorCode::ValidationFailed)
    );
}
