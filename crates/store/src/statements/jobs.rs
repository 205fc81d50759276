//! [`JobStatements`](crate::engine::jobs::JobStatements): a job is its
//! `audit_log` row; a step, a cancel and an end lock it `@FOR_UPDATE` first.

macro_rules! job_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::jobs::JobStatements for $store {
            async fn lock_job(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                id: i64,
            ) -> $crate::StoreResult<switchboard_proto::Job> {
                use $crate::rows::AUDIT_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {AUDIT_COLS} FROM audit_log \
                     WHERE tenant_id = $1 AND id = $2 AND job_state IS NOT NULL @FOR_UPDATE"
                ))
                .bind(tenant)
                .bind(id)
                .fetch_one(&mut **tx)
                .await?;
                $crate::rows::job_from_row(&row)
            }

            async fn update_job(
                &self,
                tx: &mut Self::Tx,
                id: i64,
                done: u64,
                state: Option<(switchboard_proto::JobState, Option<&str>)>,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<switchboard_proto::Job> {
                use $crate::rows::AUDIT_COLS;
                let finished = state.filter(|(s, _)| !s.is_live()).map(|_| now);
                let returning = <Self as $crate::engine::Driver>::DIALECT.update_returning();
                let update = sqlx::query($crate::engine::stmt!(
                    "UPDATE audit_log SET count = count + $1, job_heartbeat_at = $2, \
                     job_state = COALESCE($3, job_state), job_error = COALESCE($4, job_error), \
                     finished_at = COALESCE($5, finished_at) WHERE id = $6{}",
                    if returning { format!(" RETURNING {AUDIT_COLS}") } else { String::new() }
                ))
                .bind(done as i64)
                .bind(now)
                .bind(state.map(|(s, _)| s.as_str()))
                .bind(state.and_then(|(_, e)| e))
                .bind(finished)
                .bind(id);
                let row = if returning {
                    update.fetch_one(&mut **tx).await?
                } else {
                    // Locked by `lock_job`; the read sees the update.
                    update.execute(&mut **tx).await?;
                    sqlx::query($crate::engine::stmt!(
                        "SELECT {AUDIT_COLS} FROM audit_log WHERE id = $1"
                    ))
                    .bind(id)
                    .fetch_one(&mut **tx)
                    .await?
                };
                $crate::rows::job_from_row(&row)
            }

            async fn interrupt_jobs(
                &self,
                tx: &mut Self::Tx,
                now: $crate::clock::Millis,
                stale_before: $crate::clock::Millis,
                dead_before: $crate::clock::Millis,
            ) -> $crate::StoreResult<
                Vec<(switchboard_proto::TenantId, switchboard_proto::Job)>,
            > {
                use $crate::rows::{AUDIT_COLS, Cols};
                let rows = if <Self as $crate::engine::Driver>::DIALECT.update_returning() {
                    sqlx::query($crate::engine::stmt!(
                        "UPDATE audit_log SET job_state = 'interrupted', finished_at = $1 \
                         WHERE job_state IN ('running', 'cancelling') \
                         AND (job_heartbeat_at IS NULL OR job_heartbeat_at < $2 \
                         OR job_owner IN (SELECT instance FROM instances WHERE beat_at <= $3)) \
                         RETURNING tenant_id, {AUDIT_COLS}"
                    ))
                    .bind(now)
                    .bind(stale_before)
                    .bind(dead_before)
                    .fetch_all(&mut **tx)
                    .await?
                } else {
                    // Lock the stale jobs, end each, and read them back.
                    let ids: Vec<i64> = sqlx::query_scalar($crate::engine::stmt!(
                        "SELECT id FROM audit_log WHERE job_state IN ('running', 'cancelling') \
                         AND (job_heartbeat_at IS NULL OR job_heartbeat_at < $1 \
                         OR job_owner IN (SELECT instance FROM instances WHERE beat_at <= $2)) \
                         @FOR_UPDATE"
                    ))
                    .bind(stale_before)
                    .bind(dead_before)
                    .fetch_all(&mut **tx)
                    .await?;
                    let mut rows = Vec::with_capacity(ids.len());
                    for id in ids {
                        sqlx::query($crate::engine::stmt!(
                            "UPDATE audit_log SET job_state = 'interrupted', finished_at = $1 \
                             WHERE id = $2"
                        ))
                        .bind(now)
                        .bind(id)
                        .execute(&mut **tx)
                        .await?;
                        rows.push(
                            sqlx::query($crate::engine::stmt!(
                                "SELECT tenant_id, {AUDIT_COLS} FROM audit_log WHERE id = $1"
                            ))
                            .bind(id)
                            .fetch_one(&mut **tx)
                            .await?,
                        );
                    }
                    rows
                };
                rows.iter()
                    .map(|r| {
                        Ok((
                            r.id("tenant_id")?,
                            $crate::rows::job_from_row(r)?,
                        ))
                    })
                    .collect()
            }

            async fn read_job(
                &self,
                tenant: switchboard_proto::TenantId,
                id: i64,
            ) -> $crate::StoreResult<switchboard_proto::Job> {
                use $crate::rows::AUDIT_COLS;
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {AUDIT_COLS} FROM audit_log \
                     WHERE tenant_id = $1 AND id = $2 AND job_state IS NOT NULL"
                ))
                .bind(tenant)
                .bind(id)
                .fetch_one(self.read_pool())
                .await?;
                $crate::rows::job_from_row(&row)
            }

            async fn list_jobs(
                &self,
                tenant: switchboard_proto::TenantId,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::Job>> {
                use $crate::rows::AUDIT_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {AUDIT_COLS} FROM audit_log \
                     WHERE tenant_id = $1 AND job_state IS NOT NULL ORDER BY id DESC LIMIT $2"
                ))
                .bind(tenant)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter().map($crate::rows::job_from_row).collect()
            }
        }
    };
}
pub(crate) use job_statements;
