//! [`BulkStatements`](crate::engine::ops::bulk::BulkStatements): the events an
//! action covers are built at run time, like the operator filter they include.

macro_rules! bulk_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::ops::bulk::BulkStatements for $store {
            fn push_scope(
                qb: &mut sqlx::QueryBuilder<Self::Db>,
                tenant: switchboard_proto::TenantId,
                scope: &$crate::Scope<'_>,
                window: &$crate::engine::ops::bulk::Window,
            ) {
                use $crate::engine::ops::OpsStatements;
                qb.push(" FROM events e JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = ");
                qb.push_bind(tenant);
                qb.push(format!(
                    " AND e.status IN {}",
                    $crate::rows::applies_to(scope.action)
                ));
                if let Some(ids) = scope.ids {
                    if ids.is_empty() {
                        qb.push(" AND 1 = 0");
                    } else {
                        qb.push(" AND e.id IN (");
                        let mut list = qb.separated(", ");
                        for id in ids {
                            list.push_bind(id);
                        }
                        list.push_unseparated(")");
                    }
                }
                if let Some(filter) = scope.filter {
                    <Self as OpsStatements>::push_filter(qb, filter);
                }
                if let Some(after) = window.after {
                    qb.push(" AND e.id > ").push_bind(after);
                }
                if let Some(upto) = window.upto {
                    qb.push(" AND e.id <= ").push_bind(upto);
                }
            }

            async fn count_matching(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                scope: &$crate::Scope<'_>,
            ) -> $crate::StoreResult<(u64, Option<switchboard_proto::EventId>)> {
                use $crate::engine::ops::bulk::{BulkStatements, Window};
                let mut qb = sqlx::QueryBuilder::<Self::Db>::new("SELECT COUNT(*), MAX(e.id)");
                <Self as BulkStatements>::push_scope(&mut qb, tenant, scope, &Window::default());
                let row = qb.build().fetch_one(&mut **tx).await?;
                let count: i64 = sqlx::Row::try_get(&row, 0)?;
                let max = sqlx::Row::try_get(&row, 1)?;
                Ok((
                    count as u64,
                    max,
                ))
            }

            async fn find_targets(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                scope: &$crate::Scope<'_>,
                window: &$crate::engine::ops::bulk::Window,
            ) -> $crate::StoreResult<Vec<$crate::engine::ops::bulk::Target>> {
                use $crate::engine::ops::bulk::BulkStatements;
                let mut qb = sqlx::QueryBuilder::<Self::Db>::new(
                    "SELECT e.id, e.agent_id, e.seq, e.status",
                );
                <Self as BulkStatements>::push_scope(&mut qb, tenant, scope, window);
                qb.push(" ORDER BY e.id");
                if let Some(limit) = window.limit {
                    qb.push(" LIMIT ")
                        .push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
                }
                let rows = qb.build().fetch_all(&mut **tx).await?;
                rows.iter()
                    .map(|r| {
                        use $crate::rows::Cols;
                        Ok($crate::engine::ops::bulk::Target {
                            id: r.text("id")?,
                            agent: r.text("agent_id")?,
                            seq: r.int("seq")?,
                            status: r.text("status")?,
                        })
                    })
                    .collect()
            }

            async fn apply_to(
                &self,
                tx: &mut Self::Tx,
                action: switchboard_proto::BulkAction,
                target: &$crate::engine::ops::bulk::Target,
                now: $crate::clock::Millis,
            ) -> $crate::StoreResult<bool> {
                use switchboard_proto::BulkAction;
                let query = match action {
                    BulkAction::Replay => sqlx::query($crate::engine::stmt!(
                        "UPDATE events SET status = 'pending', attempts = 0, claim_token = NULL, \
                         lease_expires_at = NULL, available_at = $1, updated_at = $2 \
                         WHERE id = $3 AND status = $4"
                    ))
                    .bind(now),
                    BulkAction::Release => sqlx::query($crate::engine::stmt!(
                        "UPDATE events SET status = 'pending', claim_token = NULL, \
                         lease_expires_at = NULL, available_at = $1, updated_at = $2 \
                         WHERE id = $3 AND status = $4"
                    ))
                    .bind(now),
                    BulkAction::Purge => sqlx::query($crate::engine::stmt!(
                        "UPDATE events SET status = 'purged', payload = NULL, claim_token = NULL, \
                         lease_expires_at = NULL, updated_at = $1 WHERE id = $2 AND status = $3"
                    )),
                };
                let done = query
                    .bind(now)
                    .bind(&target.id)
                    .bind(&target.status)
                    .execute(&mut **tx)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn insert_audit(
                &self,
                tx: &mut Self::Tx,
                row: &$crate::engine::ops::bulk::NewAudit<'_>,
            ) -> $crate::StoreResult<i64> {
                let job = row.job;
                let finished = job.filter(|j| !j.state.is_live()).map(|_| row.now);
                // MySQL has no `INSERT … RETURNING` (MariaDB has): its id is the
                // session's `LAST_INSERT_ID()`, read in the same transaction.
                let mysql = !<Self as $crate::engine::Driver>::DIALECT.update_returning();
                let id = sqlx::query_scalar($crate::engine::stmt!(
                    "INSERT INTO audit_log (tenant_id, actor, action, ids, filter, count, at, \
                     job_state, job_total, job_rate, finished_at, job_owner, job_heartbeat_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13){}",
                    if mysql { "" } else { " RETURNING id" }
                ))
                .bind(row.tenant)
                .bind(row.actor.to_string())
                .bind(row.scope.action.as_str())
                .bind(
                    row.scope
                        .ids
                        .map(|ids| serde_json::to_string(ids).unwrap_or_default()),
                )
                .bind(
                    row.scope
                        .filter
                        .map(|f| serde_json::to_string(f).unwrap_or_default()),
                )
                .bind(row.count as i64)
                .bind(row.now)
                .bind(job.map(|j| j.state.as_str()))
                .bind(job.map(|j| j.total as i64))
                .bind(job.and_then(|j| j.rate).map(i64::from))
                .bind(finished)
                .bind(job.and_then(|j| j.owner))
                .bind(job.map(|_| row.now));
                if !mysql {
                    return Ok(id.fetch_one(&mut **tx).await?);
                }
                id.fetch_optional(&mut **tx).await?;
                let id: i64 = sqlx::query_scalar("SELECT CAST(LAST_INSERT_ID() AS SIGNED)")
                    .fetch_one(&mut **tx)
                    .await?;
                Ok(id)
            }
        }
    };
}
pub(crate) use bulk_statements;
