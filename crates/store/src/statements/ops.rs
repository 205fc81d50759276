//! [`OpsStatements`](crate::engine::ops::OpsStatements). The filter is built
//! at run time: `QueryBuilder::push_bind` writes each backend's placeholders.

macro_rules! ops_statements {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::engine::ops::OpsStatements for $store {
            type Db = <<<$store as $crate::engine::Driver>::Tx as std::ops::Deref>::Target
                as sqlx::Connection>::Database;

            fn push_filter(
                qb: &mut sqlx::QueryBuilder<Self::Db>,
                filter: &switchboard_proto::EventFilter,
            ) {
                use $crate::dialect::Dialect;
                if let Some(agent) = &filter.agent {
                    if let Ok(id) = agent.parse::<switchboard_proto::AgentId>() {
                        qb.push(" AND e.agent_id = ").push_bind(id);
                    } else {
                        qb.push(" AND a.name = ").push_bind(agent.clone());
                    }
                }
                if let Some(status) = filter.status {
                    qb.push(" AND e.status = ").push_bind(status.as_str());
                }
                if let Some(p) = filter.priority {
                    qb.push(" AND e.priority = ").push_bind(i64::from(p));
                }
                if let Some(c) = &filter.correlation_id {
                    qb.push(" AND e.correlation_id = ").push_bind(c.clone());
                }
                if let Some(q) = &filter.q {
                    let escaped = q
                        .replace('\\', "\\\\")
                        .replace('%', "\\%")
                        .replace('_', "\\_");
                    // Case-insensitive everywhere, as SQLite's LIKE is (for ASCII):
                    // PostgreSQL's ILIKE; on MySQL the column's binary collation
                    // overridden by a case-insensitive one (`\` is LIKE's escape
                    // there already).
                    let (like, escape) = match <Self as $crate::engine::Driver>::DIALECT {
                        Dialect::Sqlite => (" AND e.payload LIKE ", " ESCAPE '\\'"),
                        Dialect::Postgres => (" AND e.payload ILIKE ", " ESCAPE '\\'"),
                        Dialect::MySql => (" AND e.payload COLLATE utf8mb4_general_ci LIKE ", ""),
                    };
                    qb.push(like)
                        .push_bind(format!("%{escaped}%"))
                        .push(escape);
                }
            }

            async fn events_page(
                &self,
                tenant: switchboard_proto::TenantId,
                query: &switchboard_proto::EventListQuery,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::OpsEvent>> {
                use $crate::engine::ops::OpsStatements;
                let mut qb = sqlx::QueryBuilder::<Self::Db>::new(format!(
                    "SELECT {}, a.name AS agent_name FROM events e \
                     JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = ",
                    $crate::rows::prefixed_event_cols()
                ));
                qb.push_bind(tenant);
                <Self as OpsStatements>::push_filter(&mut qb, &query.filter());
                if let Some(after) = query.after {
                    qb.push(" AND e.id > ").push_bind(after);
                }
                qb.push(" ORDER BY e.id LIMIT ").push_bind(i64::from(limit));
                let rows = qb.build().fetch_all(self.read_pool()).await?;
                rows.iter().map($crate::rows::ops_event).collect()
            }

            async fn load_ops_event(
                &self,
                tx: &mut Self::Tx,
                tenant: switchboard_proto::TenantId,
                event: switchboard_proto::EventId,
            ) -> $crate::StoreResult<switchboard_proto::OpsEvent> {
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {}, a.name AS agent_name FROM events e \
                     JOIN agents a ON a.id = e.agent_id WHERE e.tenant_id = $1 AND e.id = $2",
                    $crate::rows::prefixed_event_cols()
                ))
                .bind(tenant)
                .bind(event)
                .fetch_one(&mut **tx)
                .await?;
                $crate::rows::ops_event(&row)
            }

            async fn event_history(
                &self,
                tx: &mut Self::Tx,
                event: switchboard_proto::EventId,
            ) -> $crate::StoreResult<Vec<switchboard_proto::HistoryEntry>> {
                use $crate::engine::timeline::{RowSteps, STEP_COLS};
                let row = sqlx::query($crate::engine::stmt!(
                    "SELECT {STEP_COLS} FROM events WHERE id = $1"
                ))
                .bind(event)
                .fetch_one(&mut **tx)
                .await?;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT action, actor, detail, at FROM event_history WHERE event_id = $1 \
                     ORDER BY id"
                ))
                .bind(event)
                .fetch_all(&mut **tx)
                .await?;
                let rows = rows
                    .iter()
                    .map($crate::rows::history_entry)
                    .collect::<$crate::StoreResult<Vec<_>>>()?;
                Ok(RowSteps::from_row(&row)?.timeline(rows))
            }

            async fn audit_entries(
                &self,
                tenant: switchboard_proto::TenantId,
                limit: u32,
            ) -> $crate::StoreResult<Vec<switchboard_proto::AuditEntry>> {
                use $crate::rows::AUDIT_COLS;
                let rows = sqlx::query($crate::engine::stmt!(
                    "SELECT {AUDIT_COLS} FROM audit_log WHERE tenant_id = $1 \
                     ORDER BY id DESC LIMIT $2"
                ))
                .bind(tenant)
                .bind(i64::from(limit))
                .fetch_all(self.read_pool())
                .await?;
                rows.iter().map($crate::rows::audit_entry).collect()
            }
        }
    };
}
pub(crate) use ops_statements;
