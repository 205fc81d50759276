//! The statements of sends and rooms, and the sends over them.

use super::message;
use crate::engine::send::SendStatements;
use crate::*;

/// Every [`SendStatements`] method against a fresh database of `d`'s backend.
pub(super) async fn check<D: SendStatements>(d: &Engine<D>)
where
    Engine<D>: Store,
{
    let tenant = d.ensure_tenant("suite-send", 0).await.expect("tenant");
    let other = d
        .ensure_tenant("suite-send-other", 0)
        .await
        .expect("tenant");
    let mut agents = Vec::new();
    for (n, name) in ["s1", "s2", "s3"].into_iter().enumerate() {
        let a = d
            .create_agent(tenant, name, &[0x50 + n as u8; 32], &[], None, 0)
            .await
            .expect("agent");
        agents.push(a.id);
    }
    let stranger = d
        .create_agent(other, "s1", &[20; 32], &[], None, 0)
        .await
        .expect("agent")
        .id;
    let (a1, a2, a3) = (agents[0], agents[1], agents[2]);
    let room = RoomId::new();

    let mut tx = d.begin_write().await.expect("begin");
    assert!(d.insert_room(&mut tx, room, tenant, "r", 5).await.unwrap());
    // Rooms and agents by tenant; the room's row locked.
    assert!(d.lock_room(&mut tx, tenant, room).await.unwrap());
    assert!(!d.lock_room(&mut tx, other, room).await.unwrap());
    assert!(!d.lock_room(&mut tx, tenant, RoomId::new()).await.unwrap());
    assert!(d.tenant_has_agent(&mut tx, tenant, a1).await.unwrap());
    assert!(!d.tenant_has_agent(&mut tx, tenant, stranger).await.unwrap());
    assert!(!d.tenant_has_agent(&mut tx, other, a1).await.unwrap());
    // Members: idempotent, listed in agent-id order.
    assert!(d.room_members(&mut tx, room).await.unwrap().is_empty());
    for agent in [a3, a3, a2, a1] {
        d.add_member(&mut tx, room, agent, 6).await.unwrap();
    }
    let mut by_id = vec![a1, a2, a3];
    by_id.sort_by_key(|a| a.to_string());
    assert_eq!(d.room_members(&mut tx, room).await.unwrap(), by_id);
    d.remove_member(&mut tx, room, a3).await.unwrap();
    d.remove_member(&mut tx, room, a3).await.unwrap();
    by_id.retain(|a| *a != a3);
    assert_eq!(d.room_members(&mut tx, room).await.unwrap(), by_id);
    // The room's sequence, within the tenant only.
    assert_eq!(d.next_room_seq(&mut tx, tenant, room).await.unwrap(), 1);
    assert_eq!(d.next_room_seq(&mut tx, tenant, room).await.unwrap(), 2);
    assert!(matches!(
        d.next_room_seq(&mut tx, other, room).await,
        Err(StoreError::NotFound)
    ));
    d.insert_room_message(&mut tx, room, 1, Some(a1), &message(1), 7)
        .await
        .unwrap();
    d.insert_room_message(&mut tx, room, 2, None, &message(2), 8)
        .await
        .unwrap();
    // By id or by name, in the transaction: members by name.
    for key in [room.to_string(), "r".to_owned()] {
        let r = d.load_room(Some(&mut tx), tenant, &key).await.unwrap();
        assert_eq!((r.room_id, r.name.as_str(), r.head_seq), (room, "r", 2));
        let names: Vec<_> = r.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["s1", "s2"]);
    }
    assert!(matches!(
        d.load_room(Some(&mut tx), other, "r").await,
        Err(StoreError::NotFound)
    ));
    d.commit(tx, &[]).await.expect("commit");

    // Outside a transaction, on the read pool.
    let r = d.load_room(None, tenant, "r").await.unwrap();
    assert_eq!((r.room_id, r.head_seq, r.members.len()), (room, 2, 2));
    assert_eq!(
        r.created_at,
        crate::clock::to_timestamp(5),
        "created_at as inserted"
    );
    assert!(matches!(
        d.load_room(None, tenant, "nope").await,
        Err(StoreError::NotFound)
    ));
    // A taken name is refused; a taken room sequence number too (the messages
    // were stored). Each in a transaction of its own, dropped.
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        !d.insert_room(&mut tx, RoomId::new(), tenant, "r", 9)
            .await
            .unwrap()
    );
    drop(tx);
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        d.insert_room_message(&mut tx, room, 2, None, &message(3), 9)
            .await
            .is_err()
    );
    drop(tx);
    let mut tx = d.begin_write().await.expect("begin");
    assert!(
        d.insert_room(&mut tx, RoomId::new(), other, "r", 9)
            .await
            .unwrap()
    );
    drop(tx);

    // The sends over them: the room's next number, an event for every member but
    // the sender (in agent-id order), the wake-ups of the deliveries.
    let from = Actor::Agent {
        id: a1,
        name: "s1".into(),
    };
    let sent = d
        .send_room(tenant, room, &from, &message(4), None, 10)
        .await
        .unwrap();
    assert_eq!(sent.value.room_seq, 3);
    let delivered: Vec<_> = sent.value.deliveries.iter().map(|x| x.agent_id).collect();
    assert_eq!(delivered, [a2]);
    assert_eq!(
        sent.wakes,
        [Wake {
            tenant_id: tenant,
            agent_id: a2,
            cursor_hint: 1
        }]
    );
    let outsider = Actor::Agent {
        id: a3,
        name: "s3".into(),
    };
    assert!(matches!(
        d.send_room(tenant, room, &outsider, &message(5), None, 11)
            .await,
        Err(StoreError::NotFound)
    ));
    let direct = d
        .send_direct(tenant, a2, &Actor::Operator, &message(6), None, 12)
        .await
        .unwrap();
    assert_eq!((direct.value.agent_id, direct.value.seq), (a2, 2));
    assert_eq!(direct.wakes[0].cursor_hint, 2);
}
