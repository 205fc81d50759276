//! [`SendStatements`](crate::engine::send::SendStatements): a room send locks
//! the room's row first (`next_room_seq`), and `set_member` locks it `@FOR_UPDATE`,
//! in the lock order of the engine's `send.rs`.

macro_rules! send_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::send::SendStatements for $store {
            async fn next_room_seq(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                room: switchboard_proto::RoomId,
            ) -> $crate::StoreResult<u64> {
                if !<Self as $crate::engine::Driver>::DIALECT.update_returning() {
                    // The update locks the row until the commit; the read sees it.
                    let done = sqlx::query($crate::engine::stmt!(
                        "UPDATE rooms SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2"
                    ))
                    .bind(room)
                    .bind(tenant)
                    .execute(&mut **tx)
                    .await?;
                    if done.rows_affected() != 1 {
                        return Err(sqlx::Error::RowNotFound.into());
                    }
                    let seq: i64 = sqlx::query_scalar($crate::engine::stmt!(
                        "SELECT head_seq FROM rooms WHERE id = $1"
                    ))
                    .bind(room)
                    .fetch_one(&mut **tx)
                    .await?;
                    return Ok(seq as u64);
                }
                let seq: i64 = sqlx::query_scalar($crate::engine::stmt!(
                    "UPDATE rooms SET head_seq = head_seq + 1 WHERE id = $1 AND tenant_id = $2 \
                     RETURNING head_seq"
                ))
                .bind(room)
                .bind(tenant)
                .fetch_one(&mut **tx)
                .await?;
                Ok(seq as u64)
            }

            async fn room_members(
                &self,
                tx: &mut Self::Tx,
                room: switchboard_proto::RoomId,
            ) -> $crate::StoreResult<Vec<switchboard_proto::AgentId>> {
                let agents = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT agent_id FROM room_members WHERE room_id = $1 ORDER BY agent_id"
                ))
                .bind(room)
                .fetch_all(&mut **tx)
                .await?;
                Ok(agents)
            }

            async fn insert_room_message(
                &self,
                tx: &mut Self::Tx,
                room: switchboard_proto::RoomId,
                seq: u64,
                sender: Option<switchboard_proto::AgentId>,
                msg: &$crate::NewMessage,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO room_messages (room_id, seq, sender_agent_id, payload, \
                     correlation_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
                ))
                .bind(room)
                .bind(seq as i64)
                .bind(sender)
                .bind(&msg.payload)
                .bind(&msg.correlation_id)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn insert_room(
                &self,
                tx: &mut Self::Tx,
                id: switchboard_proto::RoomId,
                tenant: switchboard_proto::TenantId,
                name: &str,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                let inserted = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO rooms (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4)"
                ))
                .bind(id)
                .bind(tenant)
                .bind(name)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                // A name already taken is told by the unique index.
                $crate::dialect::inserted(inserted)
            }

            async fn lock_room(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                room: switchboard_proto::RoomId,
            ) -> $crate::StoreResult<bool> {
                let found: Option<String> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT id FROM rooms WHERE id = $1 AND tenant_id = $2 @FOR_UPDATE"
                ))
                .bind(room)
                .bind(tenant)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(found.is_some())
            }

            async fn tenant_has_agent(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<bool> {
                let found: Option<String> = sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT id FROM agents WHERE id = $1 AND tenant_id = $2"
                ))
                .bind(agent)
                .bind(tenant)
                .fetch_optional(&mut **tx)
                .await?;
                Ok(found.is_some())
            }

            async fn add_member(
                &self,
                tx: &mut Self::Tx,
                room: switchboard_proto::RoomId,
                agent: switchboard_proto::AgentId,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                let done = sqlx::query($crate::engine::stmt!(
                    "INSERT INTO room_members (room_id, agent_id, joined_at) VALUES ($1, $2, $3) \
                     @IGNORE_DUPLICATE"
                ))
                .bind(room)
                .bind(agent)
                .bind(now)
                .execute(&mut **tx)
                .await
                .map(|done| done.rows_affected());
                $crate::dialect::inserted(done)?;
                Ok(())
            }

            async fn remove_member(
                &self,
                tx: &mut Self::Tx,
                room: switchboard_proto::RoomId,
                agent: switchboard_proto::AgentId,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM room_members WHERE room_id = $1 AND agent_id = $2"
                ))
                .bind(room)
                .bind(agent)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn load_room(
                &self,
                mut tx: Option<&mut Self::Tx>,
                tenant: switchboard_proto::TenantId,
                key: &str,
            ) -> $crate::StoreResult<switchboard_proto::Room> {
                let (column, key) = $crate::rows::by_id_or_name::<switchboard_proto::RoomId>(key);
                let sql = if column == "id" {
                    $crate::engine::stmt!(
                        "SELECT id, name, head_seq, created_at FROM rooms \
                         WHERE tenant_id = $1 AND id = $2"
                    )
                } else {
                    $crate::engine::stmt!(
                        "SELECT id, name, head_seq, created_at FROM rooms \
                         WHERE tenant_id = $1 AND name = $2"
                    )
                };
                let room = sqlx::query(sql).bind(tenant).bind(key);
                let room = match tx.as_deref_mut() {
                    Some(tx) => room.fetch_one(&mut **tx).await?,
                    None => room.fetch_one(self.read_pool()).await?,
                };
                let id: String = sqlx::Row::try_get(&room, "id")?;
                let members = sqlx::query($crate::engine::stmt!(
                    "SELECT a.id, a.name FROM room_members m JOIN agents a ON a.id = m.agent_id \
                     WHERE m.room_id = $1 ORDER BY a.name"
                ))
                .bind(id);
                let members = match tx {
                    Some(tx) => members.fetch_all(&mut **tx).await?,
                    None => members.fetch_all(self.read_pool()).await?,
                };
                $crate::rows::room_from_rows(&room, &members)
            }

            async fn room_log(
                &self,
                room: switchboard_proto::RoomId,
                after: u64,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::RoomMessage>> {
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT m.seq, m.sender_agent_id, a.name AS sender_name, m.payload, \
                     m.correlation_id, m.created_at FROM room_messages m \
                     LEFT JOIN agents a ON a.id = m.sender_agent_id \
                     WHERE m.room_id = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3"
                ))
                .bind(room)
                .bind(after as i64)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter()
                    .map($crate::rows::room_message_from_row)
                    .collect()
            }
        }
    };
}
pub(crate) use send_statements;
