//! [`InstanceStatements`](crate::engine::instances::InstanceStatements): one
//! row per server instance of a shared database, upserted by its heartbeat. A beat
//! never moves the row back: one that read the clock earlier but committed later
//! (a pass of the beat room racing another beat) keeps the newer time.

macro_rules! instance_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::instances::InstanceStatements for $store {
            async fn beat_instance(
                &self,
                tx: &mut Self::Tx,
                instance: &str,
                now: $crate::clock::Millis,
                forget_before: $crate::clock::Millis,
            ) -> $crate::StoreResult<()> {
                sqlx::query($crate::engine::stmt!(
                    "INSERT INTO instances (instance, beat_at) VALUES ($1, $2) \
                     @UPSERT(instance) beat_at = @GREATEST(instances.beat_at, @NEW(beat_at))"
                ))
                .bind(instance)
                .bind(now)
                .execute(&mut **tx)
                .await?;
                sqlx::query($crate::engine::stmt!(
                    "DELETE FROM instances WHERE beat_at < $1"
                ))
                .bind(forget_before)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            async fn last_beat(
                &self,
                tx: &mut Self::Tx,
                instance: &str,
            ) -> $crate::StoreResult<Option<$crate::clock::Millis>> {
                Ok(sqlx::query_scalar($crate::engine::stmt!(
                    "SELECT beat_at FROM instances WHERE instance = $1"
                ))
                .bind(instance)
                .fetch_optional(&mut **tx)
                .await?)
            }
        }
    };
}
pub(crate) use instance_statements;
